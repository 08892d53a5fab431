package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// TestLogRotationIdle: while nothing is written, rotation writes nothing:
// no new version of log_state's row, no new files for the partitions, and a
// backlog nobody reads is not copied again and again (issue 37: under a
// pinned horizon every rotation left dead rows in log_state and pg_class).
// The backlog is still there, whole, and rotation resumes with the next
// write.
func TestLogRotationIdle(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	const every = 50 * time.Millisecond
	c := openLog(t, schema, every)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 100
	for i := range n {
		if _, err := c.Enqueue(ctx, "backlog", fila.Message{Kind: "k", Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitRotations(t, pool, schema, 3) // the backlog copied at least once
	// What changes when rotation runs: the state row's version, the
	// partitions' files.
	look := func() string {
		var v string
		err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT xmin::text FROM %[1]s.log_state) || ' ' ||
			(SELECT string_agg(relfilenode::text, ',' ORDER BY relname) FROM pg_class
			 WHERE relnamespace = '%[1]s'::regnamespace AND relname LIKE 'log\_%%\__')`, schema)).Scan(&v)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Within a few intervals of the last write rotation stops: the look
	// stays the same for 10 intervals in a row.
	const quiet = 10 * every
	deadline := time.Now().Add(10 * time.Second)
	last, since := look(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("rotation kept writing with nothing written: state and files changed within every %v for 10s (now %s)", quiet, last)
		}
		time.Sleep(every / 2)
		if now := look(); now != last {
			last, since = now, time.Now()
		}
	}
	// Taken before the receives: a rotation may resume while they run
	// (their leases and cursors take positions) and then see nothing more
	// to do, since acks take none. log_state.since only moves forward, where the
	// current generation comes back to its value every third rotation.
	rotatedAt := func() time.Time {
		var at time.Time
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT since FROM %s.log_state`, schema)).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := rotatedAt()
	got := 0
	for got < n {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		ds, err := c.Receive(rctx, "backlog", fila.ReceiveParams{Max: 50, Lease: time.Minute})
		rcancel()
		if err != nil {
			t.Fatalf("the backlog after idle rotations: %d of %d received: %v", got, n, err)
		}
		got += len(ds)
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for rotatedAt().Equal(before) {
		if time.Now().After(deadline) {
			t.Fatal("rotation did not resume after the receives wrote")
		}
		time.Sleep(every / 2)
	}
}
