package filawatermill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filawatermill"
)

// onBrokers runs f on every broker, in parallel, each with a client of its
// own (opened with opts) and a recorder that ends the subscriptions made
// through it when the test ends.
func onBrokers(t *testing.T, f func(t *testing.T, e *env), opts ...fila.Option) {
	t.Helper()
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rawURL := b.url(t)
			c := openClient(t, rawURL, opts...)
			f(t, &env{c: c, broker: b.name, subs: trackSubscriptions(t, c, rawURL)})
		})
	}
}

// env is what a test gets on one broker.
type env struct {
	c      *fila.Client
	broker string
	subs   *subscriptions
}

// topic returns a topic name of the test's own.
func (e *env) topic(prefix string) string { return "fw-" + prefix + "-" + randomHex(6) }

func (e *env) publisher(t *testing.T, cfg filawatermill.PublisherConfig) *filawatermill.Publisher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = wmLogger()
	}
	p, err := filawatermill.NewPublisher(e.c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// subscriber returns a subscriber whose subscriptions are ended when the
// test ends; it is closed then too.
func (e *env) subscriber(t *testing.T, cfg filawatermill.SubscriberConfig) *filawatermill.Subscriber {
	t.Helper()
	if cfg.QueueName == nil && !cfg.ReceiveFromQueue {
		cfg.QueueName = e.subs.queueName
	}
	if cfg.Logger == nil {
		cfg.Logger = wmLogger()
	}
	s, err := filawatermill.NewSubscriber(e.c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *env) subscribe(t *testing.T, s *filawatermill.Subscriber, ctx context.Context, topic string) <-chan *message.Message {
	t.Helper()
	ch, err := s.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	return ch
}

// waitTimeout bounds every wait for a message: far above what a healthy
// broker needs, so that it only ends tests that are broken.
const waitTimeout = 30 * time.Second

// next returns the next message of ch, failing the test after waitTimeout.
func next(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("output channel closed")
		}
		return m
	case <-time.After(waitTimeout):
		t.Fatal("no message within", waitTimeout)
		return nil
	}
}

// waitFor polls cond every 20 ms until it is true, failing the test after
// waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// What is published comes back byte for byte: payload (every byte value,
// empty), metadata (UTF-8, empty values) and UUID; the metadata holds
// nothing else, and the kind is the topic.
func TestRoundTripExact(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("exact")
		sub := e.subscriber(t, filawatermill.SubscriberConfig{})
		if err := sub.SubscribeInitialize(topic); err != nil {
			t.Fatal(err)
		}
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		sent := []*message.Message{
			message.NewMessage(watermill.NewUUID(), all),
			message.NewMessage(watermill.NewUUID(), []byte{}),
			message.NewMessage("not-a-uuid: any string ✓", []byte(`{"order_id":7}`)),
		}
		sent[0].Metadata.Set("trace", "00-abc-01")
		sent[0].Metadata.Set("ünïcode key", "välue ✓")
		sent[0].Metadata.Set("empty", "")
		sent[2].Metadata.Set("a", "b")
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, sent...); err != nil {
			t.Fatal(err)
		}
		ch := e.subscribe(t, sub, context.Background(), topic)
		got := map[string]*message.Message{}
		for len(got) < len(sent) {
			m := next(t, ch)
			if d := filawatermill.DeliveryOf(m); d == nil || d.Kind != topic {
				t.Errorf("delivery of %s: %+v; want kind %q", m.UUID, d, topic)
			}
			got[m.UUID] = m
			m.Ack()
		}
		for _, s := range sent {
			g := got[s.UUID]
			if g == nil {
				t.Errorf("message %q not received", s.UUID)
				continue
			}
			if !bytes.Equal(g.Payload, s.Payload) || g.Payload == nil {
				t.Errorf("payload of %s: %q; want %q", s.UUID, g.Payload, s.Payload)
			}
			if fmt.Sprint(g.Metadata) != fmt.Sprint(s.Metadata) || len(g.Metadata) != len(s.Metadata) {
				t.Errorf("metadata of %s: %v; want %v", s.UUID, g.Metadata, s.Metadata)
			}
		}
	})
}

// A nacked message comes back no earlier than NackDelay, with its attempt
// one higher and the nack as its last error.
func TestNackRedelivers(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("nack")
		const delay = 300 * time.Millisecond
		sub := e.subscriber(t, filawatermill.SubscriberConfig{NackDelay: delay})
		ch := e.subscribe(t, sub, context.Background(), topic)
		sent := message.NewMessage(watermill.NewUUID(), []byte("x"))
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, sent); err != nil {
			t.Fatal(err)
		}
		m := next(t, ch)
		if d := filawatermill.DeliveryOf(m); d.Attempt != 1 || m.UUID != sent.UUID {
			t.Fatalf("first delivery: %s attempt %d; want %s attempt 1", m.UUID, d.Attempt, sent.UUID)
		}
		nacked := time.Now()
		m.Nack()
		select {
		case <-m.Context().Done():
		case <-time.After(waitTimeout):
			t.Fatal("message context not cancelled after Nack")
		}
		m = next(t, ch)
		if took := time.Since(nacked); took < delay {
			t.Errorf("redelivered %v after the nack; NackDelay is %v", took, delay)
		}
		d := filawatermill.DeliveryOf(m)
		if m.UUID != sent.UUID || d.Attempt != 2 || d.LastError != filawatermill.NackReason {
			t.Errorf("redelivery: %s attempt %d last error %q; want %s attempt 2 %q", m.UUID, d.Attempt, d.LastError, sent.UUID, filawatermill.NackReason)
		}
		m.Ack()
	})
}

// Nacks count attempts: a message nacked max-attempts times goes to the
// subscription queue's dead letters, with its body and UUID, and is not
// delivered again.
func TestNackExhaustedGoesToDeadLetters(t *testing.T) {
	const maxAttempts = 3
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("dead")
		sub := e.subscriber(t, filawatermill.SubscriberConfig{NackDelay: filawatermill.NoNackDelay})
		ch := e.subscribe(t, sub, context.Background(), topic)
		sent := message.NewMessage(watermill.NewUUID(), []byte("poison"))
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, sent); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= maxAttempts; i++ {
			m := next(t, ch)
			if d := filawatermill.DeliveryOf(m); d.Attempt != i || d.MaxAttempts != maxAttempts {
				t.Fatalf("delivery %d: attempt %d of %d", i, d.Attempt, d.MaxAttempts)
			}
			m.Nack()
		}
		queue := filawatermill.DefaultQueueName(topic, filawatermill.DefaultConsumerGroup)
		var dead []fila.DeadLetter
		waitFor(t, "the dead letter", func() bool {
			page, err := e.c.DeadList(context.Background(), queue, fila.DeadListParams{})
			if err != nil {
				t.Fatalf("DeadList: %v", err)
			}
			dead = page.Letters
			return len(dead) > 0
		})
		l := dead[0]
		if len(dead) != 1 || string(l.Body) != "poison" || l.Headers[filawatermill.UUIDHeader] != sent.UUID ||
			l.Attempts != maxAttempts || l.Reason != fila.ReasonMaxAttempts {
			t.Errorf("dead letters: %+v; want the message, %d attempts, reason %q", dead, maxAttempts, fila.ReasonMaxAttempts)
		}
		select {
		case m := <-ch:
			t.Errorf("dead-lettered message delivered again: %s", m.UUID)
		default:
		}
	}, fila.WithMaxAttempts(maxAttempts))
}

// A handler slower than several leases keeps its message: the subscriber
// extends the lease, so a competing subscriber of the group does not get
// it, and it is delivered once.
func TestLeaseKeptWhileHandlerRuns(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("lease")
		// Long enough for the slowest broker here to answer an extend
		// within it (FerretDB under load stalls for a second or more);
		// the heartbeat then extends at a third of it.
		const lease = 2 * time.Second
		cfg := filawatermill.SubscriberConfig{Lease: lease}
		slow := e.subscriber(t, cfg)
		slowCh := e.subscribe(t, slow, context.Background(), topic)
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
			t.Fatal(err)
		}
		m := next(t, slowCh)
		other := e.subscribe(t, e.subscriber(t, cfg), context.Background(), topic)
		// Hold the message for four leases (the time is the point of the
		// test: nothing to wait for but the deadline passing), then ack.
		select {
		case dup := <-other:
			t.Fatalf("message given to a competing subscriber while held: attempt %d", filawatermill.DeliveryOf(dup).Attempt)
		case <-time.After(4 * lease):
		}
		if err := m.Context().Err(); err != nil {
			t.Fatalf("message context ended while held: %v (cause %v)", err, context.Cause(m.Context()))
		}
		m.Ack()
		// An ack of a lease that had been lost would log and leave the
		// message to come back; check it is gone: another message published
		// after it is the next one either subscriber gets.
		marker := message.NewMessage(watermill.NewUUID(), []byte("marker"))
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, marker); err != nil {
			t.Fatal(err)
		}
		var got *message.Message
		select {
		case got = <-slowCh:
		case got = <-other:
		case <-time.After(waitTimeout):
			t.Fatal("marker not delivered")
		}
		if got.UUID != marker.UUID {
			t.Errorf("after the ack got %s (attempt %d); want the marker", got.UUID, filawatermill.DeliveryOf(got).Attempt)
		}
		got.Ack()
	})
}

// Each consumer group gets every message; the subscribers of one group
// share theirs.
func TestConsumerGroupsIndependent(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("groups")
		a1 := e.subscribe(t, e.subscriber(t, filawatermill.SubscriberConfig{ConsumerGroup: "a"}), context.Background(), topic)
		a2 := e.subscribe(t, e.subscriber(t, filawatermill.SubscriberConfig{ConsumerGroup: "a"}), context.Background(), topic)
		b := e.subscribe(t, e.subscriber(t, filawatermill.SubscriberConfig{ConsumerGroup: "b"}), context.Background(), topic)
		const n = 20
		want := map[string]bool{}
		var msgs []*message.Message
		for i := 0; i < n; i++ {
			m := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))
			want[m.UUID] = true
			msgs = append(msgs, m)
		}
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, msgs...); err != nil {
			t.Fatal(err)
		}
		gotA, gotB := map[string]int{}, map[string]bool{}
		perSub := map[int]int{}
		deadline := time.After(waitTimeout)
		for len(gotA) < n || len(gotB) < n {
			select {
			case m := <-a1:
				gotA[m.UUID]++
				perSub[1]++
				m.Ack()
			case m := <-a2:
				gotA[m.UUID]++
				perSub[2]++
				m.Ack()
			case m := <-b:
				gotB[m.UUID] = true
				m.Ack()
			case <-deadline:
				t.Fatalf("group a got %d of %d, group b %d", len(gotA), n, len(gotB))
			}
		}
		for id := range want {
			if gotA[id] == 0 || !gotB[id] {
				t.Errorf("message %s: group a %d times, group b %v", id, gotA[id], gotB[id])
			}
		}
		t.Logf("group a: subscriber 1 took %d, subscriber 2 took %d", perSub[1], perSub[2])
	})
}

// When the subscription's context ends with a message handed out but not
// acked, the message is released at once: the next subscriber gets it well
// before its lease would have ended, with its attempt one higher.
func TestContextEndReleases(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("release")
		cfg := filawatermill.SubscriberConfig{Lease: time.Hour}
		sub := e.subscriber(t, cfg)
		if err := sub.SubscribeInitialize(topic); err != nil {
			t.Fatal(err)
		}
		sent := message.NewMessage(watermill.NewUUID(), []byte("x"))
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, sent); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ch := e.subscribe(t, sub, ctx, topic)
		m := next(t, ch)
		cancel()
		select {
		case _, open := <-ch:
			if open {
				t.Fatal("a second message on a cancelled subscription")
			}
		case <-time.After(waitTimeout):
			t.Fatal("output channel not closed after the context ended")
		}
		if m.Context().Err() == nil {
			t.Error("message context not cancelled with the subscription")
		}
		m.Ack() // too late: changes nothing
		m2 := next(t, e.subscribe(t, e.subscriber(t, cfg), context.Background(), topic))
		if d := filawatermill.DeliveryOf(m2); m2.UUID != sent.UUID || d.Attempt != 2 {
			t.Errorf("after release: %s attempt %d; want %s attempt 2", m2.UUID, d.Attempt, sent.UUID)
		}
		m2.Ack()
	})
}

// With Prefetch, messages still come one at a time, and those still held
// when the subscriber closes are released at once.
func TestPrefetchReleasesOnClose(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		topic := e.topic("prefetch")
		cfg := filawatermill.SubscriberConfig{Prefetch: 5, Lease: time.Hour}
		sub := e.subscriber(t, cfg)
		if err := sub.SubscribeInitialize(topic); err != nil {
			t.Fatal(err)
		}
		var msgs []*message.Message
		for i := 0; i < 5; i++ {
			msgs = append(msgs, message.NewMessage(watermill.NewUUID(), []byte("x")))
		}
		if err := e.publisher(t, filawatermill.PublisherConfig{}).Publish(topic, msgs...); err != nil {
			t.Fatal(err)
		}
		ch := e.subscribe(t, sub, context.Background(), topic)
		first := next(t, ch)
		select {
		case m := <-ch:
			t.Fatalf("second message %s handed out before the first was acked", m.UUID)
		default:
		}
		first.Ack()
		second := next(t, ch)
		second.Ack()
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		if _, open := <-ch; open {
			t.Fatal("output channel open after Close")
		}
		got := map[string]bool{first.UUID: true, second.UUID: true}
		ch2 := e.subscribe(t, e.subscriber(t, cfg), context.Background(), topic)
		for len(got) < len(msgs) {
			m := next(t, ch2)
			got[m.UUID] = true
			m.Ack()
		}
	})
}

// PublisherConfig.EnqueueToQueue and SubscriberConfig.ReceiveFromQueue work
// on a plain Fila queue, which plain Fila producers feed too: a message
// without the UUID header gets its Fila id as UUID.
func TestPlainQueue(t *testing.T) {
	onBrokers(t, func(t *testing.T, e *env) {
		queue := e.topic("queue")
		t.Cleanup(func() {
			_ = e.c.QueueDelete(context.Background(), queue, fila.QueueDeleteParams{Force: true})
		})
		pub := e.publisher(t, filawatermill.PublisherConfig{
			EnqueueToQueue: true,
			Kind:           func(string, *message.Message) string { return "order.created" },
		})
		sent := message.NewMessage(watermill.NewUUID(), []byte("from watermill"))
		if err := pub.Publish(queue, sent); err != nil {
			t.Fatal(err)
		}
		id, err := e.c.Enqueue(context.Background(), queue, fila.Message{Kind: "plain", Body: []byte("from fila"), Headers: map[string]string{"h": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		ch := e.subscribe(t, e.subscriber(t, filawatermill.SubscriberConfig{ReceiveFromQueue: true}), context.Background(), queue)
		got := map[string]*message.Message{}
		for len(got) < 2 {
			m := next(t, ch)
			got[m.UUID] = m
			m.Ack()
		}
		if m := got[sent.UUID]; m == nil || string(m.Payload) != "from watermill" || filawatermill.DeliveryOf(m).Kind != "order.created" {
			t.Errorf("watermill message: %+v", m)
		}
		if m := got[id]; m == nil || string(m.Payload) != "from fila" || m.Metadata.Get("h") != "v" || len(m.Metadata) != 1 {
			t.Errorf("fila message %s: %+v", id, m)
		}
	})
}

// Bad input is refused with Fila's typed errors, never swallowed. The
// limits are checked by the client, the same way for every driver, so the
// in-memory broker suffices.
func TestBadInputTypedErrors(t *testing.T) {
	c := openClient(t, "mem://"+randomHex(4), fila.WithMaxBodyBytes(1024))
	pub, err := filawatermill.NewPublisher(c, filawatermill.PublisherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize("good"); err != nil {
		t.Fatal(err)
	}
	emptyKey := message.NewMessage("u1", []byte("x"))
	emptyKey.Metadata.Set("", "v")
	badUTF8 := message.NewMessage("u2", []byte("x"))
	badUTF8.Metadata.Set("k", "\xff")
	for _, tc := range []struct {
		name  string
		topic string
		msgs  []*message.Message
		want  error
	}{
		{"topic with a space", "bad topic", []*message.Message{message.NewMessage("u", nil)}, fila.ErrInvalid},
		{"topic too long", strings.Repeat("t", fila.MaxTopicNameLen+1), []*message.Message{message.NewMessage("u", nil)}, fila.ErrInvalid},
		{"empty metadata key", "good", []*message.Message{emptyKey}, fila.ErrInvalid},
		{"metadata not UTF-8", "good", []*message.Message{badUTF8}, fila.ErrInvalid},
		{"payload over the limit", "good", []*message.Message{message.NewMessage("big", make([]byte, 1025))}, fila.ErrTooLarge},
		{"one bad message in a batch", "good", []*message.Message{message.NewMessage("ok", nil), message.NewMessage("big", make([]byte, 1025))}, fila.ErrTooLarge},
	} {
		err := pub.Publish(tc.topic, tc.msgs...)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Publish error %v; want %v", tc.name, err, tc.want)
		}
	}
	// Nothing of a refused batch was stored.
	st, err := c.QueueStats(context.Background(), filawatermill.DefaultQueueName("good", filawatermill.DefaultConsumerGroup))
	if err != nil || st.Ready != 0 {
		t.Errorf("subscription after refused publishes: %+v, %v; want empty", st, err)
	}

	badKind, _ := filawatermill.NewPublisher(c, filawatermill.PublisherConfig{Kind: func(string, *message.Message) string { return "" }})
	if err := badKind.Publish("good", message.NewMessage("u", nil)); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("empty kind: %v; want fila.ErrInvalid", err)
	}
	if _, err := sub.Subscribe(context.Background(), "bad topic"); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Subscribe to a bad topic: %v; want fila.ErrInvalid", err)
	}
	badName, _ := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{QueueName: func(t, g string) string { return t + "/" + g }})
	if _, err := badName.Subscribe(context.Background(), "good"); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("bad queue name: %v; want fila.ErrInvalid", err)
	}
	for _, cfg := range []filawatermill.SubscriberConfig{
		{Lease: -time.Second},
		{Lease: fila.MaxLease + 1},
		{NackDelay: -2},
		{Prefetch: -1},
		{Prefetch: fila.MaxReceive + 1},
	} {
		if _, err := filawatermill.NewSubscriber(c, cfg); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("NewSubscriber(%+v): %v; want fila.ErrInvalid", cfg, err)
		}
	}
	if _, err := filawatermill.NewSubscriber(nil, filawatermill.SubscriberConfig{}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("NewSubscriber(nil): %v", err)
	}
	if _, err := filawatermill.NewPublisher(nil, filawatermill.PublisherConfig{}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("NewPublisher(nil): %v", err)
	}
}

// Close closes every output channel and waits; Subscribe and Publish after
// Close fail; closing twice is harmless.
func TestClose(t *testing.T) {
	c := openClient(t, "mem://"+randomHex(4))
	sub, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var chans []<-chan *message.Message
	for _, topic := range []string{"t1", "t2", "t2"} {
		ch, err := sub.Subscribe(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range chans {
		select {
		case _, open := <-ch:
			if open {
				t.Errorf("channel %d: a message after Close", i)
			}
		default:
			t.Errorf("channel %d not closed when Close returned", i)
		}
	}
	if _, err := sub.Subscribe(context.Background(), "t1"); !errors.Is(err, filawatermill.ErrSubscriberClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
	if err := sub.SubscribeInitialize("t1"); !errors.Is(err, filawatermill.ErrSubscriberClosed) {
		t.Errorf("SubscribeInitialize after Close: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	pub, _ := filawatermill.NewPublisher(c, filawatermill.PublisherConfig{})
	_ = pub.Close()
	if err := pub.Publish("t1", message.NewMessage("u", nil)); !errors.Is(err, filawatermill.ErrPublisherClosed) {
		t.Errorf("Publish after Close: %v", err)
	}
	if err := pub.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Closing the fila.Client ends the subscriptions: their channels close.
func TestClientCloseEndsSubscriptions(t *testing.T) {
	c := openClient(t, "mem://"+randomHex(4))
	sub, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ch, err := sub.Subscribe(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	select {
	case _, open := <-ch:
		if open {
			t.Fatal("a message after the client closed")
		}
	case <-time.After(waitTimeout):
		t.Fatal("channel not closed after the client closed")
	}
}

func TestDefaultQueueName(t *testing.T) {
	for _, tc := range []struct{ topic, group, want string }{
		{"orders", "default", "orders.default"},
		{"orders.eu", "billing_v2-x", "orders.eu.billing_v2-x"},
	} {
		if got := filawatermill.DefaultQueueName(tc.topic, tc.group); got != tc.want {
			t.Errorf("DefaultQueueName(%q, %q) = %q; want %q", tc.topic, tc.group, got, tc.want)
		}
	}
	long := strings.Repeat("t", fila.MaxTopicNameLen)
	seen := map[string][2]string{}
	for _, p := range [][2]string{
		{"a.b", "c"}, {"a", "b.c"}, // the same joined, told apart
		{"orders", "group with spaces/and:colons"},
		{"orders", "group with spaces/and;colons"},
		{"orders", "ünïcode"},
		{long, "g1"}, {long, "g2"}, {long, strings.Repeat("g", 300)},
		{"orders", ""},
		{"o", strings.Repeat("x", 200)},
	} {
		name := filawatermill.DefaultQueueName(p[0], p[1])
		if err := fila.ValidateQueueName(name); err != nil {
			t.Errorf("DefaultQueueName(%q, %q) = %q: %v", p[0], p[1], name, err)
		}
		if name != filawatermill.DefaultQueueName(p[0], p[1]) {
			t.Errorf("DefaultQueueName(%q, %q) is not deterministic", p[0], p[1])
		}
		if q, dup := seen[name]; dup {
			t.Errorf("DefaultQueueName(%q, %q) = %q, as for %q", p[0], p[1], name, q)
		}
		seen[name] = p
	}
}
