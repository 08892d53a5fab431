package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// These tests check what a relay needs to move a queue between brokers:
// messages keep their attempt counts, delayed messages can be taken before
// their run-at, and dead letters can be imported. They call the driver
// directly, as the relay does, for what the portable API does not expose.

// rawClient opens a driver and a client over it.
func (s *suite) rawClient(t *testing.T) (backend.Driver, *fila.Client) {
	t.Helper()
	drv, err := s.h.Open(ctxTimeout(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Harness.Open: %v", err)
	}
	c, err := fila.New(drv, fila.WithLease(s.h.Lease), fila.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return drv, c
}

// newUUID returns a random (version 4) UUID, a valid message id everywhere.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// testCarriedAttempts: a message enqueued with prior attempts is delivered
// with Attempt = Attempts+1 and dead-lettered by the same max attempts (contract: moving-queues).
func (s *suite) testCarriedAttempts(t *testing.T) {
	drv, c := s.rawClient(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	carried := backend.Message{ID: newUUID(), Kind: "moved", Body: []byte("x"), EnqueuedAt: time.Now(), Attempts: 2, MaxAttempts: 3}
	exhausted := backend.Message{ID: newUUID(), Kind: "moved", Body: []byte{}, EnqueuedAt: time.Now(), Attempts: 3, MaxAttempts: 3}
	res, err := drv.Enqueue(ctx, q, []backend.Message{exhausted, carried})
	if err != nil || len(res) != 2 || res[0].ID != exhausted.ID || res[1].ID != carried.ID {
		t.Fatalf("driver Enqueue = %+v, %v", res, err)
	}
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if d.ID != carried.ID || d.Attempt != 3 {
		t.Errorf("received %s attempt %d; want %s attempt 3 (the exhausted one must be dead-lettered)", d.ID, d.Attempt, carried.ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
	// Receiving again claims the exhausted one, if it was not claimed yet,
	// and dead-letters it.
	s.expectNone(t, c, q, time.Second, "a message enqueued with its attempts used up")
	if s.has(FeatureDeadLetters) {
		if l := s.findDead(t, c, q, exhausted.ID); l != nil && (l.Reason != fila.ReasonMaxAttempts || l.Attempts != 3) {
			t.Errorf("dead letter reason %q attempts %d, want %q after the 3 deliveries it carried", l.Reason, l.Attempts, fila.ReasonMaxAttempts)
		}
	}
}

// testReceiveDelayed: delayed messages can be taken early with their run-at,
// a ready message is not among them, and a taken message whose lease expires
// goes back to waiting for its run-at (contract: moving-queues).
func (s *suite) testReceiveDelayed(t *testing.T) {
	drv, dr, c := s.delayedReceiver(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	runAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	delayed := enqueue(t, c, q, fila.Message{Kind: "later", Body: []byte("later"), RunAt: runAt, Headers: map[string]string{"h": "v"}})
	kept := enqueue(t, c, q, fila.Message{Kind: "later", Body: []byte("kept"), RunAt: runAt})
	ready := enqueue(t, c, q, fila.Message{Kind: "now"})

	ds, err := dr.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("ReceiveDelayed(Max 1) = %d deliveries, %v", len(ds), err)
	}
	d := ds[0]
	if d.ID != delayed && d.ID != kept {
		t.Fatalf("ReceiveDelayed returned %s, not a delayed message", d.ID)
	}
	if diff := d.RunAt.Sub(runAt); diff < -time.Second || diff > time.Second {
		t.Errorf("ReceiveDelayed run-at %v, want %v", d.RunAt, runAt)
	}
	if d.Attempt != 1 || d.Kind != "later" {
		t.Errorf("ReceiveDelayed delivery attempt %d kind %q", d.Attempt, d.Kind)
	}
	if d.ID == delayed && (!bytes.Equal(d.Body, []byte("later")) || d.Headers["h"] != "v") {
		t.Errorf("ReceiveDelayed changed the message: body %q headers %v", d.Body, d.Headers)
	}
	// Ack it (moved); let the second one's lease expire.
	errs, err := drv.Ack(ctx, []backend.Ref{{Queue: q, ID: d.ID, Receipt: d.Receipt}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Ack of a ReceiveDelayed delivery: %v %v", err, errs)
	}
	ds, err = dr.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: s.h.Lease})
	if err != nil || len(ds) != 1 {
		t.Fatalf("second ReceiveDelayed = %v, %v; want the other delayed message (first took %s; delayed %s, kept %s, ready %s)", ids(ds), err, d.ID, delayed, kept, ready)
	}
	other := ds[0].ID
	// The ready message is still there for a normal Receive; the abandoned
	// delayed one does not become ready when its lease ends.
	r := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if r.ID != ready {
		t.Errorf("Receive got %s, want the ready message %s", r.ID, ready)
	}
	_ = r.Ack(ctx)
	s.expectNone(t, c, q, s.h.Lease+s.h.RedeliveryBound, "a delayed message whose early lease expired must wait for its run-at")
	ds, err = dr.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != other {
		t.Errorf("after its lease expired, ReceiveDelayed = %v, %v; want %s again", ids(ds), err, other)
	}
}

// delayedReceiver opens a driver that takes delayed messages early, or skips
// the test when the harness declares the feature missing.
func (s *suite) delayedReceiver(t *testing.T) (backend.Driver, backend.DelayedReceiver, *fila.Client) {
	t.Helper()
	s.need(t, FeatureReceiveDelayed)
	drv, c := s.rawClient(t)
	dr, ok := drv.(backend.DelayedReceiver)
	if !ok {
		t.Fatalf("feature %q is not declared missing, but the driver does not implement backend.DelayedReceiver", FeatureReceiveDelayed)
	}
	return drv, dr, c
}

func ids(ds []backend.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// testDeadImport: imported dead letters are listed with their reasons and
// counts, and importing them again changes nothing (contract: moving-queues).
func (s *suite) testDeadImport(t *testing.T) {
	drv, c := s.rawClient(t)
	di, ok := drv.(backend.DeadImporter)
	if !ok {
		s.need(t, FeatureDeadImport)
		t.Fatalf("the driver does not implement backend.DeadImporter")
	}
	s.need(t, FeatureDeadImport)
	s.need(t, FeatureDeadLetters)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	deadAt := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	letters := []backend.DeadLetter{
		{Message: backend.Message{ID: newUUID(), Kind: "a", Body: []byte{1, 2}, Headers: map[string]string{"h": "v"}, EnqueuedAt: deadAt.Add(-time.Minute)},
			Queue: "elsewhere", Attempts: 4, Reason: "boom", DeadAt: deadAt},
		{Message: backend.Message{ID: newUUID(), Kind: "b", Body: []byte{}, EnqueuedAt: deadAt},
			Queue: "elsewhere", Attempts: 1, Reason: "bad", DeadAt: deadAt.Add(time.Second)},
	}
	for round := 0; round < 2; round++ {
		if err := di.DeadImport(ctx, q, letters); err != nil {
			t.Fatalf("DeadImport (round %d): %v", round, err)
		}
	}
	page, err := c.DeadList(ctx, q, fila.DeadListParams{})
	if err != nil {
		t.Fatalf("DeadList: %v", err)
	}
	if len(page.Letters) != 2 {
		t.Fatalf("DeadList after importing 2 letters twice: %d letters", len(page.Letters))
	}
	for i, l := range page.Letters {
		w := letters[i]
		if l.ID != w.ID || l.Kind != w.Kind || l.Reason != w.Reason || l.Attempts != w.Attempts || l.Queue != q || !bytes.Equal(l.Body, w.Body) {
			t.Errorf("imported letter %d: %+v; want %+v in queue %s", i, l, w, q)
		}
		if d := l.DeadAt.Sub(w.DeadAt); d < -time.Second || d > time.Second {
			t.Errorf("imported letter %d dead at %v, want %v", i, l.DeadAt, w.DeadAt)
		}
	}
	// A replayed import is a normal message again.
	if n, err := c.DeadReplay(ctx, q, fila.DeadFilter{IDs: []string{letters[0].ID}}); err != nil || n != 1 {
		t.Fatalf("DeadReplay of an imported letter = %d, %v", n, err)
	}
	d := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if d.ID != letters[0].ID || d.Attempt != 1 || d.Headers["h"] != "v" {
		t.Errorf("replayed import: %s attempt %d headers %v", d.ID, d.Attempt, d.Headers)
	}
	if err := d.Ack(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Ack: %v", err)
	}
}

// testReleaseKeepsRunAt: a message taken early and then released (or
// retried sooner than its run-at) waits for its run-at again (contract: moving-queues).
func (s *suite) testReleaseKeepsRunAt(t *testing.T) {
	drv, dr, c := s.delayedReceiver(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	// The message must still be delayed when ReceiveDelayed looks at it. On
	// a slow broker the enqueue and the call can outlast a short delay; a
	// try whose call returned after the run-at proves nothing and is made
	// again with twice the delay. A call that returned before the run-at
	// without the message is a failure.
	wait := 3 * time.Second
	for try := 0; ; try++ {
		q := s.queue(t)
		runAt := time.Now().Add(wait)
		id := enqueue(t, c, q, fila.Message{Kind: "later", RunAt: runAt})
		ds, err := dr.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			t.Fatalf("ReceiveDelayed: %v", err)
		}
		if len(ds) == 0 && !time.Now().Before(runAt) && try < 3 {
			t.Logf("ReceiveDelayed returned after the run-at %v away; trying again with %v", wait, 2*wait)
			wait *= 2
			continue
		}
		if len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("ReceiveDelayed = %v; want %s (still %v before its run-at)", ids(ds), id, time.Until(runAt))
		}
		if err := drv.Retry(ctx, backend.Ref{Queue: q, ID: id, Receipt: ds[0].Receipt}, 0, ""); err != nil {
			t.Fatalf("Release of a message taken early: %v", err)
		}
		d := receiveOne(t, c, q, time.Minute, time.Until(runAt)+s.h.RedeliveryBound+time.Second)
		if early := time.Until(runAt); early > earlyTolerance {
			t.Errorf("a released message taken early was received %v before its run-at", early)
		}
		if d.ID != id {
			t.Errorf("received %s, want %s", d.ID, id)
		}
		_ = d.Ack(ctx)
		return
	}
}

// testReceiveDelayedBehindReady: ReceiveDelayed finds a delayed message
// enqueued after ready ones, and leaves the ready ones to Receive, each
// once at its first attempt. The log mode once stopped at the first ready
// message and returned nothing.
func (s *suite) testReceiveDelayedBehindReady(t *testing.T) {
	_, dr, c := s.delayedReceiver(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	first := enqueue(t, c, q, fila.Message{Kind: "now"})
	delayed := enqueue(t, c, q, fila.Message{Kind: "later", RunAt: time.Now().Add(time.Hour)})
	second := enqueue(t, c, q, fila.Message{Kind: "now"})
	ds, err := dr.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != delayed {
		t.Fatalf("ReceiveDelayed behind ready messages = %v, %v; want the delayed %s", ids(ds), err, delayed)
	}
	got := drain(t, c, q, 2, 10*time.Second)
	for _, id := range []string{first, second} {
		d := got[id]
		switch {
		case d == nil:
			t.Errorf("ready message %s not received after ReceiveDelayed (got %v)", id, got)
		case d.Attempt != 1:
			t.Errorf("ready message %s received at attempt %d, want 1", id, d.Attempt)
		}
	}
}
