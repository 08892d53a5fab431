package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testDedup: a dedup key held by a pending (ready, delayed or leased)
// message refuses a second enqueue with the holder's id; acking or
// dead-lettering frees it (contract: dedup-keys).
func (s *suite) testDedup(t *testing.T) {
	c := s.client(t)
	q, other := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if !s.has(FeatureDedup) {
		_, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", DedupKey: "x"})
		wantErr(t, "Enqueue with a dedup key on a driver without dedup", err, fila.ErrUnsupported)
		s.need(t, FeatureDedup)
	}
	dupOf := func(what string, err error, holder string) {
		t.Helper()
		var de *fila.DuplicateError
		if !errors.As(err, &de) || !errors.Is(err, fila.ErrDuplicate) {
			t.Errorf("%s: want *DuplicateError (ErrDuplicate), got %v", what, err)
			return
		}
		if de.ID != holder {
			t.Errorf("%s: duplicate names holder %s, want %s", what, de.ID, holder)
		}
	}
	first := enqueue(t, c, q, fila.Message{Kind: "order.paid", DedupKey: "order-42"})
	_, err := c.Enqueue(ctx, q, fila.Message{Kind: "order.paid", DedupKey: "order-42"})
	dupOf("second enqueue of a ready key", err, first)
	enqueue(t, c, other, fila.Message{Kind: "order.paid", DedupKey: "order-42"}) // other queue: fine

	delayed := enqueue(t, c, q, fila.Message{Kind: "later", DedupKey: "delayed-key", Delay: time.Hour})
	_, err = c.Enqueue(ctx, q, fila.Message{Kind: "later", DedupKey: "delayed-key"})
	dupOf("enqueue of a key held by a delayed message", err, delayed)

	// In a batch: a key taken earlier in the batch, and one held already.
	ids, err := c.EnqueueBatch(ctx, q, []fila.Message{
		{Kind: "b", DedupKey: "batch-key"},
		{Kind: "b", DedupKey: "batch-key"},
		{Kind: "b", DedupKey: "order-42"},
		{Kind: "b"},
	})
	if !errors.Is(err, fila.ErrDuplicate) {
		t.Errorf("batch with duplicate keys: want ErrDuplicate, got %v", err)
	}
	if len(ids) != 4 {
		t.Fatalf("batch with duplicates returned %d ids, want 4", len(ids))
	}
	if ids[1] != ids[0] || ids[2] != first || ids[3] == "" || ids[3] == ids[0] {
		t.Errorf("batch ids %v: want [x x %s y] (duplicates name their holders)", ids, first)
	}

	// Leased still holds the key; ack frees it.
	got := map[string]*fila.Delivery{}
	for len(got) < 3 {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive: have %d of 3: %v", len(got), err)
		}
		for _, d := range ds {
			got[d.ID] = d
		}
	}
	d := got[first]
	if d == nil {
		t.Fatalf("message %s not received", first)
	}
	if d.DedupKey != "order-42" {
		t.Errorf("delivery dedup key %q, want %q", d.DedupKey, "order-42")
	}
	_, err = c.Enqueue(ctx, q, fila.Message{Kind: "order.paid", DedupKey: "order-42"})
	dupOf("enqueue of a key held by a leased message", err, first)
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	again := enqueue(t, c, q, fila.Message{Kind: "order.paid", DedupKey: "order-42"})
	if again == first {
		t.Errorf("enqueue after ack returned the old id")
	}
	// Dead frees the key too.
	b := got[ids[0]]
	if b == nil {
		t.Fatalf("batch message %s not received", ids[0])
	}
	if err := b.Dead(ctx, "no"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	enqueue(t, c, q, fila.Message{Kind: "b", DedupKey: "batch-key"})
}
