package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/postgres"
)

// isolationRole returns the test server's URL for a login role whose
// default_transaction_isolation is level, as some teams set on a role or a
// database. The role is created once and kept (roles belong to the server,
// not to a test's schema).
func isolationRole(t *testing.T, level string) string {
	t.Helper()
	pool := testPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := "fila_test_" + strings.ReplaceAll(level, " ", "_")
	// CREATE ROLE has no IF NOT EXISTS; a concurrent test may create it too.
	_, err := pool.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN
	CREATE ROLE %s LOGIN SUPERUSER;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$`, role))
	if err != nil {
		t.Fatalf("create role %s: %v", role, err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER ROLE %s SET default_transaction_isolation = '%s'`, role, level)); err != nil {
		t.Fatalf("alter role %s: %v", role, err)
	}
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// TestConformanceRepeatableRead runs the suite, both modes, as a role whose
// default isolation is REPEATABLE READ: the driver must run every statement
// at READ COMMITTED anyway (issue 38, item 0).
func TestConformanceRepeatableRead(t *testing.T) {
	base := isolationRole(t, "repeatable read")
	t.Run("skiplocked", func(t *testing.T) { runConformanceAt(t, base, nil) })
	t.Run("log", func(t *testing.T) {
		runConformanceAt(t, base, map[string]string{"fila_mode": "log", "fila_rotate_interval": "300ms"})
	})
}

// TestIsolationLateCommit: a message enqueued in a transaction that commits
// after rotation copied its generation is delivered, with the driver
// connected as a role whose default isolation is REPEATABLE READ or
// SERIALIZABLE. Under such a default the log mode's rotation read one
// snapshot for a whole function and emptied the generation with the late
// message in it (9 of 10 rounds lost under REPEATABLE READ).
func TestIsolationLateCommit(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			base := isolationRole(t, level)
			pool := testPool(t)
			schema := migratedSchema(t, pool)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			u, err := url.Parse(withParams(t, base, map[string]string{"fila_schema": schema, "fila_mode": "log",
				"fila_rotate_interval": "100ms"}))
			if err != nil {
				t.Fatal(err)
			}
			drv, err := postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger})
			if err != nil {
				t.Fatalf("open as a %s role: %v", level, err)
			}
			c, err := fila.New(drv)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var iso string
			if err := drv.(*postgres.Driver).Pool().QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso); err != nil {
				t.Fatal(err)
			}
			if iso != "read committed" {
				t.Errorf("the driver's connections run at %q, want read committed", iso)
			}
			const rounds = 4
			for i := range rounds {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// A failure before the commit must not leave the
				// transaction open: the pool's Close in the cleanup
				// would wait for its connection for ever. (After the
				// commit this is a no-op.)
				defer func() { _ = tx.Rollback(context.Background()) }()
				ids, err := c.EnqueueTx(ctx, tx, "late", []fila.Message{{Kind: "k", Body: []byte(fmt.Sprint("late ", i))}})
				if err != nil {
					_ = tx.Rollback(ctx)
					t.Fatalf("EnqueueTx: %v", err)
				}
				// Rotation makes the transaction's generation the oldest
				// (two rotations after the one it wrote to; counting
				// them from a look after the EnqueueTx was one too many
				// when a rotation committed in between, and the second
				// then waited for the open transaction: CI); the copy
				// then runs without seeing the message.
				waitOldest(t, pool, schema, writtenGen(t, pool, schema, tx))
				waitCopied(t, pool, schema)
				if err := tx.Commit(ctx); err != nil {
					t.Fatalf("Commit: %v", err)
				}
				// The generation is emptied after the commit.
				waitRotations(t, pool, schema, 2)
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				ds, err := c.Receive(rctx, "late", fila.ReceiveParams{Max: 1, Lease: time.Minute})
				rcancel()
				if err != nil {
					t.Fatalf("round %d: the late message was not received: %v", i, err)
				}
				if ds[0].ID != ids[0] {
					t.Fatalf("round %d: received %s, want %s", i, ds[0].ID, ids[0])
				}
				if err := ds[0].Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// writtenGen returns the generation of log_messages that the open
// transaction tx inserted into, from the lock its INSERT holds on that
// partition. (A read of the row in tx would lock every partition, and
// rotation would wait for tx.)
func writtenGen(t *testing.T, pool *pgxpool.Pool, schema string, tx pgx.Tx) int {
	t.Helper()
	var gens []int
	err := pool.QueryRow(context.Background(), `SELECT array_agg(right(c.relname, 1)::int)
		FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE l.pid = $1 AND l.mode = 'RowExclusiveLock' AND n.nspname = $2
			AND c.relname IN ('log_messages_0', 'log_messages_1', 'log_messages_2')`,
		tx.Conn().PgConn().PID(), schema).Scan(&gens)
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != 1 {
		t.Fatalf("the transaction holds row-exclusive locks on generations %v of log_messages, want one", gens)
	}
	return gens[0]
}

// waitCopied waits until the rotation copied the oldest generation.
func waitCopied(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Rotation skips while no position was taken since the last one
		// (log_state.seen_pos): take one, as waitRotations does. Without
		// it the copy waited for ever when waitRotations' last position
		// was taken before the rotation it saw, which load made likely.
		var copied bool
		if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT copied IS NOT NULL FROM %[1]s.log_state, nextval('%[1]s.log_pos')`, schema)).Scan(&copied); err != nil {
			t.Fatal(err)
		}
		if copied {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("rotation did not copy the oldest generation within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNewRefusesOtherIsolation: postgres.New over a pool whose connections
// default to another isolation level fails with ErrInvalid and says what to
// set; with the parameter set in the pool's config it works. A URL that
// asks for another level is refused too.
func TestNewRefusesOtherIsolation(t *testing.T) {
	base := isolationRole(t, "repeatable read")
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	_, err = postgres.New(ctx, rr, postgres.Options{Schema: schema})
	if !errors.Is(err, fila.ErrInvalid) || !strings.Contains(err.Error(), "default_transaction_isolation") {
		t.Errorf("New over a repeatable read pool: %v, want ErrInvalid naming default_transaction_isolation", err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	rc, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	d, err := postgres.New(ctx, rc, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("New with the parameter set: %v", err)
	}
	_ = d.Close()

	u, err := url.Parse(driverURL(t, map[string]string{"fila_schema": schema, "default_transaction_isolation": "serializable"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Open with default_transaction_isolation=serializable: %v, want ErrInvalid", err)
	}
}
