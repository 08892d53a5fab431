package postgres_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestQueueListAndDelete fills a fresh schema with many rows of a few
// queues, some only in dead, and checks that QueueList names exactly those
// queues, bytewise sorted, by index probes rather than a scan of the rows,
// and that QueueDelete removes one queue's rows from both tables and leaves
// the other queues' rows alone.
func TestQueueListAndDelete(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 60*time.Second)

	if qs, err := d.QueueList(ctx); err != nil {
		t.Fatalf("QueueList of an empty schema: %v", err)
	} else if len(qs) != 0 {
		t.Fatalf("QueueList of an empty schema = %v, want none", qs)
	}

	// Mixed case and punctuation: a bytewise sort differs from most
	// locales' collations.
	msgQueues := []string{"a", "B", "c.1", "c-2"}
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages (id, queue, kind, body, enqueued_at, visible_at)
		SELECT gen_random_uuid(), ($1::text[])[1 + i % 4], 'k', '', now(), now() + (i % 3 - 1) * interval '1 minute'
		FROM generate_series(1, 8000) i`, msgQueues); err != nil {
		t.Fatal(err)
	}
	deadQueues := []string{"a", "z_dead"}
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.dead (id, queue, kind, body, enqueued_at, attempts, max_attempts, reason)
		SELECT gen_random_uuid(), ($1::text[])[1 + i % 2], 'k', '', now(), 1, 1, 'r'
		FROM generate_series(1, 2000) i`, deadQueues); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+schema+`.messages; ANALYZE `+schema+`.dead`); err != nil {
		t.Fatal(err)
	}

	want := []string{"B", "a", "c-2", "c.1", "z_dead"}
	qs, err := d.QueueList(ctx)
	if err != nil {
		t.Fatalf("QueueList: %v", err)
	}
	if !slices.Equal(qs, want) {
		t.Fatalf("QueueList = %q, want %q", qs, want)
	}

	rows, err := pool.Query(ctx, "EXPLAIN "+postgres.QueueListSQL(d), pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); strings.Contains(plan, "Seq Scan") {
		t.Errorf("queue list reads whole tables instead of probing indexes:\n%s", plan)
	}

	count := func(table, queue string) int64 {
		t.Helper()
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.`+table+` WHERE queue = $1`, queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := map[string]int64{}
	for _, q := range want {
		before["messages/"+q] = count("messages", q)
		before["dead/"+q] = count("dead", q)
	}
	if before["messages/a"] == 0 || before["dead/a"] == 0 {
		t.Fatalf("queue a should have rows in both tables: %v", before)
	}

	if err := d.QueueDelete(ctx, "a"); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
	for _, q := range want {
		for _, table := range []string{"messages", "dead"} {
			n, w := count(table, q), before[table+"/"+q]
			if q == "a" {
				w = 0
			}
			if n != w {
				t.Errorf("after QueueDelete(a): %s has %d rows of %s, want %d", table, n, q, w)
			}
		}
	}
	if qs, err := d.QueueList(ctx); err != nil {
		t.Fatalf("QueueList: %v", err)
	} else if w := []string{"B", "c-2", "c.1", "z_dead"}; !slices.Equal(qs, w) {
		t.Errorf("QueueList after QueueDelete(a) = %q, want %q", qs, w)
	}
	if err := d.QueueDelete(ctx, "a"); err != nil {
		t.Errorf("QueueDelete of a queue already deleted: %v", err)
	}

	_ = d.Close()
	if _, err := d.QueueList(ctx); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("QueueList after Close: %v, want ErrClosed", err)
	}
	if err := d.QueueDelete(ctx, "B"); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("QueueDelete after Close: %v, want ErrClosed", err)
	}
}
