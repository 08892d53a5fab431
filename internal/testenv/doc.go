// Package testenv tells Fila's integration tests where to find a real broker.
//
// Every driver's tests talk to a real server over a real connection; no mock
// stands in for a broker. [PostgresURL], [RedisURL], [RabbitMQURL],
// [MongoURL] and [MySQLURL] are package filatest's URL, which looks for a
// server in this order:
//
//  1. an environment variable: FILA_TEST_POSTGRES_URL, FILA_TEST_REDIS_URL,
//     FILA_TEST_RABBITMQ_URL, FILA_TEST_MONGO_URL or FILA_TEST_MYSQL_URL. The
//     project script scripts/services installs and starts the five servers
//     on loopback (MariaDB for MySQL) and prints these variables:
//     eval "$(scripts/services)"; scripts/test does that and runs every test;
//  2. otherwise, when a Docker engine answers, a container started with
//     testcontainers-go, once per test binary and shared by its tests (so
//     tests must use unique queue names);
//  3. otherwise the test is skipped with one line naming the variable to set,
//     unless the CI environment variable is non-empty: then a missing server
//     fails the test, naming the server.
//
// See package filatest for the Docker details. The distributed forms
// ([RedisClusterURL], [RabbitMQClusterURL], [PgBouncerURL]) come only from
// their variables (scripts/clusters), and [Chromium] from
// FILA_TEST_CHROMIUM or PATH.
//
// # Skips are reported
//
// Each test package that reaches a server through this package has
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// which prints, after the tests, one line per broker, cluster form or browser
// the package's tests were skipped for, where a plain `go test ./...` shows
// it (see filatest.Main).
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
