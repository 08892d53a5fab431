package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestEnqueueMultiAllOrNothing: a topic publish stores every
// subscription's copies in one transaction, in both modes: when one
// subscription's INSERT fails (here a kind that is not UTF-8, which the
// portable layer would have refused), no subscription gets anything, and a good publish reaches
// every subscription.
func TestEnqueueMultiAllOrNothing(t *testing.T) {
	for _, mode := range []string{postgres.ModeSkipLocked, postgres.ModeLog} {
		t.Run(mode, func(t *testing.T) {
			pool := testPool(t)
			c := openMode(t, migratedSchema(t, pool), mode)
			me := c.Driver().(backend.MultiEnqueuer)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			now := time.Now()
			msg := func(id string) backend.Message {
				return backend.Message{ID: id, Kind: "k", Body: []byte(id), EnqueuedAt: now}
			}
			const a, b = "0190a000-0000-7000-8000-000000000001", "0190a000-0000-7000-8000-000000000002"
			err := me.EnqueueMulti(ctx, []backend.QueueBatch{
				{Queue: "multi-x", Msgs: []backend.Message{msg(a)}},
				{Queue: "multi-y", Msgs: []backend.Message{msg(b), {ID: b[:35] + "3", Kind: "\xff", Body: []byte{}, EnqueuedAt: now}}},
			})
			if err == nil {
				t.Fatal("EnqueueMulti with a kind PostgreSQL refuses succeeded")
			}
			for _, q := range []string{"multi-x", "multi-y"} {
				if s, err := c.QueueStats(ctx, q); err != nil || s.Ready != 0 {
					t.Fatalf("after the failed EnqueueMulti, %s holds %d ready (%v); want nothing", q, s.Ready, err)
				}
			}
			if err := c.TopicSubscribe(ctx, "multi", "multi-x"); err != nil {
				t.Fatal(err)
			}
			if err := c.TopicSubscribe(ctx, "multi", "multi-y"); err != nil {
				t.Fatal(err)
			}
			r, err := c.PublishBatch(ctx, "multi", []fila.Message{{Kind: "k"}, {Kind: "k"}})
			if err != nil || r.Subscriptions != 2 {
				t.Fatalf("PublishBatch: %+v, %v", r, err)
			}
			for _, q := range []string{"multi-x", "multi-y"} {
				ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10})
				if err != nil || len(ds) != 2 {
					t.Fatalf("Receive(%s): %d, %v; want 2", q, len(ds), err)
				}
				for _, d := range ds {
					if d.ID != fila.CopyID(r.IDs[0], q) && d.ID != fila.CopyID(r.IDs[1], q) {
						t.Errorf("%s: copy id %s is not a CopyID of the published ids", q, d.ID)
					}
				}
			}
			// Dedup keys go queue by queue, not through EnqueueMulti.
			err = me.EnqueueMulti(ctx, []backend.QueueBatch{{Queue: "multi-x", Msgs: []backend.Message{{ID: "0190a000-0000-7000-8000-000000000003", Kind: "k", Body: []byte{}, DedupKey: "d", EnqueuedAt: now}}}})
			if !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("EnqueueMulti with a dedup key: %v, want ErrInvalid", err)
			}
		})
	}
}
