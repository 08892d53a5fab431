package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestReceiveDelayedKeepsRunAt: a delayed message taken early keeps its
// run-at; when that lease expires it is delayed again (not ready), and
// ReceiveDelayed can take it again. Carried attempts continue.
func TestReceiveDelayedKeepsRunAt(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	q := "early-" + randHex(4)
	m := msg(uuidString(), "later")
	m.Delay = time.Hour
	m.Attempts = 2
	ready := msg(uuidString(), "now")
	if _, err := d.Enqueue(ctx, q, []backend.Message{m, ready}); err != nil {
		t.Fatal(err)
	}
	ds, err := d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: 50 * time.Millisecond})
	if err != nil || len(ds) != 1 {
		t.Fatalf("ReceiveDelayed: %d deliveries, %v; want the delayed one only", len(ds), err)
	}
	if ds[0].ID != m.ID || ds[0].Attempt != 3 {
		t.Errorf("early delivery %s attempt %d; want %s attempt 3", ds[0].ID, ds[0].Attempt, m.ID)
	}
	if until := time.Until(ds[0].RunAt); until < 59*time.Minute || until > 61*time.Minute {
		t.Errorf("early delivery RunAt is %v away, want about 1h", until)
	}
	stats := func() backend.Stats {
		st, err := d.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitFor(t, 10*time.Second, "the early lease to expire", func() bool {
		st := stats()
		return st.Leased == 0 && st.Delayed == 1 && st.Ready == 1
	})
	// Only the ready message is receivable; the expired early lease waits
	// for its run-at.
	got, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != ready.ID {
		t.Fatalf("Receive after the early lease expired: %v, %v; want only %s", got, err, ready.ID)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if got, err := d.Receive(short, q, backend.ReceiveParams{Max: 10, Lease: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive before the run-at: got %d deliveries, %v; want nothing", len(got), err)
	}
	again, err := d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(again) != 1 || again[0].ID != m.ID || again[0].Attempt != 4 {
		t.Fatalf("second ReceiveDelayed: %+v, %v; want %s attempt 4", again, err, m.ID)
	}
	if !again[0].RunAt.Equal(ds[0].RunAt) {
		t.Errorf("second early delivery RunAt %v, want the original %v", again[0].RunAt, ds[0].RunAt)
	}
	errs, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: m.ID, Receipt: again[0].Receipt}})
	if err != nil || errs[0] != nil {
		t.Errorf("Ack of the early delivery: %v %v", errs, err)
	}
}

// TestDeadImportIsIdempotent: imported dead letters keep their fields; a
// repeated import adds nothing.
func TestDeadImportIsIdempotent(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	q := "import-" + randHex(4)
	deadAt := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	letters := []backend.DeadLetter{
		{Message: backend.Message{ID: uuidString(), Kind: "a", Body: []byte("x"), Headers: map[string]string{"h": "v"},
			EnqueuedAt: deadAt.Add(-time.Minute), MaxAttempts: 3}, Attempts: 3, Reason: "boom", DeadAt: deadAt},
		{Message: backend.Message{ID: uuidString(), Kind: "b", Body: []byte{}}, Attempts: 1, Reason: "bad"},
	}
	for i := 0; i < 2; i++ {
		if err := d.DeadImport(ctx, q, letters); err != nil {
			t.Fatalf("DeadImport #%d: %v", i+1, err)
		}
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Letters) != 2 {
		t.Fatalf("%d dead letters after importing 2 twice", len(page.Letters))
	}
	l := page.Letters[0]
	if l.ID != letters[0].ID || l.Reason != "boom" || l.Attempts != 3 || !l.DeadAt.Equal(deadAt) ||
		l.Headers["h"] != "v" || string(l.Body) != "x" || l.MaxAttempts != 3 {
		t.Errorf("imported letter %+v, want the fields of %+v", l, letters[0])
	}
}

// TestDeadListWithoutBodies: a listing that does not show bodies does not
// read them (the statement returns NULL), in both modes.
func TestDeadListWithoutBodies(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	for _, mode := range []string{postgres.ModeSkipLocked, postgres.ModeLog} {
		d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: mode})
		ctx := ctxT(t, 30*time.Second)
		q := "nobody-" + randHex(4)
		l := backend.DeadLetter{Message: backend.Message{ID: uuidString(), Kind: "a", Body: []byte("a big body")}, Attempts: 1, Reason: "boom"}
		if err := d.DeadImport(ctx, q, []backend.DeadLetter{l}); err != nil {
			t.Fatal(err)
		}
		for _, without := range []bool{false, true} {
			page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10, WithoutBodies: without})
			if err != nil || len(page.Letters) != 1 {
				t.Fatalf("%s: DeadList(WithoutBodies %v) = %d letters, %v", mode, without, len(page.Letters), err)
			}
			got := page.Letters[0]
			if without && got.Body != nil || !without && string(got.Body) != "a big body" || got.Reason != "boom" {
				t.Errorf("%s: DeadList(WithoutBodies %v) gave body %q reason %q", mode, without, got.Body, got.Reason)
			}
		}
	}
}
