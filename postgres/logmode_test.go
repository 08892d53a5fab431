package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
	"github.com/fila-go/fila/relay"
)

// openLog opens a Client in the log mode on schema, rotating every rotate.
func openLog(t *testing.T, schema string, rotate time.Duration) *fila.Client {
	t.Helper()
	return openLogWith(t, schema, rotate, quietLogger)
}

// openLogWith is openLog with the driver logging to log.
func openLogWith(t *testing.T, schema string, rotate time.Duration, log *slog.Logger) *fila.Client {
	t.Helper()
	return openLogParams(t, schema, rotate, log, nil)
}

// openLogParams is openLogWith with more URL parameters.
func openLogParams(t *testing.T, schema string, rotate time.Duration, log *slog.Logger, more map[string]string) *fila.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := map[string]string{"fila_schema": schema, "fila_mode": "log",
		"fila_rotate_interval": rotate.String(), "pool_max_conns": "4"}
	maps.Copy(params, more)
	u, err := url.Parse(driverURL(t, params))
	if err != nil {
		t.Fatal(err)
	}
	drv, err := postgres.Open(ctx, u, backend.OpenOptions{Logger: log})
	if err != nil {
		t.Fatalf("open log mode: %v", err)
	}
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestLogLateCommitNotSkipped: a message whose transaction took its txid
// before later enqueues, and committed after they were consumed, is still
// delivered. A cursor that advanced by id would have passed it.
func TestLogLateCommitNotSkipped(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const q = "late"

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	ids, err := c.EnqueueTx(ctx, tx, q, []fila.Message{{Kind: "k", Body: []byte("late")}})
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	late := ids[0]
	var lateTx, laterTx uint64
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::int8`).Scan(&lateTx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}
	for i := 0; i < 20; i++ {
		d := receiveOneLog(t, c, q, 5*time.Second)
		if d.ID == late {
			t.Fatalf("the uncommitted message was delivered")
		}
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("delivery %d has body %q", i, d.Body)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT max(txid)::text::int8 FROM %s.log_messages WHERE queue = $1`, schema), q).Scan(&laterTx); err != nil {
		t.Fatal(err)
	}
	if laterTx <= lateTx {
		t.Fatalf("the later enqueues' txids (max %d) are not after the held transaction's (%d): the test proves nothing", laterTx, lateTx)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	d := receiveOneLog(t, c, q, 5*time.Second)
	if d.ID != late || string(d.Body) != "late" {
		t.Fatalf("after the commit received %s %q, want the late message %s", d.ID, d.Body, late)
	}
}

func receiveOneLog(t *testing.T, c *fila.Client, q string, wait time.Duration) *fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return ds[0]
}

// logState reads the log mode's current generation.
func logState(t *testing.T, pool *pgxpool.Pool, schema string) int {
	t.Helper()
	var cur int
	if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT cur FROM %s.log_state`, schema)).Scan(&cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

// waitRotations waits until the current generation changed n times.
// Rotation skips while nothing is written, so it takes a position from the
// log's sequence at each look, as every write does.
func waitRotations(t *testing.T, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	last := logState(t, pool, schema)
	deadline := time.Now().Add(60 * time.Second)
	for n > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("rotation did not happen within 60s (%d rotations left)", n)
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := pool.Exec(context.Background(), fmt.Sprintf(`SELECT nextval('%s.log_pos')`, schema)); err != nil {
			t.Fatal(err)
		}
		if cur := logState(t, pool, schema); cur != last {
			last = cur
			n--
		}
	}
}

// waitOldest waits until rotation made generation gen the oldest, the next
// one to copy and empty: the current one is then (gen+2) % 3, as rotation
// moves it to (cur+1) % 3. It takes positions as waitRotations does. A
// transaction that wrote to gen and is still open keeps rotation there.
func waitOldest(t *testing.T, pool *pgxpool.Pool, schema string, gen int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for logState(t, pool, schema) != (gen+2)%3 {
		if time.Now().After(deadline) {
			t.Fatalf("generation %d did not become the oldest within 60s (current: %d)", gen, logState(t, pool, schema))
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := pool.Exec(context.Background(), fmt.Sprintf(`SELECT nextval('%s.log_pos')`, schema)); err != nil {
			t.Fatal(err)
		}
	}
}

// rotateNow runs one rotation step by hand (the driver's own rotation is
// never due in these tests): the copy of the oldest generation, or its
// TRUNCATE. It returns the step's outcome.
func rotateNow(t *testing.T, pool *pgxpool.Pool, schema, step string) string {
	t.Helper()
	// Rotation skips while nothing was written since the last one: take a
	// position from the log's sequence, as every write does.
	sql := fmt.Sprintf(`SELECT %[1]s.log_rotate_copy(0) FROM (SELECT nextval('%[1]s.log_pos')) AS w`, schema)
	if step == "truncate" {
		sql = fmt.Sprintf(`SELECT %s.log_rotate_truncate(50)`, schema)
	}
	var res string
	if err := pool.QueryRow(context.Background(), sql).Scan(&res); err != nil {
		t.Fatalf("rotation %s: %v", step, err)
	}
	return res
}

// TestLogLateCommitSurvivesQueueDelete: a message enqueued in a
// transaction that commits after rotation copied its generation is not
// lost when the generation is emptied, even if rows of another queue were
// deleted from that generation in between. Rotation used to compare row
// counts: one row deleted and one committed looked like no change.
func TestLogLateCommitSurvivesQueueDelete(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := c.Enqueue(ctx, "victim", fila.Message{Kind: "k", Body: []byte("deleted")}); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	ids, err := c.EnqueueTx(ctx, tx, "late", []fila.Message{{Kind: "k", Body: []byte("late")}})
	if err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	gen := logState(t, pool, schema)
	// Two rotations make the transaction's generation the oldest.
	for i := 0; i < 2; i++ {
		if res := rotateNow(t, pool, schema, "copy"); !strings.HasPrefix(res, "copied ") {
			t.Fatalf("copy %d: %s", i, res)
		}
		if res := rotateNow(t, pool, schema, "truncate"); res != "rotated" {
			t.Fatalf("truncate %d: %s", i, res)
		}
	}
	if oldest := (logState(t, pool, schema) + 1) % 3; oldest != gen {
		t.Fatalf("the oldest generation is %d, want the transaction's %d", oldest, gen)
	}
	// The copy cannot see the uncommitted message.
	if res := rotateNow(t, pool, schema, "copy"); !strings.HasPrefix(res, "copied ") {
		t.Fatalf("copy: %s", res)
	}
	if err := c.QueueDelete(ctx, "victim", fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	// Rotation goes on until the generation is emptied.
	for i := 0; rotateNow(t, pool, schema, "truncate") != "rotated"; i++ {
		if i == 5 {
			t.Fatal("the oldest generation was never emptied")
		}
		if res := rotateNow(t, pool, schema, "copy"); !strings.HasPrefix(res, "copied ") {
			t.Fatalf("copy: %s", res)
		}
	}
	d := receiveOneLog(t, c, "late", 5*time.Second)
	if d.ID != ids[0] || string(d.Body) != "late" {
		t.Fatalf("received %s %q, want the late message %s", d.ID, d.Body, ids[0])
	}
}

// TestLogRotationKeepsPending: across several rotations (each TRUNCATEs a
// generation) every message still pending keeps its state: one never read,
// one leased, one delayed, one retried with a delay, one leased whose lease
// expires; and the partitions that were emptied hold no row of the acked
// ones.
func TestLogRotationKeepsPending(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// unread: a queue nobody reads until the end.
	unread, err := c.Enqueue(ctx, "unread", fila.Message{Kind: "k", Body: []byte("unread")})
	if err != nil {
		t.Fatal(err)
	}
	// held: leased for a long time, acked after the rotations.
	if _, err := c.Enqueue(ctx, "held", fila.Message{Kind: "k", Body: []byte("held")}); err != nil {
		t.Fatal(err)
	}
	held := receiveOneLog(t, c, "held", 5*time.Second)
	// delayed: due after the rotations.
	if _, err := c.Enqueue(ctx, "delayed", fila.Message{Kind: "k", Body: []byte("delayed"), Delay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// Read the delayed queue once so the message becomes a timer.
	short, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if ds, err := c.Receive(short, "delayed", fila.ReceiveParams{}); err == nil {
		t.Fatalf("delayed message delivered early: %v", ds[0].ID)
	}
	scancel()
	// retried: retried with a delay, so re-appended.
	if _, err := c.Enqueue(ctx, "retried", fila.Message{Kind: "k", Body: []byte("retried")}); err != nil {
		t.Fatal(err)
	}
	r := receiveOneLog(t, c, "retried", 5*time.Second)
	if err := r.Retry(ctx, 3*time.Second, "again"); err != nil {
		t.Fatal(err)
	}
	// expiring: leased with a lease that ends during the rotations.
	if _, err := c.Enqueue(ctx, "expiring", fila.Message{Kind: "k", Body: []byte("expiring")}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	eds, err := c.Receive(rctx, "expiring", fila.ReceiveParams{Lease: 500 * time.Millisecond})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	// Churn: acked messages whose rows rotation must drop.
	for i := 0; i < 50; i++ {
		if _, err := c.Enqueue(ctx, "churn", fila.Message{Kind: "k", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		d := receiveOneLog(t, c, "churn", 5*time.Second)
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	waitRotations(t, pool, schema, 4) // every generation emptied at least once

	var churnRows int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.log_messages WHERE queue = 'churn'`, schema)).Scan(&churnRows); err != nil {
		t.Fatal(err)
	}
	if churnRows != 0 {
		t.Errorf("%d rows of acked messages survived 4 rotations", churnRows)
	}

	if err := held.Ack(ctx); err != nil {
		t.Errorf("ack of the lease held across rotations: %v", err)
	}
	if d := receiveOneLog(t, c, "unread", 5*time.Second); d.ID != unread {
		t.Errorf("unread queue gave %s, want %s", d.ID, unread)
	}
	d := receiveOneLog(t, c, "delayed", 10*time.Second)
	if string(d.Body) != "delayed" {
		t.Errorf("delayed queue gave %q", d.Body)
	}
	d = receiveOneLog(t, c, "retried", 10*time.Second)
	if string(d.Body) != "retried" || d.Attempt != 2 || d.LastError != "again" {
		t.Errorf("retried message: body %q attempt %d last error %q; want retried, 2, again", d.Body, d.Attempt, d.LastError)
	}
	d = receiveOneLog(t, c, "expiring", 10*time.Second)
	if d.ID != eds[0].ID || d.Attempt != 2 {
		t.Errorf("expired lease redelivered as %s attempt %d, want %s attempt 2", d.ID, d.Attempt, eds[0].ID)
	}
	if err := eds[0].Ack(ctx); err == nil {
		t.Errorf("ack with the expired receipt succeeded")
	}
}

// TestLogRotationWaitsForLock: a transaction holding a lock on the oldest
// generation's partition holds rotation back, without stalling enqueues or
// receives; rotation happens once it ends.
func TestLogRotationWaitsForLock(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitRotations(t, pool, schema, 1)
	// A long reader of the oldest generation. The oldest is read again
	// once the lock is held: a rotation that committed in between moved
	// it, and the reader then holds the wrong partition.
	var cur int
	var tx pgx.Tx
	for {
		cur = logState(t, pool, schema)
		var err error
		if tx, err = pool.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.log_messages_%d`, schema, (cur+1)%3)); err != nil {
			t.Fatal(err)
		}
		if logState(t, pool, schema) == cur {
			break
		}
		_ = tx.Rollback(ctx)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// Rotation is due many times over while the lock is held; messages
	// still flow.
	for i := 0; i < 20; i++ {
		if _, err := c.Enqueue(ctx, "flow", fila.Message{Kind: "k", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		d := receiveOneLog(t, c, "flow", 5*time.Second)
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // let rotation checks come due: the test is about their refusal
	}
	if got := logState(t, pool, schema); got != cur {
		t.Fatalf("rotated from %d to %d while a transaction held the oldest partition", cur, got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitRotations(t, pool, schema, 1)
}

// TestLogNoUpdatesOrDeletes: a stream of messages through enqueue,
// receive, ack, retry and dead letter updates and deletes no row of the log
// tables: no dead tuple per message. Counted by the server's statistics.
func TestLogNoUpdatesOrDeletes(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 200
	for i := 0; i < n; i++ {
		if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		d := receiveOneLog(t, c, "q", 5*time.Second)
		var err error
		switch i % 10 {
		case 0:
			err = d.Retry(ctx, 0, "again")
		case 1:
			err = d.Dead(ctx, "bad")
		default:
			err = d.Ack(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The statistics are flushed by each backend within a second or so of
	// going idle: wait until every insert is counted.
	var ins, upd, del int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := pool.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_del), 0)
FROM pg_stat_user_tables WHERE schemaname = $1
	AND relname ~ '^log_(messages|leases|settles|timers|cursors|claims)_[0-2]$'`, schema).Scan(&ins, &upd, &del)
		if err != nil {
			t.Fatal(err)
		}
		// n enqueued + n/10 retried rows; n + n/10 leases; n settles.
		if ins >= 3*n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ins < 3*n {
		t.Fatalf("statistics count %d inserts, want at least %d: not flushed", ins, 3*n)
	}
	if upd != 0 || del != 0 {
		t.Errorf("log tables: %d rows updated and %d deleted for %d messages, want none", upd, del, n)
	}
}

// openMode opens a Client on schema in the given mode.
func openMode(t *testing.T, schema, mode string) *fila.Client {
	t.Helper()
	if mode == postgres.ModeLog {
		return openLog(t, schema, time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(driverURL(t, map[string]string{"fila_schema": schema, "pool_max_conns": "4"}))
	if err != nil {
		t.Fatal(err)
	}
	drv, err := postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestMoveBetweenModes: a relay (what fila migrate runs) moves a queue from
// one mode to the other within one schema, both ways: a ready message with
// its attempts, a delayed one with its run-at and dedup key, and a dead
// letter; the source ends empty.
func TestMoveBetweenModes(t *testing.T) {
	for _, dir := range [][2]string{{postgres.ModeSkipLocked, postgres.ModeLog}, {postgres.ModeLog, postgres.ModeSkipLocked}} {
		t.Run(dir[0]+"-to-"+dir[1], func(t *testing.T) {
			pool := testPool(t)
			schema := migratedSchema(t, pool)
			from, to := openMode(t, schema, dir[0]), openMode(t, schema, dir[1])
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const q = "moving"
			retried, err := from.Enqueue(ctx, q, fila.Message{Kind: "retried", Body: []byte("r"), MaxAttempts: 5})
			if err != nil {
				t.Fatal(err)
			}
			d := receiveOneLog(t, from, q, 5*time.Second)
			if err := d.Retry(ctx, 0, "flaky"); err != nil {
				t.Fatal(err)
			}
			runAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			if _, err := from.Enqueue(ctx, q, fila.Message{Kind: "later", Body: []byte("l"), RunAt: runAt, DedupKey: "once"}); err != nil {
				t.Fatal(err)
			}
			deadID, err := from.Enqueue(ctx, q, fila.Message{Kind: "bad", Body: []byte("b")})
			if err != nil {
				t.Fatal(err)
			}
			for {
				d := receiveOneLog(t, from, q, 5*time.Second)
				if d.ID == deadID {
					if err := d.Dead(ctx, "unparseable"); err != nil {
						t.Fatal(err)
					}
					break
				}
				if err := d.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			r := &relay.Relay{From: from, FromQueue: q, To: to, IncludeDelayed: true, IncludeDead: true, StopWhenIdle: 300 * time.Millisecond}
			st, err := r.Run(ctx)
			if err != nil {
				t.Fatalf("relay: %v", err)
			}
			if st.Moved != 1 || st.Delayed != 1 || st.Dead != 1 {
				t.Errorf("relay stats %+v, want 1 moved, 1 delayed, 1 dead", st)
			}
			got := receiveOneLog(t, to, q, 5*time.Second)
			if got.Headers[relay.HeaderSourceID] != retried || string(got.Body) != "r" || got.Attempt < 3 || got.MaxAttempts != 5 {
				t.Errorf("moved message: source %s body %q attempt %d max %d; want %s, r, >= 3, 5",
					got.Headers[relay.HeaderSourceID], got.Body, got.Attempt, got.MaxAttempts, retried)
			}
			tst, err := to.QueueStats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if tst.Delayed != 1 || tst.Dead != 1 || tst.Leased != 1 {
				t.Errorf("target stats %+v, want 1 delayed, 1 leased and 1 dead", tst)
			}
			if _, err := to.Enqueue(ctx, q, fila.Message{Kind: "later", DedupKey: "once"}); !errors.Is(err, fila.ErrDuplicate) {
				t.Errorf("the delayed message's dedup key did not move: %v", err)
			}
			page, err := to.DeadList(ctx, q, fila.DeadListParams{})
			if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != deadID || page.Letters[0].Reason != "unparseable" {
				t.Errorf("dead letters on the target: %+v, %v", page.Letters, err)
			}
			sst, err := from.QueueStats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if sst.Ready+sst.Delayed+sst.Leased+sst.Dead != 0 {
				t.Errorf("source not empty: %+v", sst)
			}
		})
	}
}
