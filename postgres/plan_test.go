package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/postgres"
)

// TestClaimPlan checks that the claim is an index range scan that stops
// after LIMIT rows (no sort of the whole queue) and that the ack probes the
// primary key, with generic plans (as prepared statements run them) on a
// table without statistics.
func TestClaimPlan(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages (id, queue, kind, body, enqueued_at, visible_at)
		SELECT gen_random_uuid(), 'q' || (i % 4), 'k', '', now(), now() - i * interval '1 second'
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
	if !strings.Contains(plan, "Index Scan using messages_claim") || strings.Contains(plan, "Sort") {
		t.Errorf("claim plan is not an ordered scan of messages_claim:\n%s", plan)
	}
	plan = explain("fila_ack_probe", "(uuid[], uuid[])", postgres.AckSQL(d),
		"(ARRAY[gen_random_uuid()], ARRAY[gen_random_uuid()])")
	if !strings.Contains(plan, "messages_pkey") || strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("ack plan does not probe the primary key:\n%s", plan)
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
