package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
)

// logRows counts a queue's rows of one log table, copies included.
func logRows(t *testing.T, pool *pgxpool.Pool, schema, table, queue string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.%s WHERE queue = $1`, schema, table), queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// enqueueN enqueues n messages to q in one batch.
func enqueueN(t *testing.T, c *fila.Client, q string, n int) {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k", Body: []byte(fmt.Sprintf("m%d", i))}
	}
	if _, err := c.EnqueueBatch(context.Background(), q, msgs); err != nil {
		t.Fatal(err)
	}
}

// TestLogClaimWholeBatch: a receive of a batch writes one claim row and no
// lease rows, and an ack of the whole batch one settlement row; a second ack
// of the same receipts settles nothing.
func TestLogClaimWholeBatch(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "whole", 50)
	ds := receiveAll(t, c, "whole", 50, 10*time.Second)
	claims, leases := logRows(t, pool, schema, "log_claims", "whole"), logRows(t, pool, schema, "log_leases", "whole")
	if claims < 1 || claims > 2 || leases != 0 {
		t.Errorf("receiving 50 wrote %d claim rows and %d lease rows; want one claim (two at most: the batch may be split by a tick) and no lease", claims, leases)
	}
	var batch []*fila.Delivery
	for _, d := range ds {
		batch = append(batch, d)
	}
	if err := c.AckBatch(ctx, batch); err != nil {
		t.Fatalf("AckBatch: %v", err)
	}
	if n := logRows(t, pool, schema, "log_settles", "whole"); n != claims {
		t.Errorf("acking the whole batch wrote %d settlement rows, want one per claim (%d)", n, claims)
	}
	if st, err := c.QueueStats(ctx, "whole"); err != nil || st.Ready+st.Leased+st.Delayed != 0 {
		t.Errorf("QueueStats after the ack: %+v, %v; want empty", st, err)
	}
	if err := batch[0].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("second ack of a member: %v, want ErrLeaseLost", err)
	}
}

// TestLogClaimPartial: members acked alone are settled alone, and when the
// claim's deadline passes only the others are delivered again.
func TestLogClaimPartial(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "partial", 10)
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	ds, err := c.Receive(rctx, "partial", fila.ReceiveParams{Max: 10, Lease: time.Second})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	for _, d := range ds[:len(ds)/2] {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		acked[d.ID] = true
	}
	again := map[string]bool{}
	for len(again) < len(ds)-len(acked) {
		d := receiveOneLog(t, c, "partial", 10*time.Second)
		if acked[d.ID] {
			t.Fatalf("acked member %s delivered again", d.ID)
		}
		if d.Attempt != 2 {
			t.Errorf("member %s redelivered at attempt %d, want 2", d.ID, d.Attempt)
		}
		again[d.ID] = true
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		if !acked[d.ID] {
			if err := d.Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
				t.Errorf("ack with the expired claim's receipt: %v, want ErrLeaseLost", err)
			}
		}
	}
}

// TestLogClaimExtendedMember: a member extended alone follows its own
// deadline, and once it expired and was delivered again an ack of the whole
// claim with the old receipts settles the others, not it.
func TestLogClaimExtendedMember(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "extended", 3)
	ds := receiveAll(t, c, "extended", 3, 10*time.Second)
	var batch []*fila.Delivery
	for _, d := range ds {
		batch = append(batch, d)
	}
	short := batch[0]
	if err := short.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d := receiveOneLog(t, c, "extended", 10*time.Second) // after the 300 ms
	if d.ID != short.ID || d.Attempt != 2 {
		t.Fatalf("got %s attempt %d, want the shortened member %s at attempt 2", d.ID, d.Attempt, short.ID)
	}
	if err := c.AckBatch(ctx, batch); !errors.Is(err, fila.ErrLeaseLost) {
		t.Fatalf("AckBatch with one lost member: %v, want ErrLeaseLost for it", err)
	}
	// The two others are settled; the redelivery alone is leased.
	if st, err := c.QueueStats(ctx, "extended"); err != nil || st.Leased != 1 || st.Ready != 0 {
		t.Errorf("QueueStats after the batch ack: %+v, %v; want only the redelivery leased", st, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("ack of the redelivery: %v", err)
	}
	if st, err := c.QueueStats(ctx, "extended"); err != nil || st.Leased+st.Ready != 0 {
		t.Errorf("QueueStats at the end: %+v, %v; want empty", st, err)
	}
}

// TestLogClaimRotation: a claim with an unsettled member survives
// rotations, its member can be acked after them, and then rotation drops
// the claim and its message rows.
func TestLogClaimRotation(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	enqueueN(t, c, "kept", 5)
	ds := receiveAll(t, c, "kept", 5, 10*time.Second)
	var kept *fila.Delivery
	for _, d := range ds {
		if kept == nil {
			kept = d
			continue
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// expiring: the same, with a lease that ends after the rotations.
	enqueueN(t, c, "expiring", 5)
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	eds, err := c.Receive(rctx, "expiring", fila.ReceiveParams{Max: 5, Lease: 3 * time.Second})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range eds[1:] {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitRotations(t, pool, schema, 4)
	// The acked members' settlements are gone with their generation: the
	// claim's copy must not hold them, or they come back at its deadline.
	// One receive takes every expired member at once.
	rctx, rcancel = context.WithTimeout(ctx, 10*time.Second)
	again, err := c.Receive(rctx, "expiring", fila.ReceiveParams{Max: 10})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 {
		t.Fatalf("after the claim's deadline %d members came back, want 1 (the four others were acked)", len(again))
	}
	d := again[0]
	if d.ID != eds[0].ID || d.Attempt != 2 {
		t.Errorf("after the claim's deadline got %s attempt %d, want the unsettled member %s at attempt 2", d.ID, d.Attempt, eds[0].ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queueRows(t, pool, schema, "kept"); n != 1 {
		t.Errorf("after rotations the queue holds %d message rows, want 1 (the unsettled member's)", n)
	}
	if err := kept.Ack(ctx); err != nil {
		t.Fatalf("ack of the member held across rotations: %v", err)
	}
	waitRotations(t, pool, schema, 4)
	if n := queueRows(t, pool, schema, "kept"); n != 0 {
		t.Errorf("after everything was settled the queue holds %d message rows", n)
	}
	if n := logRows(t, pool, schema, "log_claims", "kept"); n != 0 {
		t.Errorf("after everything was settled %d claim rows remain", n)
	}
}
