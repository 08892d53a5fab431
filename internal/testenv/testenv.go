package testenv

import (
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
// test (fails it when CI is set) when none is available.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "PostgreSQL", PostgresEnv)
}

// RedisURL returns the URL of a Redis server for tests, or skips the test
// (fails it when CI is set) when none is available.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "Redis", RedisEnv)
}

// RabbitMQURL returns the AMQP URL of a RabbitMQ server for tests, or skips
// the test (fails it when CI is set) when none is available.
func RabbitMQURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "RabbitMQ", RabbitMQEnv)
}

// MongoURL returns the URL of a MongoDB-compatible server for tests, or skips
// the test (fails it when CI is set) when none is available.
func MongoURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "MongoDB", MongoEnv)
}

// serverURL resolves one server: environment variable first, otherwise skip
// (or fail under CI).
func serverURL(tb testing.TB, name, env string) string {
	tb.Helper()
	if u := os.Getenv(env); u != "" {
		return u
	}
	missing(tb, name, env)
	return ""
}

// missing skips the test, or fails it when the CI environment variable is set.
func missing(tb testing.TB, name, env string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("testenv: no %s server: CI is set but %s is empty and no Docker engine answers (run scripts/services)", name, env)
	}
	tb.Skipf("testenv: no %s server: set %s (eval \"$(scripts/services)\") or run a Docker engine", name, env)
}
