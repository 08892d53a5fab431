package conformance

import (
	"bytes"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// testLeaseEndsAtDeadline: once a lease's deadline has passed, its receipt
// is no longer current even though nobody received the message again:
// Ack, Retry, Dead and Extend each return ErrLeaseLost and change nothing,
// and the message comes back with its next attempt. The calls go to the
// driver itself, since a Delivery refuses every call after its first
// ErrLeaseLost (contract: lease-ends-at-deadline).
func (s *suite) testLeaseEndsAtDeadline(t *testing.T) {
	drv, c := s.rawClient(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, time.Minute)
	body := []byte("still here")
	id := enqueue(t, c, q, fila.Message{Kind: "late", Body: body})
	ds, err := drv.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: s.h.Lease})
	if err != nil || len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("Receive = %d deliveries, %v; want %s", len(ds), err, id)
	}
	d := ds[0]
	// Wait out the deadline; the margin absorbs the broker's clock and the
	// rounding of deadlines to milliseconds.
	time.Sleep(time.Until(d.Deadline) + earlyTolerance)
	ref := backend.Ref{Queue: q, ID: d.ID, Receipt: d.Receipt}
	errs, err := drv.Ack(ctx, []backend.Ref{ref})
	if err != nil || len(errs) != 1 {
		t.Errorf("Ack after the deadline = %v, %v; want one ErrLeaseLost", errs, err)
	} else {
		wantErr(t, "Ack after the deadline", errs[0], fila.ErrLeaseLost)
	}
	wantErr(t, "Retry after the deadline", drv.Retry(ctx, ref, time.Hour, "late retry"), fila.ErrLeaseLost)
	wantErr(t, "Dead after the deadline", drv.Dead(ctx, ref, "late dead", d.Attempt), fila.ErrLeaseLost)
	_, err = drv.Extend(ctx, ref, time.Hour)
	wantErr(t, "Extend after the deadline", err, fila.ErrLeaseLost)
	// Nothing changed: the message comes back as the expired lease left it.
	again := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if again.ID != id || again.Attempt != 2 || !bytes.Equal(again.Body, body) || again.LastError != "" {
		t.Errorf("after refused settlements: %s attempt %d body %q last error %q; want %s attempt 2 %q and no last error",
			again.ID, again.Attempt, again.Body, again.LastError, id, body)
	}
	if err := again.Ack(ctx); err != nil {
		t.Errorf("Ack of the new lease: %v", err)
	}
	if s.has(FeatureDeadLetters) {
		if page, err := c.DeadList(ctx, q, fila.DeadListParams{}); err != nil || len(page.Letters) != 0 {
			t.Errorf("dead letters after a refused Dead: %d, %v; want none", len(page.Letters), err)
		}
	}
}

// testBodiesAreCopies: what was enqueued is what every delivery carries,
// byte for byte. A producer that reuses its buffer after Enqueue returns,
// and a consumer that changes the body it received before Retry, Release
// or Dead, change nothing stored (contract: byte-exact).
func (s *suite) testBodiesAreCopies(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, time.Minute)
	want := []byte("the original bytes")
	buf := bytes.Clone(want)
	hdr := map[string]string{"h": "v"}
	id := enqueue(t, c, q, fila.Message{Kind: "copy", Body: buf, Headers: hdr})
	copy(buf, "XXXXXXXXXXXXXXXXXX") // the producer reuses its buffer
	hdr["h"] = "changed"
	batch := bytes.Clone(want)
	ids, err := c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "copy", Body: batch}, {Kind: "copy", Body: batch}})
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	copy(batch, "YYYYYYYYYYYYYYYYYY")
	all := map[string]bool{id: true, ids[0]: true, ids[1]: true}

	check := func(step string, d *fila.Delivery) {
		t.Helper()
		if !all[d.ID] {
			t.Fatalf("%s: received %s, not one of this test's messages", step, d.ID)
		}
		if !bytes.Equal(d.Body, want) {
			t.Errorf("%s: message %s body %q, want %q", step, d.ID, d.Body, want)
		}
		if d.ID == id && d.Headers["h"] != "v" {
			t.Errorf("%s: message %s header %q, want %q", step, d.ID, d.Headers["h"], "v")
		}
	}
	scribble := func(d *fila.Delivery) {
		for i := range d.Body {
			d.Body[i] = 'Z'
		}
		if d.Headers != nil {
			d.Headers["h"] = "scribbled"
		}
	}
	// Each message is received, checked, scribbled on and given back: by
	// Retry, then Release; then the last delivery of each is dead-lettered
	// after scribbling, and the dead letter is checked.
	ops := []string{"first receive", "after Retry", "after Release"}
	for round, step := range ops {
		for n := 0; n < len(all); n++ {
			d := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+5*time.Second)
			check(step, d)
			scribble(d)
			switch round {
			case 0:
				err = d.Retry(ctx, 0, "scribbled")
			case 1:
				err = d.Release(ctx)
			default:
				err = d.Dead(ctx, "scribbled")
			}
			if err != nil {
				t.Fatalf("%s: settling %s: %v", step, d.ID, err)
			}
		}
	}
	if !s.has(FeatureDeadLetters) {
		return
	}
	page, err := c.DeadList(ctx, q, fila.DeadListParams{})
	if err != nil {
		t.Fatalf("DeadList: %v", err)
	}
	if len(page.Letters) != len(all) {
		t.Errorf("DeadList: %d letters, want %d", len(page.Letters), len(all))
	}
	for _, l := range page.Letters {
		if !bytes.Equal(l.Body, want) {
			t.Errorf("dead letter %s body %q, want %q", l.ID, l.Body, want)
		}
		if l.ID == id && l.Headers["h"] != "v" {
			t.Errorf("dead letter %s header %q, want %q", l.ID, l.Headers["h"], "v")
		}
		// A listed letter is a copy too: scribbling on it changes nothing.
		for i := range l.Body {
			l.Body[i] = 'L'
		}
	}
	if n, err := c.DeadReplay(ctx, q, fila.DeadFilter{}); err != nil || n != len(all) {
		t.Fatalf("DeadReplay = %d, %v; want %d", n, err, len(all))
	}
	for n := 0; n < len(all); n++ {
		d := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+5*time.Second)
		check("after replay", d)
		if err := d.Ack(ctx); err != nil {
			t.Errorf("Ack: %v", err)
		}
	}
}
