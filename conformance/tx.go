package conformance

import (
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testTx: a message enqueued in a transaction is invisible until commit and
// gone after rollback (contract: tx-enqueue).
func (s *suite) testTx(t *testing.T) {
	s.need(t, FeatureTxEnqueue)
	c, cons := s.client(t), s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)

	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	ids, err := c.EnqueueTx(ctx, tx.Value, q, []fila.Message{{Kind: "committed"}, {Kind: "committed"}})
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("EnqueueTx: %v", err)
	}
	s.expectNone(t, cons, q, time.Second, "before commit")
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := drain(t, cons, q, 2, s.afterNone())
	for _, id := range ids {
		if got[id] == nil {
			t.Errorf("committed message %s not received", id)
		}
	}

	tx, err = s.h.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	if _, err := c.EnqueueTx(ctx, tx.Value, q, []fila.Message{{Kind: "rolled-back"}}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	s.expectNone(t, cons, q, s.h.WakeupBound, "after rollback")

	_, err = c.EnqueueTx(ctx, "not a transaction", q, []fila.Message{{Kind: "k"}})
	wantErr(t, "EnqueueTx with a value that is not a transaction", err, fila.ErrInvalid)
}
