package conformance

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// testFeatures checks that every feature the harness does not declare
// missing is backed by the driver's capability interfaces.
func (s *suite) testFeatures(t *testing.T) {
	drv, err := s.h.Open(ctxTimeout(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Harness.Open: %v", err)
	}
	defer drv.Close()
	if s.has(FeatureDedup) {
		d, ok := drv.(backend.Deduper)
		if !ok || !d.DedupKeys() {
			t.Errorf("feature %q is not declared missing, but the driver does not implement backend.Deduper reporting true", FeatureDedup)
		}
	}
	if _, ok := drv.(backend.DeadLetterer); s.has(FeatureDeadLetters) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.DeadLetterer", FeatureDeadLetters)
	}
	if _, ok := drv.(backend.StatsReader); s.has(FeatureStats) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.StatsReader", FeatureStats)
	}
	if _, ok := drv.(backend.DelayedReceiver); s.has(FeatureReceiveDelayed) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.DelayedReceiver", FeatureReceiveDelayed)
	}
	if _, ok := drv.(backend.DeadImporter); s.has(FeatureDeadImport) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.DeadImporter", FeatureDeadImport)
	}
	if _, ok := drv.(backend.QueueLister); s.has(FeatureQueueList) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.QueueLister", FeatureQueueList)
	}
	if _, ok := drv.(backend.QueueDeleter); s.has(FeatureQueueDelete) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.QueueDeleter", FeatureQueueDelete)
	}
	if _, ok := drv.(backend.Marker); s.has(FeatureMarks) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.Marker", FeatureMarks)
	}
	if _, ok := drv.(backend.MessageLister); s.has(FeatureMessageList) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.MessageLister", FeatureMessageList)
	}
	if _, ok := drv.(backend.MarkLister); s.has(FeatureMarkList) && !ok {
		t.Errorf("feature %q is not declared missing, but the driver does not implement backend.MarkLister", FeatureMarkList)
	}
	if s.has(FeatureTopics) {
		_, native := drv.(backend.Topics)
		_, marks := drv.(backend.Marker)
		_, list := drv.(backend.MarkLister)
		if !native && !(marks && list) {
			t.Errorf("feature %q is not declared missing, but the driver implements neither backend.Topics nor backend.Marker with backend.MarkLister", FeatureTopics)
		}
	}
	if _, native := drv.(backend.Topics); s.has(FeatureTopicList) && !native && !s.has(FeatureMarkList) {
		t.Errorf("feature %q is not declared missing, but the driver has neither backend.Topics nor mark listing", FeatureTopicList)
	}
	if s.has(FeatureTxEnqueue) {
		if _, ok := drv.(backend.TxEnqueuer); !ok {
			t.Errorf("feature %q is not declared missing, but the driver does not implement backend.TxEnqueuer", FeatureTxEnqueue)
		}
		if s.h.BeginTx == nil {
			t.Errorf("feature %q is not declared missing, but Harness.BeginTx is nil", FeatureTxEnqueue)
		}
	}
	for f := range s.h.Missing {
		known := false
		for _, k := range AllFeatures {
			known = known || k == f
		}
		if !known {
			t.Errorf("Harness.Missing names unknown feature %q", f)
		}
	}
}

// testRoundTrip checks that kind, body bytes and headers survive exactly,
// and that a delivery carries what the contract says (contract:
// byte-exact, durable-enqueue).
func (s *suite) testRoundTrip(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	msgs := []fila.Message{
		{Kind: "nil.body"},
		{Kind: "empty.body", Body: []byte{}},
		{Kind: "binary", Body: binary},
		{Kind: "not-utf8", Body: []byte{0xff, 0xfe, 0x00, 0xc3, 0x28}},
		{Kind: "text", Body: []byte(`{"user_id":42,"name":"Zoë 😀"}`), Headers: map[string]string{
			"content-type": "application/json", "trace": "00-abc-01", "empty": "", "ünïcode": "välüe",
		}},
		{Kind: "kind with spaces/and.dots-ü", Body: bytes.Repeat([]byte("x"), 64<<10)},
	}
	before := time.Now()
	ids := map[string]fila.Message{}
	for _, m := range msgs {
		ids[enqueue(t, c, q, m)] = m
	}
	if len(ids) != len(msgs) {
		t.Fatalf("got %d distinct ids for %d messages", len(ids), len(msgs))
	}
	after := time.Now()
	got := drain(t, c, q, len(msgs), 10*time.Second)
	for id, want := range ids {
		d := got[id]
		if d == nil {
			t.Errorf("message %s (%s) was not delivered", id, want.Kind)
			continue
		}
		if d.Kind != want.Kind {
			t.Errorf("message %s: kind %q, want %q", id, d.Kind, want.Kind)
		}
		if !bytes.Equal(d.Body, want.Body) || d.Body == nil {
			t.Errorf("message %s (%s): body differs: got %d bytes %q…, want %d bytes", id, want.Kind, len(d.Body), head(d.Body), len(want.Body))
		}
		if len(want.Headers) == 0 && len(d.Headers) != 0 {
			t.Errorf("message %s (%s): headers %v, want none", id, want.Kind, d.Headers)
		}
		if len(want.Headers) > 0 && !reflect.DeepEqual(d.Headers, want.Headers) {
			t.Errorf("message %s (%s): headers %v, want %v", id, want.Kind, d.Headers, want.Headers)
		}
		if d.Attempt != 1 {
			t.Errorf("message %s: attempt %d on first delivery, want 1", id, d.Attempt)
		}
		if d.Queue != q {
			t.Errorf("message %s: queue %q, want %q", id, d.Queue, q)
		}
		if d.Receipt() == "" {
			t.Errorf("message %s: empty receipt", id)
		}
		if d.MaxAttempts != fila.DefaultMaxAttempts {
			t.Errorf("message %s: max attempts %d, want the client default %d", id, d.MaxAttempts, fila.DefaultMaxAttempts)
		}
		if d.EnqueuedAt.Before(before.Add(-time.Second)) || d.EnqueuedAt.After(after.Add(time.Second)) {
			t.Errorf("message %s: enqueued at %v, want between %v and %v", id, d.EnqueuedAt, before, after)
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

// testIsolation: queues do not see each other's messages (contract: isolation).
func (s *suite) testIsolation(t *testing.T) {
	c := s.client(t)
	qa, qb := s.queue(t), s.queue(t)
	id := enqueue(t, c, qa, fila.Message{Kind: "isolated"})
	s.expectNone(t, c, qb, time.Second, "receive from another queue")
	d := receiveOne(t, c, qa, time.Minute, 10*time.Second)
	if d.ID != id {
		t.Errorf("received %s from %s, want %s", d.ID, qa, id)
	}
	if err := d.Ack(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Ack: %v", err)
	}
}

// testBatches: enqueue of many, receive of up to N, ack of many (contract: batches).
func (s *suite) testBatches(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	const n = 250
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "batch", Body: []byte(strings.Repeat("b", i))}
	}
	ids, err := c.EnqueueBatch(ctxTimeout(t, 30*time.Second), q, msgs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if len(ids) != n {
		t.Fatalf("EnqueueBatch returned %d ids for %d messages", len(ids), n)
	}
	want := map[string]int{}
	for i, id := range ids {
		if _, dup := want[id]; dup {
			t.Fatalf("EnqueueBatch returned id %s twice", id)
		}
		want[id] = i
	}
	ctx := ctxTimeout(t, 30*time.Second)
	got := map[string]bool{}
	biggest := 0
	for len(got) < n {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 40, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive: have %d of %d: %v", len(got), n, err)
		}
		if len(ds) > 40 {
			t.Fatalf("Receive(Max 40) returned %d deliveries", len(ds))
		}
		biggest = max(biggest, len(ds))
		for _, d := range ds {
			i, ok := want[d.ID]
			if !ok {
				t.Fatalf("received unknown message %s", d.ID)
			}
			if got[d.ID] {
				t.Errorf("message %s delivered twice", d.ID)
			}
			got[d.ID] = true
			if len(d.Body) != i {
				t.Errorf("message %d: body of %d bytes, want %d", i, len(d.Body), i)
			}
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatalf("AckBatch of %d: %v", len(ds), err)
		}
	}
	if biggest < 2 {
		t.Errorf("Receive(Max 40) never returned more than %d deliveries with %d messages ready", biggest, n)
	}
	s.expectNone(t, c, q, 1500*time.Millisecond, "after acking the whole batch")
}

// testBadBatch: a batch with one invalid message stores nothing (contract: batches, bad-input).
func (s *suite) testBadBatch(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 10*time.Second)
	_, err := c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "ok"}, {Kind: ""}, {Kind: "ok"}})
	wantErr(t, "batch with an empty kind", err, fila.ErrInvalid)
	_, err = c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "ok"}, {Kind: "big", Body: make([]byte, fila.DefaultMaxBodyBytes+1)}})
	wantErr(t, "batch with an oversized body", err, fila.ErrTooLarge)
	_, err = c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "ok"}, {Kind: "late", Delay: -time.Second}})
	wantErr(t, "batch with a negative delay", err, fila.ErrInvalid)
	s.expectEmpty(t, c, q)
}

// expectEmpty checks that queue holds nothing, by stats where the driver
// has them and by receiving.
func (s *suite) expectEmpty(t *testing.T, c *fila.Client, q string) {
	t.Helper()
	if s.has(FeatureStats) {
		st, err := c.QueueStats(ctxTimeout(t, 10*time.Second), q)
		if err != nil {
			t.Errorf("QueueStats: %v", err)
		} else if st.Ready+st.Delayed+st.Leased+st.Dead != 0 {
			t.Errorf("queue should be empty, stats say %+v", st)
		}
	}
	s.expectNone(t, c, q, time.Second, "queue should be empty")
}

// testBadInput: invalid arguments return typed errors and store nothing
// (contract: bad-input). Every case is checked; all failures are reported.
func (s *suite) testBadInput(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	for _, name := range []string{"", " ", "a b", "ü", "-x", ".x", "a/b", "a{b}", "a:b", "a\nb", strings.Repeat("q", fila.MaxQueueNameLen+1)} {
		_, err := c.Enqueue(ctx, name, fila.Message{Kind: "k"})
		wantErr(t, "Enqueue to queue "+quote(name), err, fila.ErrInvalid)
		_, err = c.Receive(ctx, name, fila.ReceiveParams{})
		wantErr(t, "Receive from queue "+quote(name), err, fila.ErrInvalid)
	}
	if _, err := c.Enqueue(ctx, strings.Repeat("q", fila.MaxQueueNameLen), fila.Message{Kind: "k"}); err != nil {
		t.Errorf("Enqueue to a queue name of the maximum length: %v", err)
	} else {
		d := receiveOne(t, c, strings.Repeat("q", fila.MaxQueueNameLen), time.Minute, 10*time.Second)
		_ = d.Ack(ctx)
	}
	cases := []struct {
		what   string
		m      fila.Message
		target error
	}{
		{"empty kind", fila.Message{}, fila.ErrInvalid},
		{"kind with a newline", fila.Message{Kind: "a\nb"}, fila.ErrInvalid},
		{"kind not UTF-8", fila.Message{Kind: "\xff"}, fila.ErrInvalid},
		{"kind too long", fila.Message{Kind: strings.Repeat("k", fila.MaxKindLen+1)}, fila.ErrInvalid},
		{"oversized body", fila.Message{Kind: "k", Body: make([]byte, fila.DefaultMaxBodyBytes+1)}, fila.ErrTooLarge},
		{"empty header key", fila.Message{Kind: "k", Headers: map[string]string{"": "v"}}, fila.ErrInvalid},
		{"header key with NUL", fila.Message{Kind: "k", Headers: map[string]string{"a\x00": "v"}}, fila.ErrInvalid},
		{"header value not UTF-8", fila.Message{Kind: "k", Headers: map[string]string{"k": "\xff\xfe"}}, fila.ErrInvalid},
		{"headers too large", fila.Message{Kind: "k", Headers: map[string]string{"k": strings.Repeat("v", fila.MaxHeaderBytes)}}, fila.ErrTooLarge},
		{"negative delay", fila.Message{Kind: "k", Delay: -time.Millisecond}, fila.ErrInvalid},
		{"run-at and delay", fila.Message{Kind: "k", Delay: time.Second, RunAt: time.Now().Add(time.Hour)}, fila.ErrInvalid},
		{"negative max attempts", fila.Message{Kind: "k", MaxAttempts: -1}, fila.ErrInvalid},
		{"dedup key too long", fila.Message{Kind: "k", DedupKey: strings.Repeat("d", fila.MaxDedupKeyLen+1)}, fila.ErrInvalid},
	}
	for _, tc := range cases {
		_, err := c.Enqueue(ctx, q, tc.m)
		wantErr(t, "Enqueue with "+tc.what, err, tc.target)
	}
	_, err := c.EnqueueBatch(ctx, q, nil)
	wantErr(t, "EnqueueBatch of nothing", err, fila.ErrInvalid)
	for _, p := range []fila.ReceiveParams{{Max: -1}, {Max: fila.MaxReceive + 1}, {Lease: -time.Second}, {Lease: time.Nanosecond}} {
		_, err := c.Receive(ctx, q, p)
		wantErr(t, "Receive with "+quote(p), err, fila.ErrInvalid)
	}
	s.expectEmpty(t, c, q)

	// Settlement arguments, on a real delivery.
	enqueue(t, c, q, fila.Message{Kind: "k"})
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	wantErr(t, "Extend(0)", d.Extend(ctx, 0), fila.ErrInvalid)
	wantErr(t, "Extend(-1s)", d.Extend(ctx, -time.Second), fila.ErrInvalid)
	wantErr(t, "Retry with a negative delay", d.Retry(ctx, -time.Second, "x"), fila.ErrInvalid)
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack after refused settlements: %v (a refused call must not settle the delivery)", err)
	}
}

func quote(v any) string {
	if s, ok := v.(string); ok {
		if len(s) > 24 {
			s = s[:24] + "…"
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%+v", v)
}
