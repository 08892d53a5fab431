package rabbitmq

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// topicFixture is a topic with subscription queues on one driver, all
// deleted when the test ends.
type topicFixture struct {
	d     *Driver
	topic string
	subs  []string
}

func newTopic(t *testing.T, d *Driver, subs int) *topicFixture {
	t.Helper()
	f := &topicFixture{d: d, topic: "rmqtest-topic-" + d.nonce + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, q := range f.subs {
			_ = d.QueueDelete(ctx, q)
		}
		_ = DeleteTopicExchange(ctx, d, f.topic)
	})
	for range subs {
		f.subscribe(t)
	}
	return f
}

// subscribe subscribes a fresh queue and returns it.
func (f *topicFixture) subscribe(t *testing.T) string {
	t.Helper()
	q := f.topic + "-s" + strconv.Itoa(len(f.subs))
	f.subs = append(f.subs, q)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.d.TopicSubscribe(ctx, f.topic, q, ""); err != nil {
		t.Fatalf("TopicSubscribe(%s): %v", q, err)
	}
	return q
}

// uuid returns a random version 7 style id, as the portable layer makes.
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// receiveAll receives from q until it has want deliveries or the deadline.
func receiveAll(t *testing.T, d *Driver, q string, want int, within time.Duration) []backend.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out []backend.Delivery
	for len(out) < want {
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: want - len(out), Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive(%s): %d of %d deliveries, then %v", q, len(out), want, err)
		}
		out = append(out, ds...)
	}
	return out
}

// TestTopicPublishIsOnePublish: a batch published to a topic is one
// basic.publish per message whatever the number of subscriptions (the
// broker's fanout exchange makes the copies), and every subscription's
// main queue holds every message.
func TestTopicPublishIsOnePublish(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 40
	msgs := make([]backend.Message, n)
	for i := range msgs {
		msgs[i] = testMsg(uuid())
	}
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := s.pub.seq.Load()
	got, err := d.TopicPublish(ctx, f.topic, msgs)
	if err != nil {
		t.Fatalf("TopicPublish: %v", err)
	}
	if got != -1 {
		t.Errorf("TopicPublish to 3 subscriptions returned %d, want -1 (routed, count unknown)", got)
	}
	if pubs := s.pub.seq.Load() - before; pubs != n {
		t.Errorf("TopicPublish of %d messages to 3 subscriptions made %d publishes, want %d", n, pubs, n)
	}
	// Confirmed means every quorum queue stored its copy; the counts may
	// trail the confirms by a moment.
	deadline := time.Now().Add(10 * time.Second)
	for _, q := range f.subs {
		n0, _ := d.names(q)
		for {
			c, err := s.count(ctx, n0.main)
			if err != nil {
				t.Fatal(err)
			}
			if c == n {
				break
			}
			if c > n || time.Now().After(deadline) {
				t.Fatalf("subscription %s holds %d messages, want %d", q, c, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Without subscriptions the publish is returned unroutable: 0, no error.
	empty := newTopic(t, d, 0)
	if got, err := d.TopicPublish(ctx, empty.topic, msgs[:3]); got != 0 || err != nil {
		t.Errorf("TopicPublish to a topic without subscriptions = %d, %v; want 0, nil", got, err)
	}
	// The publishing channel survived the returns.
	if got, err := d.TopicPublish(ctx, f.topic, msgs[:1]); got != -1 || err != nil {
		t.Errorf("TopicPublish after an unroutable one = %d, %v; want -1, nil", got, err)
	}
}

// TestTopicCopiesAreOrdinaryMessages: what a caller gets from a topic copy
// (Receive, a Retry's redelivery, a dead letter, a message the broker
// dead-lettered itself) carries the copy's id and exactly the AMQP headers
// published, without the topic marker.
func TestTopicCopiesAreOrdinaryMessages(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := testMsg(uuid())
	m.Kind = "copy"
	m.Body = []byte("body")
	m.Headers = map[string]string{"a": "1", "x-b": "2", "fila-att": "user's own"}
	m.MaxAttempts = 7
	published := encode(&m).Headers
	if _, err := d.TopicPublish(ctx, f.topic, []backend.Message{m}); err != nil {
		t.Fatalf("TopicPublish: %v", err)
	}
	for _, q := range f.subs {
		id := backend.CopyID(m.ID, q)
		dl := receiveAll(t, d, q, 1, 10*time.Second)[0]
		if dl.ID != id || dl.Kind != "copy" || string(dl.Body) != "body" || dl.MaxAttempts != 7 || dl.Attempt != 1 ||
			!reflect.DeepEqual(dl.Headers, m.Headers) || !dl.EnqueuedAt.Equal(m.EnqueuedAt.Truncate(time.Millisecond)) {
			t.Errorf("subscription %s delivered %+v, want the copy %s of %+v", q, dl, id, m)
		}
		p := d.existingPuller(q)
		p.mu.Lock()
		for _, e := range p.cs.entries {
			if !reflect.DeepEqual(e.dv.Headers, published) {
				t.Errorf("subscription %s: the delivery's AMQP headers are %v, want what was published, %v", q, e.dv.Headers, published)
			}
		}
		p.mu.Unlock()

		// A retried copy keeps its id (it is not derived again).
		if err := d.Retry(ctx, backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt}, 0, "again"); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		dl = receiveAll(t, d, q, 1, 10*time.Second)[0]
		if dl.ID != id || dl.Attempt != 2 || dl.LastError != "again" {
			t.Errorf("subscription %s redelivered %s at attempt %d (%q), want %s at attempt 2", q, dl.ID, dl.Attempt, dl.LastError, id)
		}
		if err := d.Dead(ctx, backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt}, "poison", 2); err != nil {
			t.Fatalf("Dead: %v", err)
		}
	}
	// A copy the broker dead-lettered itself (a quorum queue's delivery
	// limit) still carries the marker and the published id.
	q := f.subs[0]
	n, _ := d.names(q)
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw := testMsg(uuid())
	pub := encode(&raw)
	pub.Headers[hTopic] = f.topic
	if err := s.publish(ctx, []pubItem{{exchange: n.dead, msg: pub, queue: q}}); err != nil {
		t.Fatal(err)
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil {
		t.Fatalf("DeadList: %v", err)
	}
	want := map[string]bool{backend.CopyID(m.ID, q): true, backend.CopyID(raw.ID, q): true}
	if len(page.Letters) != len(want) {
		t.Fatalf("DeadList(%s) has %d letters, want %d", q, len(page.Letters), len(want))
	}
	for _, l := range page.Letters {
		if !want[l.ID] {
			t.Errorf("DeadList(%s) has letter %s, want only the copies %v", q, l.ID, want)
		}
	}
}

// TestTopicDelayedNotEarly: a delayed message published to a topic reaches
// each subscription no earlier than its run-at, also through
// ReceiveDelayed while it waits, and a subscription made during the delay
// does not get it.
func TestTopicDelayedNotEarly(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := testMsg(uuid())
	m.RunAt = time.Now().Add(1500 * time.Millisecond)
	runAt := time.UnixMilli(runAtMilli(m.RunAt)) // what the driver keeps: rounded up, never early
	if got, err := d.TopicPublish(ctx, f.topic, []backend.Message{m}); got != -1 || err != nil {
		t.Fatalf("TopicPublish = %d, %v", got, err)
	}
	late := f.subscribe(t)
	got := make(chan error, len(f.subs))
	for _, q := range f.subs[:2] {
		go func() {
			ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
			now := time.Now()
			switch {
			case err != nil:
				got <- fmt.Errorf("Receive(%s): %w", q, err)
			case now.Before(runAt):
				got <- fmt.Errorf("subscription %s got the message %v before its run-at", q, runAt.Sub(now))
			case ds[0].ID != backend.CopyID(m.ID, q) || !ds[0].RunAt.Equal(runAt):
				got <- fmt.Errorf("subscription %s got %s run at %v, want %s run at %v", q, ds[0].ID, ds[0].RunAt, backend.CopyID(m.ID, q), runAt)
			default:
				got <- nil
			}
		}()
	}
	// While the copies wait, ReceiveDelayed of one subscription finds its
	// copy once the consumer above moved it to a delay queue; give it back.
	for q := f.subs[1]; ; {
		ds, err := d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			t.Fatalf("ReceiveDelayed: %v", err)
		}
		if len(ds) == 1 {
			if ds[0].ID != backend.CopyID(m.ID, q) {
				t.Errorf("ReceiveDelayed(%s) = %s, want the copy %s", q, ds[0].ID, backend.CopyID(m.ID, q))
			}
			// Retry keeps the run-at: the Receive above still gets it no
			// earlier.
			if err := d.Retry(ctx, backend.Ref{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}, 0, ""); err != nil {
				t.Fatalf("Retry of a delayed copy: %v", err)
			}
			break
		}
		if time.Now().After(runAt) {
			t.Logf("ReceiveDelayed(%s) never saw the copy before its run-at", q)
			break
		}
	}
	for range f.subs[:2] {
		if err := <-got; err != nil {
			t.Error(err)
		}
	}
	// The late subscription: nothing, even after the run-at.
	lctx, lcancel := context.WithTimeout(ctx, time.Until(runAt)+time.Second)
	defer lcancel()
	if ds, err := d.Receive(lctx, late, backend.ReceiveParams{Max: 1, Lease: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a subscription made during the delay received %v, %v; want nothing", ds, err)
	}
}

// TestTopicSubscriptionCalls: subscribing twice, unsubscribing what does
// not exist (binding, topic, queue), and listing, which AMQP cannot do.
func TestTopicSubscriptionCalls(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q := f.subs[0]
	if err := d.TopicSubscribe(ctx, f.topic, q, ""); err != nil {
		t.Fatalf("second TopicSubscribe: %v", err)
	}
	if _, err := d.TopicSubscriptions(ctx, f.topic); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("TopicSubscriptions: want ErrUnsupported, got %v", err)
	}
	if err := d.TopicUnsubscribe(ctx, f.topic, q); err != nil {
		t.Fatalf("TopicUnsubscribe: %v", err)
	}
	for _, c := range []struct{ topic, queue string }{
		{f.topic, q},                       // the binding is gone
		{f.topic + "-none", q},             // no such exchange
		{f.topic, q + "-none"},             // no such queue
		{f.topic + "-none", q + "-none-2"}, // neither
	} {
		if err := d.TopicUnsubscribe(ctx, c.topic, c.queue); err != nil {
			t.Errorf("TopicUnsubscribe(%s, %s): %v", c.topic, c.queue, err)
		}
	}
	// The unsubscribed queue is left alone (the portable layer deletes it)
	// and gets nothing more; the driver's channels still work.
	if got, err := d.TopicPublish(ctx, f.topic, []backend.Message{testMsg(uuid())}); got != 0 || err != nil {
		t.Errorf("TopicPublish after the only subscription ended = %d, %v; want 0, nil", got, err)
	}
	n, _ := d.names(q)
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(n.main, true, false, false, false, nil)
		return err
	}); err != nil {
		t.Errorf("the unsubscribed queue is gone: %v", err)
	}
	// Subscribing a queue deleted behind the driver's back declares it again.
	if err := d.TopicSubscribe(ctx, f.topic, q, ""); err != nil {
		t.Fatal(err)
	}
	other := openTest(t)
	unregister(other) // another process: d is not told of the delete
	other.scope += "\x00elsewhere"
	register(other)
	if err := other.QueueDelete(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := d.TopicSubscribe(ctx, f.topic, q, ""); err != nil {
		t.Fatalf("TopicSubscribe of a queue deleted behind the driver: %v", err)
	}
	if got, err := d.TopicPublish(ctx, f.topic, []backend.Message{testMsg(uuid())}); got != -1 || err != nil {
		t.Errorf("TopicPublish after subscribing again = %d, %v; want -1, nil", got, err)
	}
}
