package conformance

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// testAckReceive: Client.AckReceive acks the deliveries it is given and,
// on a driver that combines the two (backend.AckReceiver), claims the
// messages ready in the same call, as Receive would, without waiting for
// more; on other drivers it only acks (contract: batches).
func (s *suite) testAckReceive(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	_, combines := c.Driver().(backend.AckReceiver)
	bodies := map[string][]byte{}
	add := func(i int) {
		body := []byte{byte(i), 0xff, 0, 'x'}
		bodies[enqueue(t, c, q, fila.Message{Kind: "ack-receive", Body: body})] = body
	}
	check := func(what string, d *fila.Delivery) {
		t.Helper()
		if want, ok := bodies[d.ID]; !ok || !bytes.Equal(d.Body, want) || d.Attempt != 1 {
			t.Errorf("%s: delivery %s body %q attempt %d; want one of the enqueued messages, as enqueued, attempt 1", what, d.ID, d.Body, d.Attempt)
		}
	}
	// first is leased briefly: if its ack did not hold, it comes back. The
	// messages go in before it is received, so that nothing but the
	// AckReceive calls (the first refused before any broker call) runs
	// within its lease: two enqueues between them once outlasted the 1 s
	// lease on a loaded CI machine.
	add(0)
	add(1)
	add(2)
	first := receiveOne(t, c, q, s.h.Lease, 10*time.Second)
	check("Receive", first)

	_, ackErr, err := c.AckReceive(ctx, []*fila.Delivery{first}, q, fila.ReceiveParams{Max: -1})
	wantErr(t, "AckReceive with Max -1", err, fila.ErrInvalid)
	if ackErr != nil {
		t.Errorf("AckReceive with Max -1 acked: %v; want nothing done", ackErr)
	}

	got, ackErr, err := c.AckReceive(ctx, []*fila.Delivery{first}, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || ackErr != nil {
		t.Fatalf("AckReceive: claim error %v, ack error %v", err, ackErr)
	}
	switch {
	case combines && len(got) == 0:
		t.Fatalf("AckReceive returned nothing while two messages were ready (the driver implements backend.AckReceiver)")
	case !combines && len(got) > 0:
		t.Fatalf("AckReceive received %d deliveries; without backend.AckReceiver it only acks", len(got))
	}
	seen := map[string]bool{first.ID: true}
	for _, d := range got {
		check("AckReceive", d)
		if seen[d.ID] {
			t.Errorf("AckReceive delivered %s, which was acked or delivered before", d.ID)
		}
		seen[d.ID] = true
	}
	for len(seen) < len(bodies) {
		d := receiveOne(t, c, q, time.Minute, 10*time.Second)
		check("Receive", d)
		if seen[d.ID] {
			t.Fatalf("Receive delivered %s again", d.ID)
		}
		seen[d.ID] = true
		got = append(got, d)
	}
	// first's ack held: it does not come back once its short lease is over.
	s.expectNone(t, c, q, s.h.Lease+s.h.RedeliveryBound, "the message AckReceive acked")

	// The queue is empty now: AckReceive acks and returns at once, with
	// nothing. first was acked already, so its ack fails as lost.
	rest, ackErr, err := c.AckReceive(ctx, append([]*fila.Delivery{first}, got...), q, fila.ReceiveParams{Max: 10})
	if err != nil {
		t.Fatalf("AckReceive on an empty queue: %v (it must not wait for messages)", err)
	}
	if len(rest) != 0 {
		t.Errorf("AckReceive on an empty queue received %d deliveries", len(rest))
	}
	if !errors.Is(ackErr, fila.ErrLeaseLost) || strings.Count(ackErr.Error(), "delivery ") != 1 {
		t.Errorf("AckReceive of a delivery acked before and %d leased ones: want ErrLeaseLost for the first alone, got %v", len(got), ackErr)
	}

	if !s.has(FeatureMarks) {
		return
	}
	// A paused queue: AckReceive acks and hands nothing out.
	enqueue(t, c, q, fila.Message{Kind: "ack-receive"})
	enqueue(t, c, q, fila.Message{Kind: "ack-receive"})
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if err := c.QueuePause(ctx, q); err != nil {
		t.Fatalf("QueuePause: %v", err)
	}
	paused, ackErr, err := c.AckReceive(ctx, []*fila.Delivery{d}, q, fila.ReceiveParams{Max: 10})
	if err != nil || ackErr != nil || len(paused) != 0 {
		t.Errorf("AckReceive on a paused queue: %d deliveries, claim error %v, ack error %v; want the ack alone", len(paused), err, ackErr)
	}
	if err := c.QueueResume(ctx, q); err != nil {
		t.Fatalf("QueueResume: %v", err)
	}
	last := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if last.ID == d.ID {
		t.Errorf("the delivery acked on the paused queue came back")
	}
	if err := last.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
