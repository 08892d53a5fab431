package conformance

import (
	"bytes"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testRetry: Retry(delay, reason) brings the message back no earlier than
// delay, with attempt+1 and the reason as its last error (contract: retry).
func (s *suite) testRetry(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "retry", Body: []byte("payload")})
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	pc := s.newPacer(t)
	const delay = 1500 * time.Millisecond
	at := time.Now()
	if err := d.Retry(ctxTimeout(t, 10*time.Second), delay, "boom: upstream 503"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	paced := pc.startAt(t, at.Add(delay))
	d2 := receiveOne(t, c, q, time.Minute, delay+s.h.RedeliveryBound+time.Second)
	got := time.Now()
	took := pc.took(t, paced)
	if d2.ID != id {
		t.Fatalf("received %s, want %s", d2.ID, id)
	}
	if early := at.Add(delay).Sub(got); early > earlyTolerance {
		t.Errorf("retried message came back %v early", early)
	}
	s.checkLate(t, "the retried message came back", got.Sub(at.Add(delay)), took)
	if d2.Attempt != 2 {
		t.Errorf("attempt after Retry is %d, want 2", d2.Attempt)
	}
	if d2.LastError != "boom: upstream 503" {
		t.Errorf("last error %q, want the retry reason", d2.LastError)
	}
	if !bytes.Equal(d2.Body, []byte("payload")) || d2.Kind != "retry" {
		t.Errorf("retried message changed: kind %q body %q", d2.Kind, d2.Body)
	}
	if err := d2.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack: %v", err)
	}
}

// testRelease: Release gives a message back at once, keeps the last error
// and counts the delivery (contract: retry).
func (s *suite) testRelease(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	enqueue(t, c, q, fila.Message{Kind: "release"})
	ctx := ctxTimeout(t, 30*time.Second)
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if err := d.Retry(ctx, 0, "first failure"); err != nil {
		t.Fatalf("Retry(0): %v", err)
	}
	d = receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if err := d.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	start := time.Now()
	d = receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if wait := time.Since(start); wait > s.h.RedeliveryBound {
		t.Errorf("released message took %v to come back", wait)
	}
	if d.Attempt != 3 {
		t.Errorf("attempt after Retry and Release is %d, want 3", d.Attempt)
	}
	if d.LastError != "first failure" {
		t.Errorf("last error after Release is %q, want it kept (%q)", d.LastError, "first failure")
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}

// testDead: Dead moves the message to the dead letters with its reason; it
// is never delivered again (contract: dead-letters).
func (s *suite) testDead(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	body := []byte{0, 1, 2, 0xff}
	id := enqueue(t, c, q, fila.Message{Kind: "poison", Body: body, Headers: map[string]string{"h": "v"}})
	d := receiveOne(t, c, q, s.h.Lease, 10*time.Second)
	before := time.Now()
	if err := d.Dead(ctxTimeout(t, 10*time.Second), "invalid customer id"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	s.expectNone(t, c, q, s.h.Lease+s.h.RedeliveryBound, "after Dead")
	if !s.has(FeatureDeadLetters) {
		return
	}
	l := s.findDead(t, c, q, id)
	if l == nil {
		return
	}
	if l.Reason != "invalid customer id" {
		t.Errorf("dead letter reason %q", l.Reason)
	}
	if l.Attempts != 1 {
		t.Errorf("dead letter attempts %d, want 1", l.Attempts)
	}
	if l.Kind != "poison" || !bytes.Equal(l.Body, body) || l.Headers["h"] != "v" {
		t.Errorf("dead letter changed the message: kind %q body %v headers %v", l.Kind, l.Body, l.Headers)
	}
	if l.DeadAt.Before(before.Add(-time.Second)) || l.DeadAt.After(time.Now().Add(time.Second)) {
		t.Errorf("dead letter time %v, want about %v", l.DeadAt, before)
	}
}

// findDead returns the dead letter with id, failing the test when missing.
func (s *suite) findDead(t *testing.T, c *fila.Client, q, id string) *fila.DeadLetter {
	t.Helper()
	page, err := c.DeadList(ctxTimeout(t, 10*time.Second), q, fila.DeadListParams{Limit: 100})
	if err != nil {
		t.Fatalf("DeadList: %v", err)
	}
	for i := range page.Letters {
		if page.Letters[i].ID == id {
			return &page.Letters[i]
		}
	}
	t.Errorf("message %s is not in the dead letters (%d listed)", id, len(page.Letters))
	return nil
}

// testMaxAttemptsCrash: a poison message whose consumer crashes (closes
// without settling) every time is dead-lettered once its attempts exceed
// max attempts, and does not block other messages (contract: max-attempts).
func (s *suite) testMaxAttemptsCrash(t *testing.T) {
	q := s.queue(t)
	prod := s.client(t)
	poison := enqueue(t, prod, q, fila.Message{Kind: "crasher", MaxAttempts: 2})
	for attempt := 1; attempt <= 2; attempt++ {
		crashy := s.client(t)
		d := receiveOne(t, crashy, q, s.h.Lease, s.h.Lease+s.h.RedeliveryBound+time.Second)
		if d.ID != poison || d.Attempt != attempt {
			t.Fatalf("crash %d: received %s attempt %d, want %s attempt %d", attempt, d.ID, d.Attempt, poison, attempt)
		}
		if err := crashy.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	healthy := enqueue(t, prod, q, fila.Message{Kind: "healthy"})
	c := s.client(t)
	d := receiveOne(t, c, q, time.Minute, s.h.Lease+s.h.RedeliveryBound+time.Second)
	if d.ID != healthy {
		t.Fatalf("received %s attempt %d, want the healthy message %s (the poison one must be dead-lettered)", d.ID, d.Attempt, healthy)
	}
	if err := d.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack: %v", err)
	}
	s.expectNone(t, c, q, s.h.Lease+s.h.RedeliveryBound, "the exhausted message must not be delivered")
	if !s.has(FeatureDeadLetters) {
		return
	}
	if l := s.findDead(t, c, q, poison); l != nil {
		if l.Reason != fila.ReasonMaxAttempts {
			t.Errorf("dead letter reason %q, want %q", l.Reason, fila.ReasonMaxAttempts)
		}
		if l.Attempts != 2 {
			t.Errorf("dead letter attempts %d, want 2 (the deliveries it had; max attempts 2)", l.Attempts)
		}
	}
}

// testMaxAttemptsRetry: retries count against max attempts too (contract: max-attempts).
func (s *suite) testMaxAttemptsRetry(t *testing.T) {
	c := s.client(t, fila.WithMaxAttempts(2))
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "flaky"})
	ctx := ctxTimeout(t, 30*time.Second)
	for attempt := 1; attempt <= 2; attempt++ {
		d := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
		if d.Attempt != attempt || d.MaxAttempts != 2 {
			t.Fatalf("attempt %d/%d, want %d/2", d.Attempt, d.MaxAttempts, attempt)
		}
		if err := d.Retry(ctx, 0, "still failing"); err != nil {
			t.Fatalf("Retry: %v", err)
		}
	}
	s.expectNone(t, c, q, s.h.RedeliveryBound+time.Second, "a message past its max attempts")
	if s.has(FeatureDeadLetters) {
		if l := s.findDead(t, c, q, id); l != nil && (l.Reason != fila.ReasonMaxAttempts || l.Attempts != 2) {
			t.Errorf("dead letter reason %q attempts %d, want %q after 2 deliveries", l.Reason, l.Attempts, fila.ReasonMaxAttempts)
		}
	}
}

// testDelay: a message with a future run-at is not receivable before it and
// is soon after (contract: delay).
func (s *suite) testDelay(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	pc := s.newPacer(t)
	const delay = 1500 * time.Millisecond
	start := time.Now()
	paced := pc.startAt(t, start.Add(delay))
	byDelay := enqueue(t, c, q, fila.Message{Kind: "delay", Delay: delay})
	// stored records when each delayed enqueue returned: a message that
	// took longer than its delay to store (a loaded server, a first
	// declaration on a cluster) is due from then, and being late by the
	// enqueue's own latency is not the delay's lateness (see testWakeUp).
	stored := map[string]time.Time{byDelay: time.Now()}
	byRunAt := enqueue(t, c, q, fila.Message{Kind: "run-at", RunAt: start.Add(delay)})
	stored[byRunAt] = time.Now()
	if took := stored[byRunAt].Sub(start); took > delay/2 {
		t.Logf("the two delayed enqueues took %v", took)
	}
	past := enqueue(t, c, q, fila.Message{Kind: "past", RunAt: start.Add(-time.Hour)})
	got := map[string]time.Time{}
	d := receiveOne(t, c, q, time.Minute, 5*time.Second)
	got[d.ID] = time.Now()
	if d.ID != past && got[d.ID].Before(start.Add(delay-earlyTolerance)) {
		// (On a slow machine the enqueues can outlast the delay; then any
		// order is right.)
		t.Fatalf("first receive got %s (%s) before its run-at, want the message whose run-at has passed", d.ID, d.Kind)
	}
	ctx := ctxTimeout(t, delay+s.h.RedeliveryBound+5*time.Second)
	for len(got) < 3 {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 2, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive of delayed messages: %v", err)
		}
		for _, d := range ds {
			got[d.ID] = time.Now()
		}
	}
	took := pc.took(t, paced)
	if _, ok := got[past]; !ok {
		t.Errorf("the message whose run-at has passed was not received")
	}
	for id, name := range map[string]string{byDelay: "Delay", byRunAt: "RunAt"} {
		at, ok := got[id]
		if !ok {
			t.Errorf("%s message not received", name)
			continue
		}
		if early := start.Add(delay).Sub(at); early > earlyTolerance {
			t.Errorf("%s message received %v early", name, early)
		}
		// Late from the latest the run-at can be: a Delay runs from when
		// the broker stored the message, as late as the enqueue's return;
		// a RunAt is fixed, but receivable only once stored.
		due := stored[id].Add(delay)
		if id == byRunAt {
			due = start.Add(delay)
			if stored[id].After(due) {
				due = stored[id]
			}
		}
		s.checkLate(t, name+" message received", at.Sub(due), took)
	}
}

// testShortDelayNotHeld checks that a short delay is not held up by a longer
// one enqueued before it (per-message TTLs on one broker queue expire only
// at its head, which would make the short one wait for the long one).
func (s *suite) testShortDelayNotHeld(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	const short = time.Second
	long := enqueue(t, c, q, fila.Message{Kind: "long", Delay: time.Hour})
	start := time.Now()
	id := enqueue(t, c, q, fila.Message{Kind: "short", Delay: short})
	d := receiveOne(t, c, q, time.Minute, short+s.h.RedeliveryBound)
	at := time.Now()
	if d.ID != id {
		t.Fatalf("received %s (%s), want the short delay's %s (long: %s)", d.ID, d.Kind, id, long)
	}
	if early := start.Add(short).Sub(at); early > earlyTolerance {
		t.Errorf("the short delay's message was received %v early", early)
	}
	if err := d.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}
