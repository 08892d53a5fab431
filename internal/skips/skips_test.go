package skips

import (
	"reflect"
	"testing"
)

func TestLines(t *testing.T) {
	mu.Lock()
	saved := entries
	entries = nil
	mu.Unlock()
	t.Cleanup(func() { mu.Lock(); entries = saved; mu.Unlock() })

	Record("PostgreSQL", "no server: set FILA_TEST_POSTGRES_URL")
	Record("Redis Cluster", "set FILA_TEST_REDIS_CLUSTER_URL")
	Record("PostgreSQL", "a later reason is not reported")
	want := []string{
		"fila: PostgreSQL tests skipped in example.com/app (2 tests): no server: set FILA_TEST_POSTGRES_URL",
		"fila: Redis Cluster tests skipped in example.com/app (1 test): set FILA_TEST_REDIS_CLUSTER_URL",
	}
	if got := Lines("example.com/app"); !reflect.DeepEqual(got, want) {
		t.Errorf("Lines:\n got %q\nwant %q", got, want)
	}
}

func TestMain(m *testing.M) {
	if got, want := callerPackage(), "github.com/fila-go/fila/internal/skips"; got != want {
		panic("callerPackage in TestMain = " + got + "; want " + want)
	}
	Main(m)
}
