// Package testenv tells Fila's integration tests where to find a real broker.
//
// Every driver's tests talk to a real server over a real connection; no mock
// stands in for a broker. Each of [PostgresURL], [RedisURL], [RabbitMQURL] and
// [MongoURL] looks for a server in this order:
//
//  1. an environment variable: FILA_TEST_POSTGRES_URL, FILA_TEST_REDIS_URL,
//     FILA_TEST_RABBITMQ_URL or FILA_TEST_MONGO_URL. The project script
//     scripts/services installs and starts the four servers on loopback and
//     prints these variables: eval "$(scripts/services)";
//  2. otherwise, when a Docker engine answers, a container started with
//     testcontainers-go;
//  3. otherwise the test is skipped with one line naming the variable to set,
//     unless the CI environment variable is non-empty: then a missing server
//     fails the test, naming the server.
//
// # Docker
//
// Whether a Docker engine answers is decided once per test binary by
// testcontainers' provider health check (the engine's Info call). Without an
// engine it answers in well under a millisecond (no socket to dial), so tests
// skip at once; a hanging engine is given 5 s.
//
// Each broker's container is started on first use, once per test binary
// (sync.Once per broker), and shared by every test of the package, so tests
// must use unique queue names. This package never stops the containers: the
// test binary exits and testcontainers' reaper container (Ryuk), which holds a
// connection from the binary, removes them and their volumes. With the reaper
// disabled (TESTCONTAINERS_RYUK_DISABLED=true) the containers are left running
// and must be removed by hand (they carry the org.testcontainers labels).
// Images: postgres:15-alpine (user postgres, password postgres, database
// test), redis:7-alpine, rabbitmq:3.12-management-alpine (guest/guest) and
// mongo:7 run as a single-node replica set "rs0", so transactions and change
// streams work; its URL sets directConnection=true.
//
// A container that fails to start when Docker answers fails the test (it is
// not skipped): the server was expected.
//
// # FerretDB
//
// No MongoDB server is packaged for Debian, so scripts/services runs FerretDB
// v1 (MongoDB wire protocol over SQLite) for FILA_TEST_MONGO_URL. FerretDB v1
// lacks transactions, change streams, partial and TTL indexes, and its
// findOneAndUpdate is not atomic under concurrency. Mongo tests tell the two
// apart with the buildInfo command and [IsFerretDBBuildInfo], and skip what
// FerretDB lacks with that reason; against a real MongoDB (for example the
// container above) they run.
package testenv
