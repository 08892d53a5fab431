package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/postgres"
)

// quietLogger drops the driver's logs in tests.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testPool opens a pool on the test server, closed when t ends.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testPoolWith is testPool with its configuration changed by set first
// (one connection, a server setting).
func testPoolWith(t testing.TB, set func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatalf("pgxpool.ParseConfig: %v", err)
	}
	set(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgxpool.NewWithConfig: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// freshSchema returns a schema name unique to this test and drops the
// schema when the test ends. It does not create it.
func freshSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	s := "fila_test_" + randHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", s, err)
		}
	})
	return s
}

// migratedSchema returns a fresh, migrated schema.
func migratedSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	s := freshSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := postgres.Migrate(ctx, pool, s); err != nil {
		t.Fatalf("Migrate(%s): %v", s, err)
	}
	return s
}

// driverURL returns the test server's URL with extra query parameters.
func driverURL(t testing.TB, params map[string]string) string {
	t.Helper()
	return withParams(t, testenv.PostgresURL(t), params)
}

// withParams returns base with extra query parameters.
func withParams(t testing.TB, base string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("test URL: %v", err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
