package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testShortPolling: a consumer that calls Receive in a loop with a short
// context each time gets a delayed message soon after it is due. A
// Receive whose context ended while its driver was claiming must not leave
// the message leased (here for a minute) to nobody (contract:
// cancellation). Eight samples run at once, each on its own queue, to give
// the race between the due time and a context's end a chance to happen.
func (s *suite) testShortPolling(t *testing.T) {
	const (
		samples = 8
		delay   = time.Second
		poll    = 100 * time.Millisecond
		lease   = time.Minute
	)
	c, prod := s.client(t), s.client(t)
	// Far less than the lease a lost claim would hold the message for.
	within := delay + s.h.WakeupBound + s.h.RedeliveryBound + 10*time.Second
	var wg sync.WaitGroup
	errs := make(chan error, samples)
	for i := range samples {
		q := s.queue(t)
		id := enqueue(t, prod, q, fila.Message{Kind: "poll", Delay: delay})
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			receives := 0
			for time.Since(start) < within {
				ctx, cancel := context.WithTimeout(context.Background(), poll)
				ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: lease})
				cancel()
				receives++
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					errs <- fmt.Errorf("sample %d: Receive: %w", i, err)
					return
				}
				for _, d := range ds {
					if d.ID != id {
						errs <- fmt.Errorf("sample %d: received %s, want %s", i, d.ID, id)
						return
					}
					if err := d.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
						errs <- fmt.Errorf("sample %d: Ack: %w", i, err)
					}
					return
				}
			}
			errs <- fmt.Errorf("sample %d: the message delayed %v was not received within %v by %d receives of %v each",
				i, delay, within, receives, poll)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testMaxAfterLateCommit: Receive never returns more than Max, here after
// a transaction that committed late (a log-structured driver reads such
// rows apart from the rest), and every message still arrives once.
func (s *suite) testMaxAfterLateCommit(t *testing.T) {
	s.need(t, FeatureTxEnqueue)
	c, cons := s.client(t), s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	late, err := c.EnqueueTx(ctx, tx.Value, q, []fila.Message{{Kind: "late"}, {Kind: "late"}})
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("EnqueueTx: %v", err)
	}
	want := map[string]bool{enqueue(t, c, q, fila.Message{Kind: "early"}): true}
	got := map[string]bool{}
	take := func(max int) {
		t.Helper()
		ds, err := cons.Receive(ctx, q, fila.ReceiveParams{Max: max, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive(Max %d) with %d of %d received: %v", max, len(got), len(want), err)
		}
		if len(ds) > max {
			t.Errorf("Receive(Max %d) returned %d deliveries", max, len(ds))
		}
		for _, d := range ds {
			if got[d.ID] {
				t.Errorf("message %s delivered twice", d.ID)
			}
			got[d.ID] = true
		}
		if err := cons.AckBatch(ctx, ds); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
	take(1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, id := range late { // ready now
		want[id] = true
	}
	for range 10 {
		want[enqueue(t, c, q, fila.Message{Kind: "later"})] = true
	}
	for len(got) < len(want) {
		take(5)
	}
	for id := range want {
		if !got[id] {
			t.Errorf("message %s not received", id)
		}
	}
}
