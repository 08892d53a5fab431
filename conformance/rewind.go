package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// testTopicRewind: TopicRewind delivers a subscription's copies of the
// messages published from a point in time again, at attempt 1, and
// nothing of those before it; it ends the subscription's leases of them;
// another subscription is untouched; a queue that is not subscribed is
// ErrInvalid (contract: fan-out, rewind). The topic's second subscription
// has read nothing, so the broker keeps every message whatever its
// retention.
func (s *suite) testTopicRewind(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureTopicRewind)
	drv, c := s.rawClient(t)
	_, rewinder := drv.(backend.TopicRewinder)
	if sw, ok := drv.(backend.TopicsSwitch); ok && !sw.TopicsNative() {
		rewinder = false
	}
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	a, b := subs[0], subs[1]
	ctx := ctxTimeout(t, 90*time.Second)
	if !rewinder {
		wantErr(t, "TopicRewind on a driver without backend.TopicRewinder", c.TopicRewind(ctx, topic, a, time.Now()), fila.ErrUnsupported)
		t.Skip("the driver does not rewind subscriptions (no backend.TopicRewinder, or topics kept by the portable layer)")
	}
	before := publish(t, c, topic, 2, fila.Message{Kind: "before"}, fila.Message{Kind: "before"})
	point := time.Now()
	since := publish(t, c, topic, 2, fila.Message{Kind: "since"}, fila.Message{Kind: "since"}, fila.Message{Kind: "since"})
	drain(t, c, a, len(before)+len(since), 30*time.Second)
	// a holds a lease of a later message across its rewind.
	later := publish(t, c, topic, 2, fila.Message{Kind: "later"})
	held := receiveOne(t, c, a, time.Minute, 30*time.Second)
	if held.ID != fila.CopyID(later[0], a) {
		t.Fatalf("%s received %s, want the copy of the later message %s", a, held.ID, fila.CopyID(later[0], a))
	}
	if err := c.TopicRewind(ctx, topic, a, point); err != nil {
		t.Fatalf("TopicRewind(%s): %v", a, err)
	}
	if err := held.Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("Ack of a delivery leased before the rewind: %v, want ErrLeaseLost", err)
	}
	want := append(append([]string(nil), since...), later...)
	got := drain(t, c, a, len(want), 30*time.Second)
	for _, id := range want {
		if d := got[fila.CopyID(id, a)]; d == nil || d.Attempt != 1 {
			t.Errorf("after the rewind %s got the copy of %s as %v, want it at attempt 1", a, id, d)
		}
	}
	for _, id := range before {
		if got[fila.CopyID(id, a)] != nil {
			t.Errorf("after the rewind %s got the copy of %s, published before the point", a, id)
		}
	}
	s.expectNone(t, c, a, time.Second, "the rewound subscription after its messages since the point")
	// b, untouched: everything once.
	all := append(append([]string(nil), before...), want...)
	got = drain(t, c, b, len(all), 30*time.Second)
	for _, id := range all {
		if d := got[fila.CopyID(id, b)]; d == nil || d.Attempt != 1 {
			t.Errorf("the other subscription got the copy of %s as %v, want it once at attempt 1", id, d)
		}
	}
	s.expectNone(t, c, b, time.Second, "the other subscription after its copies")
	wantErr(t, "TopicRewind of a queue that is not subscribed", c.TopicRewind(ctx, topic, s.queue(t), point), fila.ErrInvalid)
}
