package testenv

import (
	"net/url"
	"testing"

	"github.com/fila-go/fila"
)

// Target is one place the tests of a package that runs on every broker
// use: a real broker, or PostgreSQL in its log mode.
type Target struct {
	// Name is the broker's name ("postgres", "postgres-log", "redis",
	// "rabbitmq", "mongo", "mysql"), for subtest names.
	Name string
	// URL returns the broker's Fila URL, or skips the test (fails it when CI
	// is set) when the broker is not available. PostgreSQL and MySQL URLs
	// migrate (fila_migrate=true), so Fila's tables exist.
	URL func(testing.TB) string
}

// Targets returns every real broker, PostgreSQL in both of its modes
// (skip-locked and log), in a fixed order.
func Targets() []Target {
	return []Target{
		{"postgres", func(tb testing.TB) string {
			tb.Helper()
			return WithParams(tb, PostgresURL(tb), "fila_migrate", "true")
		}},
		{"postgres-log", func(tb testing.TB) string {
			tb.Helper()
			return WithParams(tb, PostgresURL(tb), "fila_migrate", "true", "fila_mode", "log")
		}},
		{"redis", RedisURL},
		{"rabbitmq", RabbitMQURL},
		{"mongo", MongoURL},
		{"mysql", func(tb testing.TB) string {
			tb.Helper()
			return WithParams(tb, MySQLURL(tb), "fila_migrate", "true")
		}},
	}
}

// WithParams returns rawURL with the query parameters kv (name, value,
// name, value, ...) set, replacing a value it already has.
func WithParams(tb testing.TB, rawURL string, kv ...string) string {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("bad test URL %s: %v", fila.Redact(rawURL), err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
