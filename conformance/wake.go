package conformance

import (
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testReleaseWakesOthers: a receive blocked in another client wakes soon
// after a holder releases (or retries without delay) a message it had leased
// for long, not at the old deadline (contract: wake-up).
func (s *suite) testReleaseWakesOthers(t *testing.T) {
	holder, waiter := s.client(t), s.client(t)
	q := s.queue(t)
	id := enqueue(t, holder, q, fila.Message{Kind: "handoff"})
	d := receiveOne(t, holder, q, time.Hour, 10*time.Second)
	// The waiter receives once before, so that what it sets up on its first
	// call (connections, topology, the queue's pause and cancel marks) is
	// not counted as wake-up latency on a loaded machine. It receives a
	// message of its own: a Receive ended by its context instead could
	// leave a claim in flight that takes the released message first. The
	// handoff is leased by then, so the waiter cannot take it here (a
	// RabbitMQ consumer kept after the ack would have had it pushed).
	enqueue(t, waiter, q, fila.Message{Kind: "warm-up"})
	if w := receiveOne(t, waiter, q, time.Minute, 10*time.Second); w.ID == id {
		t.Fatalf("the waiter received the leased handoff message")
	} else if err := w.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Ack of the warm-up message: %v", err)
	}
	type result struct {
		ds  []*fila.Delivery
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	go func() {
		ds, err := waiter.Receive(ctxTimeout(t, 30*time.Second), q, fila.ReceiveParams{Lease: time.Minute})
		res <- result{ds, err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // let it block; see testWakeUp
	released := time.Now()
	if err := d.Release(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("blocked Receive: %v (a message released from an hour-long lease must come back at once)", r.err)
	}
	if r.ds[0].ID != id || r.ds[0].Attempt != 2 {
		t.Errorf("received %s attempt %d, want %s attempt 2", r.ds[0].ID, r.ds[0].Attempt, id)
	}
	lat := r.at.Sub(released)
	t.Logf("release-to-receive latency: %v", lat)
	if lat > s.h.WakeupBound {
		t.Errorf("blocked Receive returned %v after the Release; WakeupBound is %v", lat, s.h.WakeupBound)
	}
	if err := r.ds[0].Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
