package postgres_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/postgres"
)

// TestMessageListPlan checks that a page of each state's listing is, level
// by level, an ordered range scan of messages_claim (no sort of the queue),
// from the start and from a cursor, and that the listing by id probes the
// primary key, with generic plans (as prepared statements run them) on a
// table without statistics.
func TestMessageListPlan(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages (id, queue, kind, body, enqueued_at, visible_at, priority)
		SELECT gen_random_uuid(), 'q' || (i % 4), 'k', '', now(), now() + (i % 3 - 1) * i * interval '1 second', i / 4 % 4
		FROM generate_series(1, 5000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.messages SET lease_token = gen_random_uuid(),
		visible_at = now() + interval '1 minute' WHERE random() < 0.3`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const types = "(text, int, int2, timestamptz, uuid, bool)"
	for _, state := range []string{"ready", "delayed", "leased"} {
		for _, args := range []string{"('q1', 101, NULL, NULL, NULL, false)",
			"('q1', 101, 2, now(), gen_random_uuid(), true)"} {
			plan := explainGeneric(t, ctx, conn, "fila_list_probe", types, postgres.MessageListSQL(d, state), args)
			if !strings.Contains(plan, "Index Scan using messages_claim") || strings.Contains(plan, "Sort") ||
				!strings.Contains(plan, "Values Scan") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s listing %s is not an ordered scan of messages_claim per level:\n%s", state, args, plan)
			}
		}
	}
	plan := explainGeneric(t, ctx, conn, "fila_list_ids_probe", "(text, int, int2, timestamptz, uuid, bool, uuid[], text)",
		postgres.MessageListSQL(d, ""), "('q1', 101, NULL, NULL, NULL, false, ARRAY[gen_random_uuid()], '')")
	if !strings.Contains(plan, "messages_pkey") || strings.Contains(plan, "Seq Scan on messages") {
		t.Errorf("listing by id does not probe the primary key:\n%s", plan)
	}
}

// TestMessageListReadsOnlyAPage runs the ready listing's generic plan
// (EXPLAIN ANALYZE) on a queue whose levels hold many leased or delayed
// rows around a few ready ones, and checks that it reads about a page: each
// level's range ends at its first row not yet due, and the loop over the
// levels stops at the page's end.
func TestMessageListReadsOnlyAPage(t *testing.T) {
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
		"PREPARE fila_list_run(text, int, int2, timestamptz, uuid, bool) AS " + postgres.MessageListSQL(d, "ready")} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE fila_list_run")
	var out []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE fila_list_run('deep', 11, NULL, NULL, NULL, true)",
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
	if got := plans[0].Plan["Actual Rows"].(float64); got != 11 {
		t.Errorf("the listing read %v rows, want 11", got)
	}
	if loops != 4 || blocks > 40 {
		t.Errorf("the listing scanned messages_claim %v times and read %v pages; want 4 scans and at most 40 pages:\n%s",
			loops, blocks, out)
	}
}

// TestMessageListStates lists rows of every kind the skip-locked table
// holds, an expired lease and an expired early lease (ReceiveDelayed)
// included, one at a time and in one page, and checks their state, due
// time and order (level, then visible_at, then id).
func TestMessageListStates(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := newClient(t, newDriver(t, pool, postgres.Options{Schema: schema}))
	ctx := ctxT(t, 30*time.Second)
	// name, level, visible_at and run_at (seconds from now), leased.
	rows := []struct {
		name         string
		level        int
		visible, run int
		leased       bool
		state        fila.MessageState
		due          int
	}{
		{"ready", 0, -50, 0, false, fila.StateReady, -50},
		{"ready-high", 2, -10, 0, false, fila.StateReady, -10},
		{"expired", 0, -40, 0, true, fila.StateReady, -40},
		{"early-due", 1, -30, -20, true, fila.StateReady, -20},
		{"early-expired", 0, -45, 600, true, fila.StateDelayed, 600},
		{"delayed", 0, 300, 0, false, fila.StateDelayed, 300},
		{"delayed-high", 3, 900, 0, false, fila.StateDelayed, 900},
		{"leased", 0, 60, 0, true, fila.StateLeased, 60},
		{"early-leased", 1, 30, 700, true, fila.StateLeased, 30},
	}
	ids := map[string]string{}
	for i, r := range rows {
		id := fmt.Sprintf("0190d3c4-0000-7000-8000-%012d", i+1)
		ids[r.name] = id
		if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages
			(id, queue, kind, body, enqueued_at, visible_at, run_at, priority, lease_token, attempts, last_error)
			VALUES ($1, 'q', $2, $8, now(), now() + $3 * interval '1 second',
				CASE WHEN $4 <> 0 THEN now() + $4 * interval '1 second' END, $5,
				CASE WHEN $6 THEN gen_random_uuid() END, CASE WHEN $6 THEN 1 ELSE 0 END, NULLIF($7, ''))`,
			id, r.name, r.visible, r.run, r.level, r.leased, map[bool]string{true: "why"}[r.leased], []byte(r.name)); err != nil {
			t.Fatal(err)
		}
	}
	var now time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	for _, state := range []fila.MessageState{fila.StateReady, fila.StateDelayed, fila.StateLeased} {
		// The expected order: level down, then visible_at.
		var want []string
		for _, r := range rows {
			if r.state == state {
				want = append(want, r.name)
			}
		}
		byName := map[string]int{}
		for i, r := range rows {
			byName[r.name] = i
		}
		slices.SortFunc(want, func(a, b string) int {
			ra, rb := rows[byName[a]], rows[byName[b]]
			if ra.level != rb.level {
				return rb.level - ra.level
			}
			return ra.visible - rb.visible
		})
		for _, limit := range []int{1, 2, 100} {
			var got []string
			p := fila.MessageListParams{State: state, Limit: limit}
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatalf("%s listing does not end", state)
				}
				page, err := c.MessageList(ctx, "q", p)
				if err != nil {
					t.Fatalf("MessageList(%s): %v", state, err)
				}
				for _, m := range page.Messages {
					r := rows[byName[m.Kind]]
					got = append(got, m.Kind)
					if m.State != r.state || m.Priority != r.level || m.ID != ids[r.name] ||
						m.Due.Sub(now.Add(time.Duration(r.due)*time.Second)).Abs() > 2*time.Second {
						t.Errorf("%s: state %s level %d due %v; want %s, %d, now%+ds", r.name, m.State, m.Priority,
							m.Due.Sub(now).Round(time.Second), r.state, r.level, r.due)
					}
					if string(m.Body) != r.name || (r.leased && (m.Attempts != 1 || m.LastError != "why")) {
						t.Errorf("%s: body %q attempts %d last error %q", r.name, m.Body, m.Attempts, m.LastError)
					}
				}
				if page.Next == "" {
					break
				}
				p.Cursor = page.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s listing, %d a page: %v; want %v", state, limit, got, want)
			}
		}
	}
	// By id, in any state, paged.
	var all []string
	for _, r := range rows {
		all = append(all, ids[r.name])
	}
	p := fila.MessageListParams{IDs: append(all, "not-a-uuid"), Limit: 2}
	seen := map[string]fila.MessageState{}
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("listing by id does not end")
		}
		page, err := c.MessageList(ctx, "q", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if _, dup := seen[m.Kind]; dup {
				t.Errorf("%s listed twice", m.Kind)
			}
			seen[m.Kind] = m.State
		}
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	for _, r := range rows {
		if seen[r.name] != r.state {
			t.Errorf("by id: %s is %q; want %s", r.name, seen[r.name], r.state)
		}
	}
	// Another queue's ids match nothing.
	if page, err := c.MessageList(ctx, "other", fila.MessageListParams{IDs: all}); err != nil || len(page.Messages) != 0 {
		t.Errorf("MessageList(other queue, ids) = %d messages, %v; want none", len(page.Messages), err)
	}
}

// TestMessageListLogMode: the log mode lists nothing and says so.
func TestMessageListLogMode(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := newClient(t, newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog}))
	_, err := c.MessageList(ctxT(t, 10*time.Second), "q", fila.MessageListParams{State: fila.StateReady})
	if !errors.Is(err, fila.ErrUnsupported) || !strings.Contains(err.Error(), "log mode") {
		t.Errorf("MessageList in the log mode: %v; want ErrUnsupported naming the mode", err)
	}
}
