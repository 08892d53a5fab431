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

// testCompeting: N consumers on separate clients drain M messages; nothing
// is lost and no message is held by two consumers at once (contract: visibility).
func (s *suite) testCompeting(t *testing.T) {
	s.need(t, FeatureConcurrentClaims)
	const consumers, perConsumer, total = 4, 2, 300
	prod := s.client(t)
	q := s.queue(t)
	msgs := make([]fila.Message, total)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "work", Body: []byte(fmt.Sprint(i))}
	}
	ids, err := prod.EnqueueBatch(ctxTimeout(t, 30*time.Second), q, msgs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	var (
		mu      sync.Mutex
		holding = map[string]int{} // id → worker holding it now
		acked   = map[string]int{}
		errs    []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var c *fila.Client
	for w := 0; w < consumers*perConsumer; w++ {
		if w%perConsumer == 0 {
			c = s.client(t) // perConsumer goroutines share each client
		}
		wg.Add(1)
		go func(w int, c *fila.Client) {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(acked) >= total
				mu.Unlock()
				if done {
					cancel()
					return
				}
				ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 5, Lease: 30 * time.Second})
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("worker %d: Receive: %v", w, err))
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				for _, d := range ds {
					if other, held := holding[d.ID]; held {
						errs = append(errs, fmt.Sprintf("message %s received by worker %d while worker %d holds it", d.ID, w, other))
					}
					holding[d.ID] = w
				}
				mu.Unlock()
				for _, d := range ds {
					mu.Lock()
					delete(holding, d.ID)
					mu.Unlock()
					if err := d.Ack(ctx); err != nil {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("worker %d: Ack %s: %v", w, d.ID, err))
						mu.Unlock()
						continue
					}
					mu.Lock()
					acked[d.ID]++
					mu.Unlock()
				}
			}
		}(w, c)
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	lost := 0
	for _, id := range ids {
		switch n := acked[id]; {
		case n == 0:
			lost++
		case n > 1:
			t.Errorf("message %s acked %d times with 30s leases", id, n)
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d messages never delivered", lost, total)
	}
}

// testCancel: a blocked receive returns the context's error promptly (contract: cancellation).
func (s *suite) testCancel(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Receive(ctx, q, fila.ReceiveParams{})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it block; see testWakeUp
	cancel()
	at := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Receive returned %v, want context.Canceled", err)
		}
		if d := time.Since(at); d > time.Second {
			t.Errorf("cancelled Receive took %v to return", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled Receive did not return within 5s")
	}
	// An already-cancelled context fails at once.
	_, err := c.Receive(ctx, q, fila.ReceiveParams{})
	wantErr(t, "Receive with a cancelled context", err, context.Canceled)
	_, err = c.Enqueue(ctx, q, fila.Message{Kind: "k"})
	wantErr(t, "Enqueue with a cancelled context", err, context.Canceled)
}

// testCancelLosesNothing: messages claimed while a receive is being
// cancelled are not lost: they are given back (contract: cancellation).
func (s *suite) testCancelLosesNothing(t *testing.T) {
	c, prod := s.client(t), s.client(t)
	q := s.queue(t)
	const rounds = 15
	want := map[string]bool{}
	got := map[string]bool{}
	for i := 0; i < rounds; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan []*fila.Delivery, 1)
		go func() {
			ds, _ := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: s.h.Lease})
			done <- ds
		}()
		want[enqueue(t, prod, q, fila.Message{Kind: "race"})] = true
		time.Sleep(time.Duration(i%5) * time.Millisecond) // vary the race
		cancel()
		for _, d := range <-done {
			err := d.Ack(ctxTimeout(t, 10*time.Second))
			if errors.Is(err, fila.ErrLeaseLost) && !time.Now().Before(d.Deadline()) {
				// The receive returned after its lease ended (a loaded
				// machine, a 1s lease): the ack is refused, as it must
				// be, and the message comes again in the drain below.
				continue
			}
			got[d.ID] = true
			if err != nil {
				t.Errorf("Ack: %v", err)
			}
		}
	}
	rest := drain(t, prod, q, len(want)-len(got), s.h.Lease+s.h.RedeliveryBound+10*time.Second)
	for id := range rest {
		got[id] = true
	}
	for id := range want {
		if !got[id] {
			t.Errorf("message %s lost", id)
		}
	}
}

// testClose: Close ends blocked calls, every later call returns ErrClosed,
// and Close never acks (contract: close).
func (s *suite) testClose(t *testing.T) {
	c, other := s.client(t), s.client(t)
	q, idle := s.queue(t), s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "close"})
	d := receiveOne(t, c, q, s.h.Lease, 10*time.Second)
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Receive(context.Background(), idle, fila.ReceiveParams{})
		blocked <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it block; see testWakeUp
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-blocked:
		wantErr(t, "Receive blocked during Close", err, fila.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("a Receive blocked during Close did not return within 5s")
	}
	ctx := ctxTimeout(t, 10*time.Second)
	_, err := c.Enqueue(ctx, q, fila.Message{Kind: "k"})
	wantErr(t, "Enqueue after Close", err, fila.ErrClosed)
	_, err = c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "k"}})
	wantErr(t, "EnqueueBatch after Close", err, fila.ErrClosed)
	_, err = c.Receive(ctx, q, fila.ReceiveParams{})
	wantErr(t, "Receive after Close", err, fila.ErrClosed)
	wantErr(t, "Ack after Close", d.Ack(ctx), fila.ErrClosed)
	wantErr(t, "Retry after Close", d.Retry(ctx, 0, ""), fila.ErrClosed)
	wantErr(t, "Dead after Close", d.Dead(ctx, "x"), fila.ErrClosed)
	wantErr(t, "Extend after Close", d.Extend(ctx, time.Minute), fila.ErrClosed)
	wantErr(t, "AckBatch after Close", c.AckBatch(ctx, []*fila.Delivery{d}), fila.ErrClosed)
	wantErr(t, "Ping after Close", c.Ping(ctx), fila.ErrClosed)
	if s.has(FeatureStats) {
		_, err = c.QueueStats(ctx, q)
		wantErr(t, "QueueStats after Close", err, fila.ErrClosed)
	}
	if s.has(FeatureDeadLetters) {
		_, err = c.DeadList(ctx, q, fila.DeadListParams{})
		wantErr(t, "DeadList after Close", err, fila.ErrClosed)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	r := receiveOne(t, other, q, time.Minute, s.h.Lease+s.h.RedeliveryBound+time.Second)
	if r.ID != id || r.Attempt != 2 {
		t.Errorf("after Close, received %s attempt %d, want %s attempt 2 (Close must not ack)", r.ID, r.Attempt, id)
	}
	if err := r.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
