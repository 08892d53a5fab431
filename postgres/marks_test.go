package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/postgres"
)

// TestMarksSweep: expired marks are deleted, not only hidden: MarkSet
// deletes a few of the queue's other expired marks, MarkList all of them,
// and neither touches live marks or other queues.
func TestMarksSweep(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	rows := func(queue string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".marks WHERE queue = $1", queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	set := func(queue, name string, until time.Time) {
		t.Helper()
		if _, err := d.MarkSet(ctx, queue, name, until, false); err != nil {
			t.Fatalf("MarkSet(%s, %s): %v", queue, name, err)
		}
	}
	past := time.Now().Add(-time.Minute)
	for i := range 40 {
		set("q", fmt.Sprintf("old/%02d", i), past)
		set("other", fmt.Sprintf("old/%02d", i), past)
	}
	if n := rows("q"); n == 40 {
		t.Fatalf("after 40 MarkSets of expired marks, %d rows: MarkSet swept none", n)
	}
	set("q", "live", time.Time{})
	set("q", "later", time.Now().Add(time.Hour))
	names, err := d.MarkList(ctx, "q", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "later,live" {
		t.Errorf("MarkList = %q, want [later live]", names)
	}
	if n := rows("q"); n != 2 {
		t.Errorf("after MarkList, %d rows of the queue, want the 2 live marks", n)
	}
	if n := rows("other"); n == 0 {
		t.Errorf("MarkList of one queue swept another's marks")
	}
}

// TestMarkPlans checks that MarkList reads the prefix's range of the
// primary key, not the queue's or the table's rows, and that the sweeps of
// MarkSet and MarkList find expired marks by marks_expiry and delete them
// by primary key, with generic plans (as prepared statements run them).
// The table is analyzed: without statistics the planner guesses a dozen
// rows per queue and may read them all rather than probe the key, which
// costs nothing at that size (autovacuum analyzes the table as it grows).
func TestMarkPlans(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.marks (queue, name, until)
		SELECT 'q' || (i % 4), 'cancel/' || i, CASE WHEN i % 2 = 0 THEN now() + interval '1 hour' END
		FROM generate_series(1, 5000) i; ANALYZE `+schema+`.marks`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	explain := func(name, types, sql, args string) string {
		t.Helper()
		return explainGeneric(t, ctx, conn, name, types, sql, args)
	}
	plan := explain("fila_marklist_probe", "(text, text)", postgres.MarkListSQL(d), "('q1', 'cancel/1')")
	if !strings.Contains(plan, "Index Cond: ((queue = $1) AND (name >= $2))") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("mark list plan does not read the prefix's range of marks_pkey:\n%s", plan)
	}
	if !strings.Contains(plan, "marks_expiry") || !strings.Contains(plan, "Index Cond: ((queue = $1) AND (name = ANY") {
		t.Errorf("mark list's sweep does not find expired marks by marks_expiry and delete them by primary key:\n%s", plan)
	}
	plan = explain("fila_markset_probe", "(text, text, timestamptz)", postgres.MarkSetSQL(d), "('q1', 'x', NULL)")
	if !strings.Contains(plan, "marks_expiry") || strings.Contains(plan, "Seq Scan") ||
		!strings.Contains(plan, "Index Cond: ((queue = $1) AND (name = ANY") {
		t.Errorf("mark set's sweep does not find expired marks by marks_expiry and delete them by primary key:\n%s", plan)
	}
}
