package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/fila-go/fila/internal/skips"
)

// Environment variables that point the tests at the distributed forms of
// the brokers, which scripts/clusters starts on loopback (there are no
// containers for them).
const (
	// RedisClusterEnv holds a Redis Cluster URL, for example
	// redis://127.0.0.1:7101?fila_mode=cluster&addr=127.0.0.1:7102&addr=127.0.0.1:7103.
	RedisClusterEnv = "FILA_TEST_REDIS_CLUSTER_URL"
	// RabbitMQClusterEnv holds an AMQP URL of a RabbitMQ cluster naming
	// every node, for example
	// amqp://guest:guest@127.0.0.1:5681/?fila_hosts=127.0.0.1:5682,127.0.0.1:5683.
	RabbitMQClusterEnv = "FILA_TEST_RABBITMQ_CLUSTER_URL"
	// PgBouncerEnv holds a PostgreSQL URL through PgBouncer in transaction
	// pooling mode, for example
	// postgres://postgres@127.0.0.1:6432/test?sslmode=disable&default_query_exec_mode=exec&fila_listen=false.
	PgBouncerEnv = "FILA_TEST_PGBOUNCER_URL"
)

// RedisClusterURL returns the URL of a Redis Cluster, or skips the test
// (fails it when CI is set) when none is named.
func RedisClusterURL(tb testing.TB) string {
	tb.Helper()
	return formURL(tb, "Redis Cluster", RedisClusterEnv)
}

// RabbitMQClusterURL returns the URL of a RabbitMQ cluster, or skips the
// test (fails it when CI is set) when none is named.
func RabbitMQClusterURL(tb testing.TB) string {
	tb.Helper()
	return formURL(tb, "RabbitMQ cluster", RabbitMQClusterEnv)
}

// PgBouncerURL returns the URL of a PgBouncer in transaction pooling mode,
// or skips the test (fails it when CI is set) when none is named.
func PgBouncerURL(tb testing.TB) string { tb.Helper(); return formURL(tb, "PgBouncer", PgBouncerEnv) }

func formURL(tb testing.TB, name, env string) string {
	tb.Helper()
	if u := os.Getenv(env); u != "" {
		return u
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("testenv: no %s: CI is set and %s is empty (run eval \"$(scripts/clusters)\")", name, env)
	}
	skips.Record(name, fmt.Sprintf("set %s (eval \"$(scripts/clusters)\"); %s", env, servicesHint))
	tb.Skipf("testenv: no %s: set %s (eval \"$(scripts/clusters)\"); %s", name, env, servicesHint)
	return ""
}

// RabbitMQManagementEnv holds the address of the management plugin's HTTP
// API of the RabbitMQ behind FILA_TEST_RABBITMQ_URL, for example
// http://127.0.0.1:15672 (scripts/services enables the plugin).
const RabbitMQManagementEnv = "FILA_TEST_RABBITMQ_MANAGEMENT_URL"

// RabbitMQManagementURL returns the management API's address of the test
// RabbitMQ, or skips the test (fails it when CI is set) when none is named.
func RabbitMQManagementURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(RabbitMQManagementEnv); u != "" {
		return u
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("testenv: no RabbitMQ management API: CI is set and %s is empty (run eval \"$(scripts/services)\")", RabbitMQManagementEnv)
	}
	skips.Record("RabbitMQ management API", fmt.Sprintf("set %s (eval \"$(scripts/services)\"); %s", RabbitMQManagementEnv, servicesHint))
	tb.Skipf("testenv: no RabbitMQ management API: set %s (eval \"$(scripts/services)\"); %s", RabbitMQManagementEnv, servicesHint)
	return ""
}
