package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

// The worker suite over the real drivers. Each opens its server by URL, as an
// application would; servers come from testenv (FILA_TEST_* variables, else
// containers, else the test skips). To add a driver, add a test like these
// and import its package for its URL scheme.

func TestWorkerPostgres(t *testing.T) {
	runWorkerTests(t, urlOpener(testenv.PostgresURL(t), map[string]string{"fila_migrate": "true"}))
}

// TestWorkerPostgresLog runs the suite on the log mode, rotating every
// 300ms (as the conformance suite does) so rotations happen while jobs run.
func TestWorkerPostgresLog(t *testing.T) {
	raw := testenv.PostgresURL(t)
	runWorkerTests(t, urlOpener(raw, map[string]string{"fila_migrate": "true",
		"fila_schema": postgresSchema(t, raw, "fila_worker_log"), "fila_mode": "log", "fila_rotate_interval": "300ms"}))
}

// postgresSchema names a schema of t's own on the PostgreSQL test server,
// migrated at open and dropped when t ends, so the suite runs on the tables
// of this build's migrations, whatever an earlier build left in the
// default schema.
func postgresSchema(t *testing.T, raw, prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + "_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			t.Logf("drop test schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("drop test schema %s: %v", schema, err)
		}
	})
	return schema
}

func TestWorkerRedis(t *testing.T) {
	// A blocked Redis receive notices cancellation only when its XREAD
	// BLOCK ends (default 1s); a shorter block keeps every worker stop quick.
	runWorkerTests(t, urlOpener(testenv.RedisURL(t), map[string]string{"fila_block": "100ms"}))
}

func TestWorkerRabbitMQ(t *testing.T) {
	runWorkerTests(t, urlOpener(testenv.RabbitMQURL(t), nil))
}

// The distributed forms scripts/clusters starts.

func TestWorkerRedisCluster(t *testing.T) {
	runWorkerTests(t, urlOpener(testenv.RedisClusterURL(t), map[string]string{"fila_block": "100ms", "fila_wait_replicas": "1"}))
}

func TestWorkerRabbitMQCluster(t *testing.T) {
	runWorkerTests(t, urlOpener(testenv.RabbitMQClusterURL(t), nil))
}

func TestWorkerPgBouncer(t *testing.T) {
	runWorkerTests(t, urlOpener(testenv.PgBouncerURL(t), map[string]string{"fila_migrate": "true", "fila_poll_interval": "100ms"}))
}

// TestWorkerMySQL runs the suite on MariaDB (MySQL under testcontainers),
// whose receivers of other processes poll (fila_poll_interval).
func TestWorkerMySQL(t *testing.T) {
	runWorkerTests(t, urlOpener(testenv.MySQLURL(t), map[string]string{"fila_migrate": "true"}))
}

func TestWorkerMongo(t *testing.T) {
	raw := testenv.MongoURL(t)
	runWorkerTests(t, urlOpener(raw, map[string]string{"fila_database": mongoDatabase(t, raw, "fila_worker")}))
}

// mongoDatabase names a database of t's own on the Mongo test server,
// dropped when t ends. Packages' tests run at once against one server, and
// on FerretDB a command that runs out of time can break the database for
// every client of it (see package mongo).
func mongoDatabase(t *testing.T, raw, prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := prefix + "_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongodriver.Connect(options.Client().ApplyURI(raw))
		if err != nil {
			t.Logf("drop test database %s: %v", db, err)
			return
		}
		defer c.Disconnect(ctx)
		if err := c.Database(db).Drop(ctx); err != nil {
			t.Logf("drop test database %s: %v", db, err)
		}
	})
	return db
}

// urlOpener returns an open function for runWorkerTests that opens raw with
// extra query parameters.
func urlOpener(raw string, params map[string]string) func(t *testing.T) *fila.Client {
	return func(t *testing.T) *fila.Client {
		t.Helper()
		c, err := openURL(raw, params)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeWithin(t, c, time.Minute) })
		return c
	}
}

// closeWithin closes c and fails t if Close takes longer than limit,
// naming where each goroutine of the library waits: a Close that hangs
// fails its test at once instead of holding the package until go test's
// timeout, whose report CI's log cuts.
func closeWithin(t *testing.T, c *fila.Client, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Close()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Errorf("Client.Close did not return within %v; the library's goroutines wait in:\n%s",
			limit, strings.Join(libraryWaits(), "\n"))
	}
}

// openURL opens raw with extra query parameters.
func openURL(raw string, params map[string]string) (*fila.Client, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("test URL: %w", err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", fila.Redact(u.String()), err)
	}
	return c, nil
}
