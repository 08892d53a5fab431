package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// The wake-up tests measure how long a blocked Receive takes to return
// after the event that should wake it, less what a Receive of a message
// that is already waiting takes at the same moment (a pacer). The wake-up
// itself is what the bound is about: a server stalled for seconds (a
// loaded machine flushing its disk, a pooler queueing its clients) slows
// the woken receiver's claim and the pacer's alike, while a receiver that
// is not woken at all waits for its poll interval or its context, whatever
// the server does.

// pacer is a client with a message waiting on a queue of its own, ready to
// measure one Receive.
type pacer struct {
	c *fila.Client
	q string
}

// newPacer opens the pacer's client and queue. It receives once before,
// so that what a client sets up on its first call (connections, topology,
// the queue's pause and cancel marks) is not counted.
func (s *suite) newPacer(t *testing.T) *pacer {
	t.Helper()
	p := &pacer{c: s.client(t), q: s.queue(t) + "-pacer"}
	enqueue(t, p.c, p.q, fila.Message{Kind: "pacer-warm-up"})
	if err := receiveOne(t, p.c, p.q, time.Minute, 10*time.Second).Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Ack of the pacer's warm-up message: %v", err)
	}
	enqueue(t, p.c, p.q, fila.Message{Kind: "pacer"})
	return p
}

// pace is one measure of the pacer: how long its Receive took, or why it
// failed. The pacer's goroutine never touches t, so a test that stops early
// (t.Fatal) leaves nothing to report after its end.
type pace struct {
	took time.Duration
	err  error
}

// start receives the waiting message now; took reads the measure.
func (p *pacer) start(t *testing.T) <-chan pace {
	return p.startAt(t, time.Now())
}

// startAt receives the waiting message at when (now, if it has passed);
// took reads the measure.
func (p *pacer) startAt(t *testing.T, when time.Time) <-chan pace {
	res := make(chan pace, 1)
	ctx := ctxTimeout(t, time.Until(when)+30*time.Second)
	go func() {
		if wait := time.Until(when); wait > 0 {
			time.Sleep(wait) // the moment to measure, not a wait for a condition
		}
		at := time.Now()
		ds, err := p.c.Receive(ctx, p.q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		if err == nil && len(ds) != 1 {
			err = fmt.Errorf("%d deliveries, want 1", len(ds))
		}
		res <- pace{time.Since(at), err}
	}()
	return res
}

// took waits for the measure started on ch, failing t if the pacer's
// Receive failed.
func (p *pacer) took(t *testing.T, ch <-chan pace) time.Duration {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Errorf("the pacer's Receive of a waiting message: %v", r.err)
	}
	return r.took
}

// checkWakeUp fails t when a receiver that returned lat after the waking
// event took longer than the wake-up bound beyond the pacer's Receive
// (took) started at that event.
func (s *suite) checkWakeUp(t *testing.T, what string, lat, took time.Duration) {
	t.Helper()
	if lat-took > s.h.WakeupBound {
		t.Errorf("blocked Receive returned %v after the %s, %v more than a Receive of a waiting message started then; WakeupBound is %v",
			lat, what, lat-took, s.h.WakeupBound)
	}
}

// checkLate fails t when a message due at some moment arrived late after
// it, more than RedeliveryBound beyond what a Receive of a waiting message,
// started at that moment, took (took): a server stalled for seconds delays
// both alike, while a driver that misses the due time waits for its poll
// interval whatever the server does.
func (s *suite) checkLate(t *testing.T, what string, late, took time.Duration) {
	t.Helper()
	if late-took > s.h.RedeliveryBound {
		t.Errorf("%s %v late, %v more than a Receive of a waiting message started when it was due; RedeliveryBound is %v",
			what, late, late-took, s.h.RedeliveryBound)
	}
}

// received is what a blocked Receive returned, and when.
type received struct {
	ds  []*fila.Delivery
	err error
	at  time.Time
}

// blockedReceive starts a Receive of one message of q on c, leased for a
// minute; the channel gets its result when it returns.
func blockedReceive(t *testing.T, c *fila.Client, q string) <-chan received {
	res := make(chan received, 1)
	ctx := ctxTimeout(t, 30*time.Second)
	go func() {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		res <- received{ds, err, time.Now()}
	}()
	return res
}

// testWakeUp: a receive blocked on an empty queue returns soon after an
// enqueue (contract: wake-up). The latency is logged.
func (s *suite) testWakeUp(t *testing.T) {
	cons, prod := s.client(t), s.client(t)
	q := s.queue(t)
	pc := s.newPacer(t)
	// The consumer receives once before, so that what it sets up on its
	// first call (its LISTEN connection, topology, the queue's marks) is not
	// counted as wake-up latency: on a loaded server that took more than a
	// second, and the enqueue came while the first call was still setting
	// up, so the measure was of the set-up and the fallback poll, not of a
	// blocked Receive. It receives a message of its own, as in
	// testReleaseWakesOthers: a Receive ended by its context could leave a
	// claim in flight that takes the next message.
	enqueue(t, cons, q, fila.Message{Kind: "warm-up"})
	if w := receiveOne(t, cons, q, time.Minute, 10*time.Second); w.Kind != "warm-up" {
		t.Fatalf("received kind %q, want the warm-up message", w.Kind)
	} else if err := w.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Ack of the warm-up message: %v", err)
	}
	res := blockedReceive(t, cons, q)
	// There is no portable way to observe that the receiver is blocked, so
	// give it time to reach its wait; once set up, a late start only makes
	// the wake-up look faster than it is, never slower.
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	id := enqueue(t, prod, q, fila.Message{Kind: "wake"})
	// The wake-up counts from the enqueue's return: before it, the message
	// may not be stored yet (a loaded server can take seconds to store it,
	// which is the enqueue's latency, not the receiver's). It is negative
	// when the receiver had the message before the enqueue returned, as
	// when a broker delivers before its publisher confirm arrives.
	sent := time.Now()
	paced := pc.start(t)
	r := <-res
	took := pc.took(t, paced)
	if r.err != nil {
		t.Fatalf("blocked Receive: %v", r.err)
	}
	lat := r.at.Sub(sent)
	t.Logf("wake-up latency: %v after the enqueue returned (the enqueue took %v; a Receive of a waiting message started then took %v)",
		lat, sent.Sub(start), took)
	if r.ds[0].ID != id {
		t.Errorf("received %s, want %s", r.ds[0].ID, id)
	}
	s.checkWakeUp(t, "enqueue", lat, took)
}

// testReleaseWakesOthers: a receive blocked in another client wakes soon
// after a holder releases (or retries without delay) a message it had leased
// for long, not at the old deadline (contract: wake-up).
func (s *suite) testReleaseWakesOthers(t *testing.T) {
	holder, waiter := s.client(t), s.client(t)
	q := s.queue(t)
	pc := s.newPacer(t)
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
	res := blockedReceive(t, waiter, q)
	time.Sleep(500 * time.Millisecond) // let it block; see testWakeUp
	start := time.Now()
	if err := d.Release(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// As in testWakeUp, the wake-up counts from the Release's return.
	released := time.Now()
	paced := pc.start(t)
	r := <-res
	took := pc.took(t, paced)
	if r.err != nil {
		t.Fatalf("blocked Receive: %v (a message released from an hour-long lease must come back at once)", r.err)
	}
	if r.ds[0].ID != id || r.ds[0].Attempt != 2 {
		t.Errorf("received %s attempt %d, want %s attempt 2", r.ds[0].ID, r.ds[0].Attempt, id)
	}
	lat := r.at.Sub(released)
	t.Logf("release-to-receive latency: %v after the Release returned (the Release took %v; a Receive of a waiting message started then took %v)",
		lat, released.Sub(start), took)
	s.checkWakeUp(t, "Release", lat, took)
	if err := r.ds[0].Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
