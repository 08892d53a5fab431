package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newDriver returns a driver over pool in schema, closed when t ends.
func newDriver(t testing.TB, pool *pgxpool.Pool, o postgres.Options) *postgres.Driver {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger
	}
	d, err := postgres.New(ctxT(t, 30*time.Second), pool, o)
	if err != nil {
		t.Fatalf("postgres.New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func newClient(t testing.TB, drv backend.Driver) *fila.Client {
	c, err := fila.New(drv, fila.WithLogger(quietLogger))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond every 10ms until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpenURLParameters(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx := ctxT(t, 30*time.Second)
	bad := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"unknown fila param", map[string]string{"fila_schema": schema, "fila_bogus": "1"}, "fila_bogus"},
		{"bad bool", map[string]string{"fila_schema": schema, "fila_listen": "perhaps"}, "fila_listen"},
		{"bad duration", map[string]string{"fila_schema": schema, "fila_poll_interval": "often"}, "fila_poll_interval"},
		{"zero poll", map[string]string{"fila_schema": schema, "fila_poll_interval": "0s"}, "fila_poll_interval"},
		{"bad schema", map[string]string{"fila_schema": "Robert'); DROP TABLE"}, "schema"},
		{"not migrated", map[string]string{"fila_schema": "fila_never_" + randHex(4)}, "postgres.Migrate"},
		{"bad pgx param", map[string]string{"fila_schema": schema, "pool_max_conns": "many"}, "pool_max_conns"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fila.Open(ctx, driverURL(t, tc.params))
			if err == nil {
				c.Close()
				t.Fatalf("Open succeeded, want ErrInvalid")
			}
			if !errors.Is(err, fila.ErrInvalid) {
				t.Errorf("Open: want ErrInvalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open error %q does not mention %q", err, tc.want)
			}
		})
	}

	t.Run("pgx params pass through", func(t *testing.T) {
		for _, scheme := range []string{"postgres", "postgresql"} {
			raw := driverURL(t, map[string]string{"fila_schema": schema, "application_name": "fila-passthrough",
				"pool_max_conns": "2", "fila_listen": "false", "fila_poll_interval": "100ms"})
			u, _ := url.Parse(raw)
			u.Scheme = scheme
			c, err := fila.Open(ctx, u.String())
			if err != nil {
				t.Fatalf("Open(%s): %v", scheme, err)
			}
			d := c.Driver().(*postgres.Driver)
			var app string
			if err := d.Pool().QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil {
				t.Fatal(err)
			}
			if app != "fila-passthrough" {
				t.Errorf("application_name %q, want it passed to pgx", app)
			}
			if n := d.Pool().Config().MaxConns; n != 2 {
				t.Errorf("pool max conns %d, want 2", n)
			}
			if d.Schema() != schema {
				t.Errorf("schema %q, want %q", d.Schema(), schema)
			}
			c.Close()
		}
	})

	t.Run("unreachable server is retryable", func(t *testing.T) {
		_, err := fila.Open(ctx, "postgres://postgres@127.0.0.1:1/test?connect_timeout=2&sslmode=disable")
		if !postgres.IsRetryable(err) {
			t.Errorf("Open of a closed port: want a retryable error, got %v", err)
		}
	})

	t.Run("MigrateURL", func(t *testing.T) {
		s := freshSchema(t, pool)
		if err := postgres.MigrateURL(ctx, driverURL(t, map[string]string{"fila_schema": s, "fila_listen": "false"})); err != nil {
			t.Fatalf("MigrateURL: %v", err)
		}
		c, err := fila.Open(ctx, driverURL(t, map[string]string{"fila_schema": s}))
		if err != nil {
			t.Fatalf("Open after MigrateURL: %v", err)
		}
		c.Close()
		if err := postgres.MigrateURL(ctx, driverURL(t, map[string]string{"fila_nope": "1"})); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("MigrateURL with an unknown fila_ parameter: want ErrInvalid, got %v", err)
		}
	})

	t.Run("migrate at open", func(t *testing.T) {
		s := freshSchema(t, pool)
		c, err := fila.Open(ctx, driverURL(t, map[string]string{"fila_schema": s, "fila_migrate": "true"}))
		if err != nil {
			t.Fatalf("Open with fila_migrate: %v", err)
		}
		defer c.Close()
		if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"}); err != nil {
			t.Errorf("Enqueue: %v", err)
		}
	})
}

func TestConcurrentMigrations(t *testing.T) {
	base := testPool(t)
	schema := freshSchema(t, base)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		// Separate pools, as separate processes would have.
		pool := testPool(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = postgres.Migrate(ctxT(t, 60*time.Second), pool, schema)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	ctx := ctxT(t, 10*time.Second)
	var versions []int
	rows, err := base.Query(ctx, "SELECT version FROM "+schema+".schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != postgres.SchemaVersion() || versions[len(versions)-1] != postgres.SchemaVersion() {
		t.Errorf("applied versions %v, want 1..%d once each", versions, postgres.SchemaVersion())
	}
	// Migrating an up-to-date schema is a no-op.
	if err := postgres.Migrate(ctx, base, schema); err != nil {
		t.Errorf("second Migrate: %v", err)
	}

	// Upgrade: take the schema back to version 1; opening refuses it with
	// a hint, Migrate brings it forward.
	if _, err := base.Exec(ctx, `DO $$DECLARE f record; BEGIN
	FOR f IN SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = '`+schema+`' AND p.proname LIKE 'log\_%' LOOP
		EXECUTE 'DROP FUNCTION ' || f.sig;
	END LOOP; END$$`); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Exec(ctx, "DROP TABLE "+schema+".log_messages, "+schema+".log_leases, "+schema+".log_settles, "+schema+".log_claims, "+
		schema+".log_timers, "+schema+".log_cursors, "+schema+".log_state, "+schema+".log_dedup, "+schema+".log_dead, "+
		schema+".log_marks; DROP SEQUENCE "+schema+".log_pos"); err != nil {
		t.Fatal(err)
	}
	// Version 17's levels: dropping the column drops the index over it,
	// which version 1 made without it.
	if _, err := base.Exec(ctx, "ALTER TABLE "+schema+".messages DROP COLUMN priority; ALTER TABLE "+schema+".dead DROP COLUMN priority; "+
		"CREATE INDEX messages_claim ON "+schema+".messages (queue, visible_at, id)"); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Exec(ctx, "DROP TABLE "+schema+".marks; ALTER TABLE "+schema+".messages DROP COLUMN run_at; DELETE FROM "+schema+".schema_migrations WHERE version > 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.New(ctx, base, postgres.Options{Schema: schema}); !errors.Is(err, fila.ErrInvalid) || !errors.Is(err, postgres.ErrNotMigrated) || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("New on a version-1 schema: want ErrInvalid naming version 1, got %v", err)
	}
	if err := postgres.Migrate(ctx, base, schema); err != nil {
		t.Fatalf("upgrade Migrate: %v", err)
	}
	newDriver(t, base, postgres.Options{Schema: schema})
}

// TestWakeUpLatency measures how soon a receive blocked on an empty queue
// returns after an enqueue from another driver instance, with LISTEN on.
func TestWakeUpLatency(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	consumer := newDriver(t, pool, postgres.Options{Schema: schema})
	producer := newClient(t, newDriver(t, pool, postgres.Options{Schema: schema}))
	c := newClient(t, consumer)
	q := "wake-" + randHex(4)
	const rounds = 15
	lat := make([]time.Duration, 0, rounds)
	for i := 0; i < rounds; i++ {
		type result struct {
			at  time.Time
			err error
		}
		got := make(chan result, 1)
		go func() {
			ds, err := c.Receive(ctxT(t, 20*time.Second), q, fila.ReceiveParams{})
			at := time.Now()
			if err == nil {
				err = c.AckBatch(context.Background(), ds)
			}
			got <- result{at, err}
		}()
		waitFor(t, 10*time.Second, "the receive to block with LISTEN up", func() bool {
			return postgres.Sleeping(consumer) == 1 && postgres.ListenerUp(consumer)
		})
		start := time.Now()
		if _, err := producer.Enqueue(ctxT(t, 10*time.Second), q, fila.Message{Kind: "wake"}); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("Receive: %v", r.err)
		}
		lat = append(lat, r.at.Sub(start))
	}
	slices.Sort(lat)
	median, worst := lat[len(lat)/2], lat[len(lat)-1]
	t.Logf("wake-up latency after enqueue (enqueue round trip included): median %v, max %v over %d rounds", median, worst, rounds)
	if median > 100*time.Millisecond {
		t.Errorf("median wake-up latency %v, want well under 100ms", median)
	}
}

// TestListenConnectionKilled kills the LISTEN connection with
// pg_terminate_backend: messages enqueued while it is down are still
// delivered promptly (the receive polls every second while the listener is
// down and is woken when it comes back), and wake-ups work again after the
// reconnect.
func TestListenConnectionKilled(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	consumer := newDriver(t, pool, postgres.Options{Schema: schema}) // 30s safety poll
	c := newClient(t, consumer)
	q := "killed-" + randHex(4)
	ctx := ctxT(t, 60*time.Second)
	listeners := func() []int32 {
		rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE query = $1`,
			`LISTEN "`+postgres.ChannelName(schema)+`"`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	receive := func() <-chan error {
		got := make(chan error, 1)
		go func() {
			ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10})
			if err == nil {
				err = c.AckBatch(ctx, ds)
			}
			got <- err
		}()
		waitFor(t, 10*time.Second, "the receive to block", func() bool { return postgres.Sleeping(consumer) == 1 })
		return got
	}
	for round := 0; round < 2; round++ {
		got := receive()
		waitFor(t, 10*time.Second, "the LISTEN connection", func() bool { return len(listeners()) == 1 && postgres.ListenerUp(consumer) })
		pid := listeners()[0]
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
		}
		waitFor(t, 5*time.Second, "the driver to notice the lost LISTEN connection", func() bool {
			return !postgres.ListenerUp(consumer) || !slices.Contains(listeners(), pid)
		})
		start := time.Now()
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "after-kill"}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			t.Logf("round %d: delivered %v after the enqueue with the LISTEN connection killed", round, time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: message not delivered within 5s of the LISTEN connection being killed", round)
		}
	}
	// After the reconnect, wake-ups are immediate again.
	got := receive()
	waitFor(t, 10*time.Second, "the LISTEN connection to come back", func() bool { return postgres.ListenerUp(consumer) })
	start := time.Now()
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "after-reconnect"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("wake-up after reconnect took %v", d)
	}
}

// TestPollingWithoutListen: with fila_listen=false, blocked receives poll at
// the configured interval and hold no LISTEN connection.
func TestPollingWithoutListen(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	drv := newDriver(t, pool, postgres.Options{Schema: schema, DisableListen: true, PollInterval: 100 * time.Millisecond})
	c := newClient(t, drv)
	q := "poll-" + randHex(4)
	ctx := ctxT(t, 30*time.Second)
	got := make(chan error, 1)
	go func() {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
		if err == nil {
			err = c.AckBatch(ctx, ds)
		}
		got <- err
	}()
	waitFor(t, 10*time.Second, "the receive to block", func() bool { return postgres.Sleeping(drv) == 1 })
	start := time.Now()
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "polled"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("polling receive took %v with a 100ms poll interval", d)
	}
	if postgres.ListenerUp(drv) {
		t.Errorf("LISTEN connection is up with DisableListen")
	}
}

// TestTxEnqueue: a message enqueued in a transaction is invisible until
// commit and gone on rollback; every pgx query runner is accepted.
func TestTxEnqueue(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	drv := newDriver(t, pool, postgres.Options{Schema: schema})
	c := newClient(t, drv)
	ctx := ctxT(t, 30*time.Second)
	q := "tx-" + randHex(4)

	count := func() int64 {
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return st.Ready
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(ctx, tx, q, []fila.Message{{Kind: "committed"}, {Kind: "committed"}}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d messages visible before commit", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Errorf("%d messages after commit, want 2", n)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(ctx, tx, q, []fila.Message{{Kind: "rolled-back", DedupKey: "k"}}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Errorf("%d messages after rollback, want 2", n)
	}
	// The rolled-back dedup key is free.
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "dedup", DedupKey: "k"}); err != nil {
		t.Errorf("Enqueue with the rolled-back key: %v", err)
	}

	// Other query runners: a pooled connection, a plain pgx.Conn.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(ctx, conn, q, []fila.Message{{Kind: "conn"}}); err != nil {
		t.Errorf("EnqueueTx(*pgxpool.Conn): %v", err)
	}
	conn.Release()
	if _, err := c.EnqueueTx(ctx, "not a tx", q, []fila.Message{{Kind: "x"}}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("EnqueueTx(string): want ErrInvalid, got %v", err)
	}
	if n := count(); n != 4 {
		t.Errorf("%d messages, want 4", n)
	}
}

// TestConnectionLossIsRetryable terminates every connection of a driver's
// pool: calls fail with a retryable error at most briefly, then the pool
// recovers by itself.
func TestConnectionLossIsRetryable(t *testing.T) {
	admin := testPool(t)
	schema := migratedSchema(t, admin)
	app := "fila-loss-" + randHex(4)
	c, err := fila.Open(ctxT(t, 30*time.Second), driverURL(t, map[string]string{
		"fila_schema": schema, "application_name": app, "pool_max_conns": "3",
	}), fila.WithLogger(quietLogger))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t, 60*time.Second)
	q := "loss-" + randHex(4)
	// Warm the pool.
	for i := 0; i < 3; i++ {
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "warm"}); err != nil {
			t.Fatal(err)
		}
	}
	var killed int
	if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no connection of the driver found to kill")
	}
	var failures int
	ok := false
	for i := 0; i < 10 && !ok; i++ {
		_, err := c.Enqueue(ctx, q, fila.Message{Kind: "after-loss"})
		switch {
		case err == nil:
			ok = true
		case postgres.IsRetryable(err):
			failures++
		default:
			t.Fatalf("Enqueue after connection loss: %v is not retryable", err)
		}
	}
	if !ok {
		t.Fatalf("pool did not recover after %d retryable failures", failures)
	}
	t.Logf("killed %d connections; %d retryable failures before the pool recovered", killed, failures)
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10})
	if err != nil || len(ds) == 0 {
		t.Fatalf("Receive after recovery: %d, %v", len(ds), err)
	}
}

// TestDedupWithinBatchAndAcrossTx covers the holder lookup paths: a
// duplicate of an earlier message of the same batch and of a stored one.
func TestDedupWithinBatch(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := newClient(t, newDriver(t, pool, postgres.Options{Schema: schema}))
	ctx := ctxT(t, 30*time.Second)
	q := "dedup-" + randHex(4)
	first, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", DedupKey: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.EnqueueBatch(ctx, q, []fila.Message{
		{Kind: "k", DedupKey: "b"}, {Kind: "k", DedupKey: "a"}, {Kind: "k", DedupKey: "b"}, {Kind: "k"},
	})
	var dup *fila.DuplicateError
	if !errors.As(err, &dup) || dup.ID != first {
		t.Fatalf("EnqueueBatch: want a DuplicateError for key a held by %s, got %v", first, err)
	}
	if ids[1] != first || ids[2] != ids[0] || ids[3] == ids[0] {
		t.Errorf("ids %v: want [x, %s, x, y]", ids, first)
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != 3 {
		t.Errorf("ready %d, want 3", st.Ready)
	}
}

func ExampleNew() {
	// See example_tx_test.go for a runnable example; this one shows the
	// wiring of a driver over an existing pool.
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		panic(err)
	}
	drv, err := postgres.New(ctx, pool, postgres.Options{Schema: "jobs", Migrate: true})
	if err != nil {
		panic(err)
	}
	client, err := fila.New(drv)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	fmt.Println(drv.Schema())
}

// TestRetryWakesOtherReceivers: a receive blocked in another driver
// instance, sleeping until the lease deadline of the only message, wakes when
// the holder releases it early.
func TestRetryWakesOtherReceivers(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	holder := newClient(t, newDriver(t, pool, postgres.Options{Schema: schema}))
	waitingDrv := newDriver(t, pool, postgres.Options{Schema: schema})
	waiting := newClient(t, waitingDrv)
	ctx := ctxT(t, 30*time.Second)
	q := "release-" + randHex(4)
	if _, err := holder.Enqueue(ctx, q, fila.Message{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	ds, err := holder.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ds, err := waiting.Receive(ctx, q, fila.ReceiveParams{})
		if err == nil {
			err = waiting.AckBatch(ctx, ds)
		}
		got <- err
	}()
	waitFor(t, 10*time.Second, "the other receive to block", func() bool {
		return postgres.Sleeping(waitingDrv) == 1 && postgres.ListenerUp(waitingDrv)
	})
	start := time.Now()
	if err := ds[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("released message received by the other driver after %v", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("a receive blocked until the old lease deadline did not see the release")
	}
}

// TestNotificationWakesOneReceive: with many receives of one driver blocked
// on a queue, one enqueued message costs a couple of claims, not one per
// blocked receive; a burst of messages still reaches every receive.
func TestNotificationWakesOneReceive(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	drv := newDriver(t, pool, postgres.Options{Schema: schema})
	c := newClient(t, drv)
	ctx := ctxT(t, 30*time.Second)
	q := "herd-" + randHex(4)
	const n = 10
	// The listener is up before the receives start: when it connects it
	// wakes every blocked receive (notifications may have been missed), and
	// those wake-ups, still on their way when the receives are counted as
	// blocked, once counted as claims of the one message (CI: 12 claims).
	waitFor(t, 10*time.Second, "the LISTEN connection", func() bool {
		_, _ = c.Receive(ctxT(t, 10*time.Millisecond), "warm-up-"+q, fila.ReceiveParams{Max: 1})
		return postgres.ListenerUp(drv)
	})
	got := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1})
			if err == nil {
				err = c.AckBatch(ctx, ds)
			}
			got <- err
		}()
	}
	waitFor(t, 10*time.Second, "all receives to block", func() bool {
		return postgres.Sleeping(drv) == n && postgres.ListenerUp(drv)
	})
	before := postgres.Claims(drv)
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the others to sleep again", func() bool { return postgres.Sleeping(drv) == n-1 })
	if claims := postgres.Claims(drv) - before; claims > 3 {
		t.Errorf("one message cost %d claims with %d blocked receives; want at most 3", claims, n)
	}
	// A burst wakes them all.
	msgs := make([]fila.Message, n-1)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "burst"}
	}
	if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n-1; i++ {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d receives got a message of the burst", i, n-1)
		}
	}
}

// TestCoalescedNotificationsMissNothing: notifications of concurrent
// enqueues are sent after their INSERTs committed and coalesced per queue
// (at most maxInFlight in flight), so a burst costs no more notifications
// than enqueues; yet every message reaches receivers that nothing but
// notifications wake (their safety poll is an hour away), including the last
// ones, which are covered by a notification sent after the ones in flight.
func TestCoalescedNotificationsMissNothing(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	consumer := newDriver(t, pool, postgres.Options{Schema: schema, PollInterval: time.Hour})
	producer := newDriver(t, pool, postgres.Options{Schema: schema})
	c, p := newClient(t, consumer), newClient(t, producer)
	ctx := ctxT(t, 60*time.Second)
	q := "coalesce-" + randHex(4)
	const rounds, writers = 5, 8
	for round := 0; round < rounds; round++ {
		got := make(chan int, writers)
		go func() {
			n := 0
			for n < writers {
				ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: writers})
				if err != nil {
					t.Error(err)
					break
				}
				if err := c.AckBatch(ctx, ds); err != nil {
					t.Error(err)
				}
				n += len(ds)
			}
			got <- n
		}()
		waitFor(t, 10*time.Second, "the receive to block with LISTEN up", func() bool {
			return postgres.Sleeping(consumer) == 1 && postgres.ListenerUp(consumer)
		})
		sentBefore := postgres.NotificationsSent(producer)
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Enqueue(ctx, q, fila.Message{Kind: "burst"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		select {
		case n := <-got:
			if n != writers {
				t.Fatalf("round %d: received %d of %d", round, n, writers)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a message was left without a wake-up", round)
		}
		waitFor(t, 5*time.Second, "the notifications to finish", func() bool { return postgres.NotificationsIdle(producer) })
		if sent := postgres.NotificationsSent(producer) - sentBefore; sent > writers {
			t.Errorf("round %d: %d notifications for %d enqueues", round, sent, writers)
		} else {
			t.Logf("round %d: %d notifications for %d concurrent enqueues", round, sent, writers)
		}
	}
}

// TestFailedEnqueueKeepsConnection: an Enqueue that leads its queue's
// notifications runs BEGIN, INSERT, COMMIT and the notification in one
// batch; when the INSERT fails (here a duplicate id) the call fails, stores
// nothing and owes no notification, and the transaction it left aborted is
// rolled back, so the pool keeps the connection and the next enqueue works
// and wakes receivers.
func TestFailedEnqueueKeepsConnection(t *testing.T) {
	schema := migratedSchema(t, testPool(t))
	ctx := ctxT(t, 30*time.Second)
	// One connection: any connection the pool closed shows as a new one.
	pool := testPoolWith(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	q := "dup-" + randHex(4)
	msg := func(id string) []backend.Message {
		return []backend.Message{{ID: id, Kind: "k", Body: []byte{}, EnqueuedAt: time.Now()}}
	}
	id := "0192f0c4-0000-7000-8000-" + randHex(6)
	if _, err := d.Enqueue(ctx, q, msg(id)); err != nil {
		t.Fatal(err)
	}
	newConns := pool.Stat().NewConnsCount()
	for i := 0; i < 3; i++ {
		if _, err := d.Enqueue(ctx, q, msg(id)); err == nil {
			t.Fatal("enqueue of a duplicate id succeeded")
		}
	}
	// The server refused the batches before their COMMIT: nothing was
	// stored, so no notification is owed.
	if !postgres.NotificationsIdle(d) {
		t.Error("a refused enqueue left a notification in flight")
	}
	got := make(chan error, 1)
	go func() {
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
		if err == nil && len(ds) != 1 {
			err = fmt.Errorf("received %d messages, want the first one", len(ds))
		}
		got <- err
	}()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
		got <- err
	}()
	waitFor(t, 10*time.Second, "the receive to block with LISTEN up", func() bool {
		return postgres.Sleeping(d) == 1 && postgres.ListenerUp(d)
	})
	if _, err := d.Enqueue(ctx, q, msg("0192f0c4-0000-7000-8000-"+randHex(6))); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := pool.Stat().NewConnsCount() - newConns; n != 0 {
		t.Errorf("failed enqueues cost %d new pool connections, want 0", n)
	}
}
