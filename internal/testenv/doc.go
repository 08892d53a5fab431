// Package testenv tells Fila's integration tests where to find a real broker.
//
// Every driver's tests talk to a real server over a real connection; no mock
// stands in for a broker. Each of [PostgresURL], [RedisURL], [RabbitMQURL] and
// [MongoURL] looks for a server in this order:
//
//  1. an environment variable: FILA_TEST_POSTGRES_URL, FILA_TEST_REDIS_URL,
//     FILA_TEST_RABBITMQ_URL or FILA_TEST_MONGO_URL. The project script
//     scripts/services starts the four servers on loopback and prints these
//     variables: eval "$(scripts/services)";
//  2. otherwise, when a Docker engine answers, a container started with
//     testcontainers-go (once per test binary, shared by all tests of the
//     package);
//  3. otherwise the test is skipped with one line naming the variable to set,
//     unless the CI environment variable is non-empty: then a missing server
//     fails the test.
package testenv
