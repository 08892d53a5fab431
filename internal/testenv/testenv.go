package testenv

import (
	"context"
	"os"
	"testing"
)

// Environment variables that point the tests at running servers.
const (
	// PostgresEnv holds a PostgreSQL URL, for example
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
	PostgresEnv = "FILA_TEST_POSTGRES_URL"
	// RedisEnv holds a Redis URL, for example redis://127.0.0.1:6379/0.
	RedisEnv = "FILA_TEST_REDIS_URL"
	// RabbitMQEnv holds an AMQP URL, for example amqp://guest:guest@127.0.0.1:5672/.
	RabbitMQEnv = "FILA_TEST_RABBITMQ_URL"
	// MongoEnv holds a MongoDB URL, for example mongodb://127.0.0.1:27017/.
	MongoEnv = "FILA_TEST_MONGO_URL"
)

// PostgresURL returns the URL of a PostgreSQL server for tests, or skips the
// test (fails it when CI is set) when none is available. A container's URL
// has user postgres, password postgres and database test.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "PostgreSQL", PostgresEnv, &postgresContainer, startPostgres)
}

// RedisURL returns the URL of a Redis server for tests, or skips the test
// (fails it when CI is set) when none is available.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "Redis", RedisEnv, &redisContainer, startRedis)
}

// RabbitMQURL returns the AMQP URL of a RabbitMQ server for tests, or skips
// the test (fails it when CI is set) when none is available. A container's
// URL uses the guest user.
func RabbitMQURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "RabbitMQ", RabbitMQEnv, &rabbitmqContainer, startRabbitMQ)
}

// MongoURL returns the URL of a MongoDB-compatible server for tests, or skips
// the test (fails it when CI is set) when none is available.
//
// The server behind FILA_TEST_MONGO_URL may be FerretDB (scripts/services
// runs FerretDB where no MongoDB is packaged), which lacks transactions,
// change streams, partial and TTL indexes and atomic findOneAndUpdate; tests
// tell it apart with the buildInfo command (see [IsFerretDBBuildInfo]). A
// container is a real MongoDB single-node replica set.
func MongoURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "MongoDB", MongoEnv, &mongoContainer, startMongo)
}

// serverURL resolves one server: the environment variable first, then a
// container shared by the whole test binary when a Docker engine answers,
// otherwise skip (or fail under CI).
func serverURL(tb testing.TB, name, env string, c *container, start func(context.Context) (string, error)) string {
	tb.Helper()
	if u := os.Getenv(env); u != "" {
		return u
	}
	if err := dockerAvailable(); err != nil {
		missing(tb, name, env)
		return ""
	}
	u, err := c.get(start)
	if err != nil {
		tb.Fatalf("testenv: %s is empty and Docker answers, but the %s container did not start: %v", env, name, err)
	}
	return u
}

// missing skips the test, or fails it when the CI environment variable is set.
func missing(tb testing.TB, name, env string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("testenv: no %s server: CI is set, %s is empty and no Docker engine answers (run eval \"$(scripts/services)\")", name, env)
	}
	tb.Skipf("testenv: no %s server: set %s (eval \"$(scripts/services)\") or start a Docker engine", name, env)
}
