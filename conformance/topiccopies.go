package conformance

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// A copy is an ordinary message of its subscription's queue (contract:
// fan-out): what holds for a queue's messages (byte-exact deliveries, stats,
// delays, dedup keys, pause, cancel, dead letters and replay) holds for each
// subscription's copies, one subscription apart from another. A driver that
// stores a topic's message once (PostgreSQL's log mode) must keep all of it
// per subscription.

// wantCopy reports every field of d that differs from m as published, for
// subscription q at attempt.
func wantCopy(t *testing.T, what string, d *fila.Delivery, m fila.Message, id, q string, attempt int, lastError string) {
	t.Helper()
	if d.ID != fila.CopyID(id, q) {
		t.Errorf("%s: id %s, want CopyID(%s, %s) = %s", what, d.ID, id, q, fila.CopyID(id, q))
	}
	if d.Queue != q {
		t.Errorf("%s: queue %q, want %q", what, d.Queue, q)
	}
	if d.Kind != m.Kind {
		t.Errorf("%s: kind %q, want %q", what, d.Kind, m.Kind)
	}
	if !bytes.Equal(d.Body, m.Body) {
		t.Errorf("%s: body differs from the published one (%d bytes, want %d): %x", what, len(d.Body), len(m.Body), head(d.Body))
	}
	if !maps.Equal(d.Headers, m.Headers) {
		t.Errorf("%s: headers %q, want %q", what, d.Headers, m.Headers)
	}
	if d.MaxAttempts != m.MaxAttempts {
		t.Errorf("%s: max attempts %d, want %d", what, d.MaxAttempts, m.MaxAttempts)
	}
	if d.Attempt != attempt {
		t.Errorf("%s: attempt %d, want %d", what, d.Attempt, attempt)
	}
	if d.LastError != lastError {
		t.Errorf("%s: last error %q, want %q", what, d.LastError, lastError)
	}
}

// testTopicCopyBytes: each subscription's copy carries the published kind,
// body, headers and max attempts byte for byte, through a retry, a dead
// letter and its replay in one subscription, which leave the other's copy
// as it was (contract: byte-exact, fan-out).
func (s *suite) testTopicCopyBytes(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	a, b := subs[0], subs[1]
	m := fila.Message{
		Kind: "copy.bytes",
		// Every byte value, NUL and invalid UTF-8 included.
		Body:        append(allBytes(600), 0xff, 0xfe, 0x00, 0xc3),
		Headers:     map[string]string{"tenant": "ação-42", "trace": "00-ab-01", "empty": ""},
		MaxAttempts: 7,
	}
	want := bytes.Clone(m.Body)
	ids := publish(t, c, topic, 2, m)
	m.Body = want // what was published, whatever the driver did to the caller's buffer
	id := ids[0]
	ctx := ctxTimeout(t, 60*time.Second)

	db := receiveOne(t, c, b, time.Minute, 30*time.Second)
	wantCopy(t, "subscription b", db, m, id, b, 1, "")
	da := receiveOne(t, c, a, time.Minute, 30*time.Second)
	wantCopy(t, "subscription a", da, m, id, a, 1, "")
	da.Body[0] ^= 0xff // a handler that changes its buffer changes nothing stored

	if err := da.Retry(ctx, 0, "retried in a"); err != nil {
		t.Fatalf("Retry in a: %v", err)
	}
	da = receiveOne(t, c, a, time.Minute, 30*time.Second)
	wantCopy(t, "subscription a after its retry", da, m, id, a, 2, "retried in a")

	if s.has(FeatureDeadLetters) {
		if err := da.Dead(ctx, "dead in a"); err != nil {
			t.Fatalf("Dead in a: %v", err)
		}
		if l := s.findDead(t, c, a, fila.CopyID(id, a)); l != nil {
			if l.Kind != m.Kind || !bytes.Equal(l.Body, m.Body) || !maps.Equal(l.Headers, m.Headers) || l.Reason != "dead in a" {
				t.Errorf("subscription a's dead letter: kind %q, %d body bytes (equal: %v), headers %q, reason %q; want the published message with reason %q",
					l.Kind, len(l.Body), bytes.Equal(l.Body, m.Body), l.Headers, l.Reason, "dead in a")
			}
		}
		if n, err := c.DeadReplay(ctx, a, fila.DeadFilter{IDs: []string{fila.CopyID(id, a)}}); err != nil || n != 1 {
			t.Fatalf("DeadReplay of a's copy = %d, %v; want 1", n, err)
		}
		da = receiveOne(t, c, a, time.Minute, 30*time.Second)
		// A replay starts the message over: attempts reset, no last error.
		wantCopy(t, "subscription a after its replay", da, m, id, a, 1, "")
		if page, err := c.DeadList(ctx, b, fila.DeadListParams{Limit: 10}); err != nil || len(page.Letters) != 0 {
			t.Errorf("subscription b's dead letters: %d, %v; want none", len(page.Letters), err)
		}
	}
	if err := da.Ack(ctx); err != nil {
		t.Errorf("Ack in a: %v", err)
	}
	// b's copy is still leased, at attempt 1, and acks as usual.
	if err := db.Ack(ctx); err != nil {
		t.Errorf("Ack in b of the copy leased before a's retry and dead letter: %v", err)
	}
	s.expectNone(t, c, b, time.Second, "subscription b after its ack")
	s.expectNone(t, c, a, time.Second, "subscription a after its ack")
}

// testTopicCopyStats: each subscription counts its own copies: reading,
// leasing and acking in one leaves another's counts as they were (contract:
// stats, fan-out).
func (s *suite) testTopicCopyStats(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureStats)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	a, b := subs[0], subs[1]
	msgs := make([]fila.Message, 5)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "copy.stats"}
	}
	publish(t, c, topic, 2, msgs...)
	publish(t, c, topic, 2, fila.Message{Kind: "copy.stats.later", Delay: time.Hour})
	ctx := ctxTimeout(t, 60*time.Second)
	stats := func(q string) fila.Stats {
		t.Helper()
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatalf("QueueStats(%s): %v", q, err)
		}
		return st
	}
	// Without FeatureTopicDelayCounts a delayed copy may count as ready
	// until a receiver of its subscription has seen it.
	exactDelay := s.has(FeatureTopicDelayCounts)
	check := func(when, q string, ready, delayed, leased int64) {
		t.Helper()
		st := stats(q)
		if !exactDelay && st.Ready+st.Delayed == ready+delayed {
			st.Ready, st.Delayed = ready, delayed
		}
		if st.Ready != ready || st.Delayed != delayed || st.Leased != leased {
			t.Errorf("%s: subscription %s has ready %d, delayed %d, leased %d; want %d, %d, %d",
				when, q, st.Ready, st.Delayed, st.Leased, ready, delayed, leased)
		}
	}
	check("after the publishes", a, 5, 1, 0)
	check("after the publishes", b, 5, 1, 0)

	var held []*fila.Delivery
	for len(held) < 2 {
		ds, err := c.Receive(ctx, a, fila.ReceiveParams{Max: 2 - len(held), Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive(%s): %v", a, err)
		}
		held = append(held, ds...)
	}
	check("with two of a's copies leased", a, 3, 1, 2)
	check("with two of a's copies leased", b, 5, 1, 0)
	if err := c.AckBatch(ctx, held); err != nil {
		t.Fatalf("AckBatch: %v", err)
	}
	check("after a acked two", a, 3, 1, 0)
	check("after a acked two", b, 5, 1, 0)
	drain(t, c, b, 5, 30*time.Second)
	check("after b drained its ready copies", a, 3, 1, 0)
	check("after b drained its ready copies", b, 0, 1, 0)
}

// testTopicCopyDelayed: a delayed publish reaches every subscription at its
// run-at, not before (contract: delays, fan-out).
func (s *suite) testTopicCopyDelayed(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	pc := s.newPacer(t)
	// Each subscription receives once before, so that what the client sets
	// up on a queue's first Receive (the queue's pause and cancel marks,
	// its LISTEN connection, topology) is not counted as lateness: on a
	// loaded machine that took longer than the delay, the first claim came
	// after the run-at, and what was measured was the set-up of both
	// receivers, late alike, not a blocked Receive waking at its run-at. It
	// receives a copy of an event of its own, as the wake-up tests do.
	publish(t, c, topic, 2, fila.Message{Kind: "copy.warm-up"})
	for _, q := range subs {
		if w := receiveOne(t, c, q, time.Minute, 30*time.Second); w.Kind != "copy.warm-up" {
			t.Fatalf("subscription %s received kind %q, want the warm-up copy", q, w.Kind)
		} else if err := w.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatalf("Ack of %s's warm-up copy: %v", q, err)
		}
	}
	const delay = 1500 * time.Millisecond
	start := time.Now()
	ids := publish(t, c, topic, 2, fila.Message{Kind: "copy.delayed", Delay: delay})
	stored := time.Now()
	// A delay runs from when the broker stored the publish, somewhere
	// between start and stored: the run-at may be as late as stored+delay
	// (a publish slow to reach a loaded server is late by its own latency,
	// not the delay's). Early is measured from start+delay.
	due := stored.Add(delay)
	paced := pc.startAt(t, due)
	type got struct {
		d   *fila.Delivery
		at  time.Time
		err error
	}
	res := make(chan got, len(subs))
	for _, q := range subs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), delay+s.h.RedeliveryBound+10*time.Second)
			defer cancel()
			ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
			if err == nil && len(ds) != 1 {
				err = errors.New("Receive(Max 1) returned another count")
			}
			var d *fila.Delivery
			if err == nil {
				d = ds[0]
			}
			res <- got{d, time.Now(), err}
		}()
	}
	var rs []got
	for range subs {
		rs = append(rs, <-res)
	}
	took := pc.took(t, paced)
	seen := map[string]bool{}
	for _, r := range rs {
		if r.err != nil {
			t.Errorf("waiting for a delayed copy: %v", r.err)
			continue
		}
		seen[r.d.Queue] = true
		if r.d.ID != fila.CopyID(ids[0], r.d.Queue) {
			t.Errorf("subscription %s received %s, want the copy %s", r.d.Queue, r.d.ID, fila.CopyID(ids[0], r.d.Queue))
		}
		if early := start.Add(delay).Sub(r.at); early > earlyTolerance {
			t.Errorf("subscription %s received its delayed copy %v early", r.d.Queue, early)
		}
		// Late from the run-at, or the publish's return if later.
		s.checkLate(t, "subscription "+r.d.Queue+"'s delayed copy arrived", r.at.Sub(due), took)
		_ = r.d.Ack(ctxTimeout(t, 10*time.Second))
	}
	if len(seen) != len(subs) && !t.Failed() {
		t.Errorf("delayed copies reached %d of %d subscriptions", len(seen), len(subs))
	}
}

// testTopicCopyDedup: a dedup key is held in each subscription on its own: a
// subscription whose pending copy holds the key gets no copy of a later
// publish with it, while one whose holder was acked does (contract:
// dedup, fan-out).
func (s *suite) testTopicCopyDedup(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureDedup)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	a, b := subs[0], subs[1]
	ctx := ctxTimeout(t, 60*time.Second)
	first := publish(t, c, topic, 2, fila.Message{Kind: "copy.dedup", Body: []byte("first"), DedupKey: "order-7"})[0]
	// Held in both: the second publish stores no copy, and is no error.
	if _, err := c.Publish(ctx, topic, fila.Message{Kind: "copy.dedup", Body: []byte("second"), DedupKey: "order-7"}); err != nil {
		t.Fatalf("Publish of a key held in every subscription: %v", err)
	}
	da := receiveOne(t, c, a, time.Minute, 30*time.Second)
	if da.ID != fila.CopyID(first, a) || string(da.Body) != "first" || da.DedupKey != "order-7" {
		t.Fatalf("subscription a received %s %q (key %q), want the first copy %s with key order-7", da.ID, da.Body, da.DedupKey, fila.CopyID(first, a))
	}
	if err := da.Ack(ctx); err != nil {
		t.Fatalf("Ack in a: %v", err)
	}
	s.expectNone(t, c, a, time.Second, "subscription a after acking the holder (the second publish stored nothing)")
	// Freed in a, still held in b by its pending first copy.
	third := publish(t, c, topic, -1, fila.Message{Kind: "copy.dedup", Body: []byte("third"), DedupKey: "order-7"})[0]
	da = receiveOne(t, c, a, time.Minute, s.afterNone())
	if da.ID != fila.CopyID(third, a) || string(da.Body) != "third" {
		t.Errorf("subscription a received %s %q, want the third copy %s", da.ID, da.Body, fila.CopyID(third, a))
	}
	_ = da.Ack(ctx)
	got := drain(t, c, b, 1, 30*time.Second)
	if d := got[fila.CopyID(first, b)]; d == nil || string(d.Body) != "first" {
		t.Errorf("subscription b received %v, want only the first copy %s", slices.Sorted(maps.Keys(got)), fila.CopyID(first, b))
	}
	s.expectNone(t, c, b, time.Second, "subscription b, whose pending first copy held the key through both later publishes")
}

// testTopicCopyControl: pausing one subscription and cancelling a copy in
// another act on that subscription alone (contract: job-control, fan-out).
func (s *suite) testTopicCopyControl(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureMarks)
	admin := s.client(t)
	c := s.client(t, fila.WithControlInterval(controlInterval))
	topic := s.topic(t)
	subs := s.subscribe(t, admin, topic, 2)
	a, b := subs[0], subs[1]
	ctx := ctxTimeout(t, 60*time.Second)
	if err := admin.QueuePause(ctx, a); err != nil {
		t.Fatalf("QueuePause(%s): %v", a, err)
	}
	ids := publish(t, admin, topic, 2, fila.Message{Kind: "copy.keep"}, fila.Message{Kind: "copy.cancel"})
	keep, cancelled := ids[0], ids[1]
	canCancel := s.has(FeatureMarkList) && s.has(FeatureDeadLetters)
	if canCancel {
		if err := admin.MessageCancel(ctx, b, fila.CopyID(cancelled, b)); err != nil {
			t.Fatalf("MessageCancel of b's copy: %v", err)
		}
	}
	// b: not paused; gets its copies, the cancelled one excepted.
	wantB := map[string]bool{fila.CopyID(keep, b): true}
	if !canCancel {
		wantB[fila.CopyID(cancelled, b)] = true
	}
	got := drain(t, c, b, len(wantB), 30*time.Second)
	for id := range got {
		if !wantB[id] {
			t.Errorf("subscription b received %s, want only %v", id, slices.Sorted(maps.Keys(wantB)))
		}
	}
	s.expectNone(t, c, b, time.Second, "subscription b after its copies (one cancelled)")
	if canCancel {
		if r := deadReasons(t, admin, b)[fila.CopyID(cancelled, b)]; r != fila.ReasonCancelled {
			t.Errorf("b's cancelled copy: dead-letter reason %q, want %q", r, fila.ReasonCancelled)
		}
		if r, ok := deadReasons(t, admin, a)[fila.CopyID(cancelled, a)]; ok {
			t.Errorf("a's copy of the message cancelled in b is dead-lettered (%q); want it untouched", r)
		}
	}
	// a: paused; gets nothing until resumed, then both copies.
	s.expectNone(t, c, a, time.Second, "paused subscription a")
	if err := admin.QueueResume(ctx, a); err != nil {
		t.Fatalf("QueueResume(%s): %v", a, err)
	}
	got = drain(t, c, a, 2, 2*controlInterval+s.afterNone()+30*time.Second)
	for _, id := range ids {
		if got[fila.CopyID(id, a)] == nil {
			t.Errorf("subscription a after its resume lacks the copy of %s", id)
		}
	}
}

// testTopicCopyQueueDelete: deleting a subscription's queue deletes its
// copies and nothing else: the subscription stays, so a later publish
// reaches it, and the topic's other subscriptions keep theirs (contract:
// queue deletion, fan-out).
func (s *suite) testTopicCopyQueueDelete(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureQueueDelete)
	s.need(t, FeatureTopicQueueDelete)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	a, b := subs[0], subs[1]
	ctx := ctxTimeout(t, 60*time.Second)
	first := publish(t, c, topic, 2, fila.Message{Kind: "copy.before-delete"})
	if err := c.QueueDelete(ctx, a, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete(%s): %v", a, err)
	}
	if s.has(FeatureTopicList) {
		got, err := c.TopicSubscriptions(ctx, topic)
		if err != nil || !slices.ContainsFunc(got, func(s fila.Subscription) bool { return s.Queue == a }) {
			t.Errorf("TopicSubscriptions after deleting %s's queue = %v, %v; want it still listed", a, got, err)
		}
	}
	second := publish(t, c, topic, -1, fila.Message{Kind: "copy.after-delete"})
	got := drain(t, c, a, 1, 30*time.Second)
	if got[fila.CopyID(second[0], a)] == nil {
		t.Errorf("subscription %s after its queue was deleted received %v, want the copy of the later publish", a, slices.Sorted(maps.Keys(got)))
	}
	s.expectNone(t, c, a, time.Second, "a subscription whose queue was deleted, after the later publish's copy")
	got = drain(t, c, b, 2, 30*time.Second)
	for _, id := range []string{first[0], second[0]} {
		if got[fila.CopyID(id, b)] == nil {
			t.Errorf("the other subscription lacks the copy of %s", id)
		}
	}
}
