package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// utf8Of returns a valid UTF-8 string of exactly n bytes mixing one-, two-
// and four-byte characters (and, with nul, a NUL), so a driver that counts
// characters, truncates or re-encodes shows up.
func utf8Of(n int, nul bool) string {
	var b strings.Builder
	pieces := []string{"a", "é", "😀", "z"}
	if nul {
		pieces = append(pieces, "\x00")
	}
	for i := 0; b.Len() < n; i++ {
		p := pieces[i%len(pieces)]
		if b.Len()+len(p) > n {
			p = "a"
		}
		b.WriteString(p)
	}
	return b.String()
}

// allBytes returns n bytes cycling through every byte value.
func allBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

// testLimits: every documented limit, at the limit and one past it. A
// message at every limit is stored and delivered byte for byte on every
// driver (the limits are what every broker can carry); one past it is
// refused with a typed error and stores nothing. Every case is checked and
// every failure reported (contract: portable-limits).
func (s *suite) testLimits(t *testing.T) {
	c := s.client(t, fila.WithMaxBodyBytes(fila.MaxBodyBytes))
	def := s.client(t) // the default body limit
	q := s.queue(t)
	ctx := ctxTimeout(t, 3*time.Minute)

	type limitCase struct {
		what   string
		c      *fila.Client
		at     fila.Message // valid: stored and delivered as it is
		past   fila.Message // one past the limit
		target error
	}
	hdrVal := utf8Of(fila.MaxHeaderBytes-1, true)
	cases := []limitCase{
		{"kind of MaxKindLen bytes", c,
			fila.Message{Kind: utf8Of(fila.MaxKindLen, false)},
			fila.Message{Kind: utf8Of(fila.MaxKindLen+1, false)}, fila.ErrInvalid},
		{"header key of MaxHeaderKeyLen bytes", c,
			fila.Message{Kind: "k", Headers: map[string]string{utf8Of(fila.MaxHeaderKeyLen, false): "v"}},
			fila.Message{Kind: "k", Headers: map[string]string{utf8Of(fila.MaxHeaderKeyLen+1, false): "v"}}, fila.ErrInvalid},
		{"headers of MaxHeaderBytes bytes (with a NUL in a value)", c,
			fila.Message{Kind: "k", Headers: map[string]string{"k": hdrVal}},
			fila.Message{Kind: "k", Headers: map[string]string{"k": hdrVal + "x"}}, fila.ErrTooLarge},
		{"body of DefaultMaxBodyBytes bytes", def,
			fila.Message{Kind: "k", Body: allBytes(fila.DefaultMaxBodyBytes)},
			fila.Message{Kind: "k", Body: allBytes(fila.DefaultMaxBodyBytes + 1)}, fila.ErrTooLarge},
		{"max attempts of MaxAttemptsLimit", c,
			fila.Message{Kind: "k", MaxAttempts: fila.MaxAttemptsLimit},
			fila.Message{Kind: "k", MaxAttempts: fila.MaxAttemptsLimit + 1}, fila.ErrInvalid},
	}
	if s.has(FeatureBulkLimits) {
		cases = append(cases, limitCase{"body of MaxBodyBytes bytes (the largest WithMaxBodyBytes allows)", c,
			fila.Message{Kind: "k", Body: allBytes(fila.MaxBodyBytes)},
			fila.Message{Kind: "k", Body: allBytes(fila.MaxBodyBytes + 1)}, fila.ErrTooLarge})
	} else if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Body: allBytes(fila.MaxBodyBytes + 1)}); !errors.Is(err, fila.ErrTooLarge) {
		t.Errorf("one past the limit, a body of MaxBodyBytes+1 bytes: want ErrTooLarge, got %v", err)
	}
	if s.has(FeatureDedup) {
		cases = append(cases, limitCase{"dedup key of MaxDedupKeyLen bytes", c,
			fila.Message{Kind: "k", DedupKey: utf8Of(fila.MaxDedupKeyLen, false)},
			fila.Message{Kind: "k", DedupKey: utf8Of(fila.MaxDedupKeyLen+1, false)}, fila.ErrInvalid})
	}
	want := map[string]fila.Message{}
	for _, tc := range cases {
		if _, err := tc.c.Enqueue(ctx, q, tc.past); !errors.Is(err, tc.target) {
			t.Errorf("one past the limit, %s: want %v, got %v", tc.what, tc.target, err)
		}
		id, err := tc.c.Enqueue(ctx, q, tc.at)
		if err != nil {
			t.Errorf("at the limit, %s: Enqueue: %v", tc.what, err)
			continue
		}
		want[id] = tc.at
	}
	// Everything at the limit comes back as it went in, and nothing else.
	got := 0
	for got < len(want) {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: len(want), Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive of the messages at the limits: %d of %d: %v", got, len(want), err)
		}
		for _, d := range ds {
			m, ok := want[d.ID]
			if !ok {
				t.Errorf("received %s, which is not a message at a limit (something past a limit was stored?)", d.ID)
				continue
			}
			got++
			if d.Kind != m.Kind || !bytes.Equal(d.Body, m.Body) || !maps.Equal(d.Headers, m.Headers) ||
				d.DedupKey != m.DedupKey || (m.MaxAttempts != 0 && d.MaxAttempts != m.MaxAttempts) {
				t.Errorf("message %s was not delivered as enqueued: kind %d bytes (want %d), body %d bytes equal=%v, headers equal=%v, dedup key %d bytes (want %d), max attempts %d (want %d)",
					d.ID, len(d.Kind), len(m.Kind), len(d.Body), bytes.Equal(d.Body, m.Body), maps.Equal(d.Headers, m.Headers),
					len(d.DedupKey), len(m.DedupKey), d.MaxAttempts, m.MaxAttempts)
			}
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Errorf("AckBatch: %v", err)
		}
	}

	s.limitsOfBatches(t, ctx, c)
	s.limitsOfTime(t, ctx, c)
	s.limitsOfReasons(t, ctx, c)
}

// limitsOfBatches: MaxBatch messages and MaxBatchBytes of bodies in one
// batch are stored; one more message or byte is refused whole.
func (s *suite) limitsOfBatches(t *testing.T, ctx context.Context, c *fila.Client) {
	q := s.queue(t)
	msgs := make([]fila.Message, fila.MaxBatch+1)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k"}
	}
	if _, err := c.EnqueueBatch(ctx, q, msgs); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("EnqueueBatch of MaxBatch+1 messages: want ErrInvalid, got %v", err)
	}
	if s.has(FeatureBulkLimits) {
		ids, err := c.EnqueueBatch(ctx, q, msgs[:fila.MaxBatch])
		if err != nil || len(ids) != fila.MaxBatch {
			t.Errorf("EnqueueBatch of MaxBatch messages: %d ids, %v", len(ids), err)
		}
		if s.has(FeatureStats) {
			if st, err := c.QueueStats(ctx, q); err != nil || st.Ready != int64(len(ids)) {
				t.Errorf("stats after a batch of MaxBatch messages: ready %d, %v; want %d", st.Ready, err, len(ids))
			}
		}
		if err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil && !errors.Is(err, fila.ErrUnsupported) {
			t.Errorf("QueueDelete: %v", err)
		}
	}

	// Bodies of MaxBatchBytes in all: full-size bodies and the rest.
	q = s.queue(t)
	var big []fila.Message
	left := fila.MaxBatchBytes
	for left > 0 {
		n := min(left, fila.MaxBodyBytes)
		big = append(big, fila.Message{Kind: "big", Body: allBytes(n)})
		left -= n
	}
	over := append([]fila.Message{{Kind: "big", Body: []byte{1}}}, big...)
	if _, err := c.EnqueueBatch(ctx, q, over); !errors.Is(err, fila.ErrTooLarge) {
		t.Errorf("EnqueueBatch of MaxBatchBytes+1 bytes: want ErrTooLarge, got %v", err)
	}
	if !s.has(FeatureBulkLimits) {
		return
	}
	bigIDs, err := c.EnqueueBatch(ctx, q, big)
	if err != nil {
		t.Errorf("EnqueueBatch of MaxBatchBytes bytes: %v", err)
		return
	}
	wantBig := map[string][]byte{}
	for i, id := range bigIDs {
		wantBig[id] = big[i].Body
	}
	for len(wantBig) > 0 {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: len(wantBig), Lease: time.Minute})
		if err != nil {
			t.Fatalf("receiving the batch of MaxBatchBytes: %d left: %v", len(wantBig), err)
		}
		for _, d := range ds {
			if b, ok := wantBig[d.ID]; !ok || !bytes.Equal(d.Body, b) {
				t.Errorf("big message %s: %d bytes, not as enqueued", d.ID, len(d.Body))
			}
			delete(wantBig, d.ID)
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Errorf("AckBatch: %v", err)
		}
	}
}

// limitsOfTime: delays, run-ats, leases and receive sizes at their limits
// and one past.
func (s *suite) limitsOfTime(t *testing.T, ctx context.Context, c *fila.Client) {
	q := s.queue(t)
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Delay: fila.MaxDelay + time.Millisecond}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Delay of MaxDelay+1ms: want ErrInvalid, got %v", err)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", RunAt: time.Now().Add(fila.MaxDelay + time.Hour)}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("RunAt MaxDelay+1h ahead: want ErrInvalid, got %v", err)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Delay: fila.MaxDelay}); err != nil {
		t.Errorf("Delay of MaxDelay: %v", err)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", RunAt: time.Now().Add(fila.MaxDelay - time.Minute)}); err != nil {
		t.Errorf("RunAt MaxDelay ahead: %v", err)
	}
	if s.has(FeatureStats) {
		if st, err := c.QueueStats(ctx, q); err != nil || st.Delayed != 2 || st.Ready != 0 {
			t.Errorf("stats after two messages at MaxDelay: %+v, %v; want 2 delayed", st, err)
		}
	}
	s.expectNone(t, c, q, 500*time.Millisecond, "messages delayed by MaxDelay")
	if err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil && !errors.Is(err, fila.ErrUnsupported) {
		t.Errorf("QueueDelete: %v", err)
	}

	q = s.queue(t)
	for _, p := range []fila.ReceiveParams{
		{Lease: fila.MinLease - time.Microsecond}, {Lease: fila.MaxLease + time.Millisecond}, {Max: fila.MaxReceive + 1},
	} {
		_, err := c.Receive(ctx, q, p)
		wantErr(t, fmt.Sprintf("Receive with %+v", p), err, fila.ErrInvalid)
	}
	id := enqueue(t, c, q, fila.Message{Kind: "k"})
	d := receiveOne(t, c, q, fila.MaxLease, 10*time.Second) // the longest lease
	if d.ID != id {
		t.Fatalf("received %s, want %s", d.ID, id)
	}
	wantErr(t, "Extend by MaxLease+1ms", d.Extend(ctx, fila.MaxLease+time.Millisecond), fila.ErrInvalid)
	wantErr(t, "Extend by MinLease-1µs", d.Extend(ctx, fila.MinLease-time.Microsecond), fila.ErrInvalid)
	if err := d.Extend(ctx, fila.MaxLease); err != nil {
		t.Errorf("Extend by MaxLease: %v", err)
	}
	if err := d.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	// The shortest lease: the message is handed out and comes back.
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: fila.MaxReceive, Lease: fila.MinLease})
	if err != nil || len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("Receive with MinLease and MaxReceive = %d deliveries, %v; want %s", len(ds), err, id)
	}
	d = receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if d.ID != id || d.Attempt != 3 {
		t.Errorf("after a MinLease lease: %s attempt %d, want %s attempt 3", d.ID, d.Attempt, id)
	}
	_ = d.Ack(ctx)
}

// limitsOfReasons: a reason of MaxReasonBytes is kept whole; a longer one
// is cut to MaxReasonBytes of valid UTF-8, not refused.
func (s *suite) limitsOfReasons(t *testing.T, ctx context.Context, c *fila.Client) {
	q := s.queue(t)
	at := utf8Of(fila.MaxReasonBytes, false)
	past := at + "éé"
	enqueue(t, c, q, fila.Message{Kind: "k"})
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if err := d.Retry(ctx, 0, past); err != nil {
		t.Fatalf("Retry with a reason past MaxReasonBytes: %v", err)
	}
	d = receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if d.LastError != at {
		t.Errorf("last error after a reason past the limit: %d bytes, want the first %d", len(d.LastError), len(at))
	}
	if err := d.Retry(ctx, 0, at); err != nil {
		t.Fatalf("Retry with a reason of MaxReasonBytes: %v", err)
	}
	d = receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if d.LastError != at {
		t.Errorf("last error at the limit: %d bytes, want %d as given", len(d.LastError), len(at))
	}
	if err := d.Dead(ctx, past); err != nil {
		t.Fatalf("Dead with a reason past MaxReasonBytes: %v", err)
	}
	if !s.has(FeatureDeadLetters) {
		return
	}
	if l := s.findDead(t, c, q, d.ID); l != nil && l.Reason != at {
		t.Errorf("dead letter reason: %d bytes, want the first %d of the reason given", len(l.Reason), len(at))
	}
}
