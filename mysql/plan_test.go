package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/mysql"
)

// TestClaimPlan: the claim reads messages_claim in its order (no sort), so
// it stops, and stops locking, after the rows it takes; the next-due read
// is an index probe per level. Checked with EXPLAIN on a queue with rows
// of every level and state, beside another queue's.
func TestClaimPlan(t *testing.T) {
	db := testDB(t)
	prefix := freshPrefix(t, db)
	d := openDriver(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, queue := range []string{"plan", "other"} {
		msgs := make([]backend.Message, 400)
		for i := range msgs {
			msgs[i] = backend.Message{ID: uuidFor(i, queue), Kind: "k", Body: []byte("x"), Priority: i % 4,
				EnqueuedAt: time.Now(), Delay: time.Duration(i%3) * time.Hour}
		}
		if _, err := d.Enqueue(ctx, queue, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE `"+prefix+"messages`"); err != nil {
		t.Fatal(err)
	}
	claim := strings.Replace(mysql.ClaimSQL(d), "?", "'plan'", 1)
	claim = strings.Replace(claim, "?", "10", 1)
	for _, c := range []struct {
		name, sql, key string
	}{
		{"claim", claim, "messages_claim"},
		{"next due", strings.ReplaceAll(mysql.NextDueSQL(d), "?", "'plan'"), "messages_claim"},
	} {
		rs, err := db.QueryContext(ctx, "EXPLAIN "+c.sql)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", c.name, err)
		}
		cols, _ := rs.Columns()
		var plan []string
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, col := range cols {
				switch v := vals[i].(type) {
				case nil:
				case []byte:
					row[col] = string(v)
				default:
					row[col] = fmt.Sprint(v)
				}
			}
			// A subquery's MIN read from the index's end says "Select
			// tables optimized away" and names no table.
			if strings.Contains(row["table"], "messages") && row["key"] != c.key {
				t.Errorf("%s: reads %s with key %q; want %s", c.name, row["table"], row["key"], c.key)
			}
			if row["select_type"] == "SUBQUERY" && row["table"] == "" && !strings.Contains(row["Extra"], "optimized away") {
				t.Errorf("%s: a subquery reads no index: %v", c.name, row)
			}
			if strings.Contains(row["Extra"], "filesort") {
				t.Errorf("%s: sorts (%s)", c.name, row["Extra"])
			}
			plan = append(plan, fmt.Sprint(row))
		}
		rs.Close()
		if len(plan) == 0 {
			t.Errorf("%s: EXPLAIN returned no rows", c.name)
		}
		t.Logf("%s plan:\n%s", c.name, strings.Join(plan, "\n"))
	}
}

// uuidFor returns a version 7 UUID unique to (i, salt).
func uuidFor(i int, salt string) string {
	h := uint32(2166136261)
	for _, c := range salt {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("0190a000-0000-7000-8000-%04x%08x", h&0xffff, i)
}
