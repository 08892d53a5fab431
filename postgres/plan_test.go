package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/postgres"
)

// TestClaimPlan checks that the claim is, level by level, an index range
// scan that stops after LIMIT rows (no sort of the whole queue), that the
// next due time probes the index once per level, and that the ack probes
// the primary key, with generic plans (as prepared statements run them) on
// a table without statistics.
func TestClaimPlan(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages (id, queue, kind, body, enqueued_at, visible_at, priority)
		SELECT gen_random_uuid(), 'q' || (i % 4), 'k', '', now(), now() - i * interval '1 second', i / 4 % 4
		FROM generate_series(1, 5000) i`); err != nil {
		t.Fatal(err)
	}
	// Half of them leased, as in a busy queue.
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.messages SET lease_token = gen_random_uuid(),
		visible_at = now() + interval '1 minute' WHERE random() < 0.5`); err != nil {
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
	plan := explain("fila_claim_probe", "(text, int, int8)", postgres.ClaimSQL(d), "('q1', 100, 1000000)")
	if !strings.Contains(plan, "Index Scan using messages_claim") || strings.Contains(plan, "Sort") ||
		!strings.Contains(plan, "Values Scan") {
		t.Errorf("claim plan is not an ordered scan of messages_claim per level:\n%s", plan)
	}
	plan = explain("fila_next_due_probe", "(text)", postgres.NextDueSQL(d), "('q1')")
	if !strings.Contains(plan, "Index Only Scan using messages_claim") || strings.Contains(plan, "Sort") ||
		strings.Contains(plan, "Seq Scan") {
		t.Errorf("next due plan is not a probe of messages_claim per level:\n%s", plan)
	}
	plan = explain("fila_ack_probe", "(uuid[], uuid[])", postgres.AckSQL(d),
		"(ARRAY[gen_random_uuid()], ARRAY[gen_random_uuid()])")
	if !strings.Contains(plan, "messages_pkey") || strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("ack plan does not probe the primary key:\n%s", plan)
	}
}

// TestClaimReadsOnlyWhatItTakes runs the claim's generic plan (EXPLAIN
// ANALYZE, in a transaction rolled back) on a queue whose levels hold many
// rows that are not claimable, leased or delayed, around a few ready ones,
// and checks that its scans of messages_claim read about what the claim
// takes: each level's range ends at its first row not yet due, and the
// loop over the levels stops at LIMIT. A single scan of the queue in the
// index's order (ORDER BY priority DESC, visible_at, id) read the 20,000
// leased rows of level 3 and the 20,000 delayed ones of level 1 on the way,
// 246 pages, where this claim reads about 15.
func TestClaimReadsOnlyWhatItTakes(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 60*time.Second)
	// Level 3: 20,000 leased. Level 2: 5 ready. Level 1: 20,000 delayed.
	// Level 0: 50 ready and 20,000 delayed.
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages
		(id, queue, kind, body, enqueued_at, visible_at, priority, lease_token)
		SELECT gen_random_uuid(), 'deep', 'k', ''::bytea, now(), now() + (1 + i) * interval '1 second', 3, gen_random_uuid()
		FROM generate_series(1, 20000) i
		UNION ALL SELECT gen_random_uuid(), 'deep', 'k', ''::bytea, now(), now() - i * interval '1 second', 2, NULL
		FROM generate_series(1, 5) i
		UNION ALL SELECT gen_random_uuid(), 'deep', 'k', ''::bytea, now(), now() + i * interval '1 second', 1, NULL
		FROM generate_series(1, 20000) i
		UNION ALL SELECT gen_random_uuid(), 'deep', 'k', ''::bytea, now(), now() - i * interval '1 second', 0, NULL
		FROM generate_series(1, 50) i
		UNION ALL SELECT gen_random_uuid(), 'deep', 'k', ''::bytea, now(), now() + i * interval '1 second', 0, NULL
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, sql := range []string{"SET plan_cache_mode = force_generic_plan",
		"PREPARE fila_claim_run(text, int, int8) AS " + postgres.ClaimSQL(d), "BEGIN"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	defer conn.Exec(ctx, "ROLLBACK; RESET plan_cache_mode; DEALLOCATE fila_claim_run")
	var out []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE fila_claim_run('deep', 10, 1000000)",
		pgx.QueryExecModeSimpleProtocol).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan map[string]any }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", out, err)
	}
	var blocks, loops float64
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Index Name"] == "messages_claim" {
			loops += n["Actual Loops"].(float64)
			blocks += n["Shared Hit Blocks"].(float64) + n["Shared Read Blocks"].(float64)
		}
		subs, _ := n["Plans"].([]any)
		for _, s := range subs {
			walk(s.(map[string]any))
		}
	}
	walk(plans[0].Plan)
	if got := plans[0].Plan["Actual Rows"].(float64); got != 10 {
		t.Errorf("the claim took %v rows, want 10", got)
	}
	// Every level visited (3 and 1 hold nothing ready): a probe per level
	// and the heap pages of the rows taken (14 pages here).
	if loops != 4 || blocks > 40 {
		t.Errorf("the claim scanned messages_claim %v times and read %v pages; want 4 scans and at most 40 pages:\n%s",
			loops, blocks, out)
	}
}

// explainGeneric returns the generic plan of sql (prepared as name with
// parameter types types) executed with args, on conn.
func explainGeneric(t *testing.T, ctx context.Context, conn *pgxpool.Conn, name, types, sql, args string) string {
	t.Helper()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE "+name)
	if _, err := conn.Exec(ctx, "PREPARE "+name+types+" AS "+sql); err != nil {
		t.Fatalf("PREPARE %s: %v", name, err)
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+name+args, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
