package conformance

import (
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testVisibility: a leased message is not received by another consumer (contract: visibility).
func (s *suite) testVisibility(t *testing.T) {
	a, b := s.client(t), s.client(t)
	q := s.queue(t)
	id := enqueue(t, a, q, fila.Message{Kind: "visible"})
	d := receiveOne(t, a, q, 30*time.Second, 10*time.Second)
	if d.ID != id {
		t.Fatalf("received %s, want %s", d.ID, id)
	}
	s.expectNone(t, b, q, s.h.Lease+s.h.RedeliveryBound, "another consumer while the lease is current")
	if err := d.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack: %v", err)
	}
}

// testLeaseExpiry: an unsettled lease expires and the message comes back
// with attempt+1, not before the deadline and soon after it (contract: lease-expiry).
func (s *suite) testLeaseExpiry(t *testing.T) {
	a, b := s.client(t), s.client(t)
	q := s.queue(t)
	pc := s.newPacer(t)
	id := enqueue(t, a, q, fila.Message{Kind: "expire"})
	d1 := receiveOne(t, a, q, s.h.Lease, 10*time.Second)
	deadline := d1.Deadline()
	if until := time.Until(deadline); until <= 0 || until > s.h.Lease+time.Second {
		t.Errorf("lease deadline is %v away, want about %v", until, s.h.Lease)
	}
	paced := pc.startAt(t, deadline)
	d2 := receiveOne(t, b, q, time.Minute, s.h.Lease+s.h.RedeliveryBound+time.Second)
	at := time.Now()
	took := pc.took(t, paced)
	if d2.ID != id {
		t.Fatalf("redelivered %s, want %s", d2.ID, id)
	}
	if at.Before(deadline.Add(-earlyTolerance)) {
		t.Errorf("redelivered %v before the lease deadline", deadline.Sub(at))
	}
	s.checkLate(t, "redelivered after the lease deadline,", at.Sub(deadline), took)
	if d2.Attempt != 2 {
		t.Errorf("redelivery attempt %d, want 2", d2.Attempt)
	}
	if err := d2.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack by the new holder: %v", err)
	}
}

// testShortLeaseDoesNotSteal: a consumer with a short lease that crashes is
// taken over; a message leased for longer by someone else is not (contract: lease-expiry).
func (s *suite) testShortLeaseDoesNotSteal(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	q := s.queue(t)
	long := enqueue(t, a, q, fila.Message{Kind: "long"})
	dl := receiveOne(t, a, q, time.Minute, 10*time.Second)
	if dl.ID != long {
		t.Fatalf("first receive got %s, want %s", dl.ID, long)
	}
	short := enqueue(t, a, q, fila.Message{Kind: "short"})
	ds := receiveOne(t, b, q, s.h.Lease, 10*time.Second)
	if ds.ID != short {
		t.Fatalf("second receive got %s, want %s", ds.ID, short)
	}
	// b "crashes": it never settles. c must get the short one back, only.
	d := receiveOne(t, c, q, time.Minute, s.h.Lease+s.h.RedeliveryBound+time.Second)
	if d.ID != short {
		t.Fatalf("takeover got %s (%s), want the short-leased %s", d.ID, d.Kind, short)
	}
	if d.Attempt != 2 {
		t.Errorf("takeover attempt %d, want 2", d.Attempt)
	}
	s.expectNone(t, c, q, s.h.Lease+s.h.RedeliveryBound, "the long-leased message must stay with its holder")
	ctx := ctxTimeout(t, 10*time.Second)
	if err := dl.Ack(ctx); err != nil {
		t.Errorf("Ack of the long lease: %v", err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack of the taken-over message: %v", err)
	}
}

// testExtend: Extend moves the deadline so the message stays invisible past
// its original lease (contract: extend).
func (s *suite) testExtend(t *testing.T) {
	a, b := s.client(t), s.client(t)
	q := s.queue(t)
	enqueue(t, a, q, fila.Message{Kind: "extend"})
	d := receiveOne(t, a, q, s.h.Lease, 10*time.Second)
	old := d.Deadline()
	ext := s.h.Lease + 2*s.h.RedeliveryBound + 2*time.Second
	ctx := ctxTimeout(t, ext+20*time.Second)
	if err := d.Extend(ctx, ext); err != nil {
		t.Fatalf("Extend(%v): %v", ext, err)
	}
	if nd := d.Deadline(); !nd.After(old.Add(ext / 2)) {
		t.Errorf("deadline after Extend(%v) is %v, was %v", ext, nd, old)
	}
	s.expectNone(t, b, q, s.h.Lease+s.h.RedeliveryBound, "after Extend, past the original deadline")
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack within the extended lease: %v", err)
	}
}

// testStaleReceipts: once a lease expired and someone else holds the
// message, every settlement with the old receipt is ErrLeaseLost and the new
// holder is unaffected (contract: fencing).
func (s *suite) testStaleReceipts(t *testing.T) {
	a, b := s.client(t), s.client(t)
	q := s.queue(t)
	const n = 4
	for i := 0; i < n; i++ {
		enqueue(t, a, q, fila.Message{Kind: "stale"})
	}
	old := map[string]*fila.Delivery{}
	ctx := ctxTimeout(t, 30*time.Second)
	for len(old) < n {
		ds, err := a.Receive(ctx, q, fila.ReceiveParams{Max: n, Lease: s.h.Lease})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		for _, d := range ds {
			old[d.ID] = d
		}
	}
	fresh := map[string]*fila.Delivery{}
	for len(fresh) < n {
		ds, err := b.Receive(ctx, q, fila.ReceiveParams{Max: n, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive after expiry: have %d of %d: %v", len(fresh), n, err)
		}
		for _, d := range ds {
			if d.Attempt != 2 {
				t.Errorf("redelivery of %s has attempt %d, want 2", d.ID, d.Attempt)
			}
			fresh[d.ID] = d
		}
	}
	i := 0
	var deadID string
	for id, d := range old {
		switch i {
		case 0:
			wantErr(t, "stale Ack", d.Ack(ctx), fila.ErrLeaseLost)
		case 1:
			wantErr(t, "stale Retry", d.Retry(ctx, 0, "stale"), fila.ErrLeaseLost)
		case 2:
			deadID = id
			wantErr(t, "stale Dead", d.Dead(ctx, "stale"), fila.ErrLeaseLost)
		case 3:
			wantErr(t, "stale Extend", d.Extend(ctx, time.Hour), fila.ErrLeaseLost)
		}
		i++
	}
	for id, d := range fresh {
		if err := d.Extend(ctx, time.Minute); err != nil {
			t.Errorf("new holder's Extend of %s: %v", id, err)
		}
		if d.LastError == "stale" {
			t.Errorf("message %s carries the stale holder's retry reason", id)
		}
	}
	if err := b.AckBatch(ctx, mapValues(fresh)); err != nil {
		t.Errorf("new holder's AckBatch: %v", err)
	}
	if s.has(FeatureDeadLetters) {
		page, err := a.DeadList(ctx, q, fila.DeadListParams{})
		if err != nil {
			t.Errorf("DeadList: %v", err)
		}
		for _, l := range page.Letters {
			if l.ID == deadID {
				t.Errorf("a stale Dead moved %s to the dead letters", deadID)
			}
		}
	}
	s.expectNone(t, b, q, s.h.Lease+s.h.RedeliveryBound, "after the new holder acked everything")
}

func mapValues(m map[string]*fila.Delivery) []*fila.Delivery {
	out := make([]*fila.Delivery, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	return out
}

// testDoubleSettle: a second settlement of the same delivery is
// ErrLeaseLost (contract: fencing).
func (s *suite) testDoubleSettle(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 20*time.Second)
	enqueue(t, c, q, fila.Message{Kind: "twice"})
	enqueue(t, c, q, fila.Message{Kind: "twice"})
	d1 := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if err := d1.Ack(ctx); err != nil {
		t.Fatalf("first Ack: %v", err)
	}
	wantErr(t, "second Ack", d1.Ack(ctx), fila.ErrLeaseLost)
	wantErr(t, "Retry after Ack", d1.Retry(ctx, 0, "x"), fila.ErrLeaseLost)
	wantErr(t, "Extend after Ack", d1.Extend(ctx, time.Minute), fila.ErrLeaseLost)
	d2 := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if err := d2.Dead(ctx, "first"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	wantErr(t, "Ack after Dead", d2.Ack(ctx), fila.ErrLeaseLost)
	wantErr(t, "AckBatch after Dead", c.AckBatch(ctx, []*fila.Delivery{d2}), fila.ErrLeaseLost)
}

// testAckIsFinal: an acked message is never delivered again (contract: ack-is-final).
func (s *suite) testAckIsFinal(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	enqueue(t, c, q, fila.Message{Kind: "final"})
	d := receiveOne(t, c, q, s.h.Lease, 10*time.Second)
	if err := d.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	s.expectNone(t, c, q, s.h.Lease+s.h.RedeliveryBound, "after Ack, past the old lease deadline")
}
