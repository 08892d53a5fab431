package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Routing by kind pattern (topic.go): P.T:topic (fanout) is every
// publish's entry point, subscriptions without a pattern are bound to it,
// and pattern subscriptions reach it through P.T:route (topic) and their
// own exchange P.Q:sub:H.

// subscribePatterns subscribes a fresh queue of f with each of patterns
// ("" for every kind) and returns it.
func (f *topicFixture) subscribePatterns(t *testing.T, patterns ...string) string {
	t.Helper()
	q := f.topic + "-s" + strconv.Itoa(len(f.subs))
	f.subs = append(f.subs, q)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range patterns {
		if err := f.d.TopicSubscribe(ctx, f.topic, q, p); err != nil {
			t.Fatalf("TopicSubscribe(%s, %q): %v", q, p, err)
		}
	}
	return q
}

// kindMsg is a message of kind with a fresh id.
func kindMsg(kind string) backend.Message {
	m := testMsg(uuid())
	m.Kind = kind
	return m
}

// publishKinds publishes one message per kind in one call and checks what
// TopicPublish returns.
func publishKinds(t *testing.T, d *Driver, topic string, want int, kinds ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs := make([]backend.Message, len(kinds))
	for i, k := range kinds {
		msgs[i] = kindMsg(k)
	}
	got, err := d.TopicPublish(ctx, topic, msgs)
	if got != want || err != nil {
		t.Fatalf("TopicPublish(%v) = %d, %v; want %d, nil", kinds, got, err, want)
	}
}

// expectKinds receives exactly len(want) messages from q, checks their
// kinds (in any order), and that nothing more comes.
func expectKinds(t *testing.T, d *Driver, q string, want ...string) {
	t.Helper()
	var got []string
	if len(want) > 0 {
		for _, dl := range receiveAll(t, d, q, len(want), 10*time.Second) {
			got = append(got, dl.Kind)
			errs, err := d.Ack(context.Background(), []backend.Ref{{Queue: q, ID: dl.ID, Receipt: dl.Receipt}})
			if err == nil {
				err = errs[0]
			}
			if err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queue %s: after %v, received %d more (%v)", q, want, len(ds), err)
	}
	want = slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("queue %s got kinds %v, want %v", q, got, want)
	}
}

// oldPublish publishes msgs as a driver from before routing by kind did:
// to the fanout exchange with routing key "".
func oldPublish(t *testing.T, d *Driver, topic string, kinds ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tn, err := d.topicExchanges(topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]pubItem, len(kinds))
	unroutable := make([]bool, len(kinds))
	for i, k := range kinds {
		m := kindMsg(k)
		pub := encode(&m)
		pub.Headers[hTopic] = topic
		items[i] = pubItem{exchange: tn.fanout, msg: pub, unroutable: &unroutable[i]}
	}
	if err := s.publish(ctx, items); err != nil {
		t.Fatalf("old-style publish: %v", err)
	}
}

// exchangeExists reports whether exchange name exists, by a passive
// declare on a channel of its own (a 404 closes it).
func exchangeExists(t *testing.T, d *Driver, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ch.Close() }()
	err = ch.ExchangeDeclarePassive(name, amqp.ExchangeFanout, true, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return false
	}
	if err != nil {
		t.Fatalf("passive declare of exchange %s: %v", name, err)
	}
	return true
}

// TestRouteOldDeployment: a deployment from before routing by kind has
// the fanout exchange alone, subscriptions bound to it with "" and
// publishers that publish with routing key "". After an upgraded client
// declares the topic exchange behind the fanout one, the old subscription
// gets every message, new and old publishers' alike, together with
// pattern subscriptions, which take the new publishers' messages by kind
// and the old publishers' only when their pattern matches the empty
// routing key ("#").
func TestRouteOldDeployment(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tn, err := d.topicExchanges(f.topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// The old deployment, made as the old driver made it.
	old := f.topic + "-old"
	f.subs = append(f.subs, old)
	n, _ := d.names(old)
	if err := s.declare(ctx, old, n); err != nil {
		t.Fatal(err)
	}
	if err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(tn.fanout, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(n.main, "", tn.fanout, false, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, d, tn.route) {
		t.Fatalf("exchange %s exists before any upgraded client declared it", tn.route)
	}
	oldPublish(t, d, f.topic, "a.x")
	expectKinds(t, d, old, "a.x")

	// An upgraded client publishes: the old subscription gets everything.
	publishKinds(t, d, f.topic, -1, "a.x", "b.x")
	expectKinds(t, d, old, "a.x", "b.x")

	// And subscribes, with and without patterns.
	pat := f.subscribePatterns(t, "a.*")
	hash := f.subscribePatterns(t, "#")
	all := f.subscribePatterns(t, "")
	publishKinds(t, d, f.topic, -1, "a.x", "b.x", "a.y.z")
	expectKinds(t, d, old, "a.x", "b.x", "a.y.z")
	expectKinds(t, d, pat, "a.x")
	expectKinds(t, d, hash, "a.x", "b.x", "a.y.z")
	expectKinds(t, d, all, "a.x", "b.x", "a.y.z")

	// An old publisher's messages carry no kind in their routing key.
	oldPublish(t, d, f.topic, "a.x")
	expectKinds(t, d, old, "a.x")
	expectKinds(t, d, all, "a.x")
	expectKinds(t, d, hash, "a.x")
	expectKinds(t, d, pat)

	// Another upgraded process, whose connection never declared the
	// exchanges, publishes and subscribes through what exists.
	other := openTest(t)
	publishKinds(t, other, f.topic, -1, "a.q")
	expectKinds(t, d, old, "a.q")
	expectKinds(t, d, pat, "a.q")
}

// TestRouteOneCopyPerQueue: a queue gets one copy of a message however
// many of its bindings match it (to the fanout exchange and through the
// topic exchange, or several patterns), and a pattern subscription that
// takes every kind gets each once too.
func TestRouteOneCopyPerQueue(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 0)
	both := f.subscribePatterns(t, "", "a.*", "#", "*.x", "a.x")
	overlap := f.subscribePatterns(t, "a.*", "#.x", "a.x", "a.x")
	everything := f.subscribePatterns(t, "#", "*", "#.#")
	publishKinds(t, d, f.topic, -1, "a.x", "b.y", "a.y", "c.x")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The confirm comes once every queue stored its copy; the counts may
	// trail it by a moment.
	for q, want := range map[string]int64{both: 4, overlap: 3, everything: 4} {
		n, _ := d.names(q)
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := s.count(ctx, n.main)
			if err != nil {
				t.Fatal(err)
			}
			if c == want {
				break
			}
			if c > want || time.Now().After(deadline) {
				t.Fatalf("queue %s holds %d messages, want %d", q, c, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	expectKinds(t, d, both, "a.x", "b.y", "a.y", "c.x")
	expectKinds(t, d, overlap, "a.x", "a.y", "c.x")
	expectKinds(t, d, everything, "a.x", "b.y", "a.y", "c.x")
}

// TestRouteUnroutable: a publish that no subscription takes, through
// either exchange, is returned unroutable (0) and stores nothing; one that
// some subscription takes is -1. TopicUnsubscribe ends a pattern
// subscription with all its patterns (its exchange goes) and leaves the
// queue and its messages.
func TestRouteUnroutable(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 0)
	publishKinds(t, d, f.topic, 0, "a.x") // no subscription at all
	q := f.subscribePatterns(t, "a.*", "b.#")
	publishKinds(t, d, f.topic, 0, "c.x")
	publishKinds(t, d, f.topic, 0, "c.x", "a", "a.x.y", "x.b")
	publishKinds(t, d, f.topic, -1, "a.x")
	publishKinds(t, d, f.topic, -1, "c.x", "b", "a.x.y")
	expectKinds(t, d, q, "a.x", "b")

	// A second, pattern-less subscription takes what the first does not.
	all := f.subscribePatterns(t, "")
	publishKinds(t, d, f.topic, -1, "c.x")
	expectKinds(t, d, all, "c.x")
	expectKinds(t, d, q)

	// Unsubscribing the pattern subscription removes every pattern.
	n, _ := d.names(q)
	sub := n.topicSub(f.topic)
	if !exchangeExists(t, d, sub) {
		t.Fatalf("the subscription exchange %s does not exist", sub)
	}
	publishKinds(t, d, f.topic, -1, "b.y") // waits in q and all
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.TopicUnsubscribe(ctx, f.topic, q); err != nil {
		t.Fatalf("TopicUnsubscribe: %v", err)
	}
	if exchangeExists(t, d, sub) {
		t.Errorf("the subscription exchange %s survived TopicUnsubscribe", sub)
	}
	if err := d.TopicUnsubscribe(ctx, f.topic, q); err != nil {
		t.Errorf("second TopicUnsubscribe: %v", err)
	}
	if err := d.TopicUnsubscribe(ctx, f.topic, all); err != nil {
		t.Fatalf("TopicUnsubscribe: %v", err)
	}
	publishKinds(t, d, f.topic, 0, "a.x", "b.y", "c.z")
	expectKinds(t, d, q, "b.y")
	expectKinds(t, d, all, "b.y")
}

// TestRouteQueueDelete: deleting a pattern subscription's queue deletes
// its subscription exchange (auto-delete); subscribing again after the
// queue or the topic exchange was deleted behind the driver's back
// declares them again.
func TestRouteQueueDelete(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q := f.subscribePatterns(t, "a.*")
	n, _ := d.names(q)
	sub := n.topicSub(f.topic)
	if err := d.QueueDelete(ctx, q); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, d, sub) {
		t.Errorf("the subscription exchange %s survived QueueDelete of its queue", sub)
	}
	publishKinds(t, d, f.topic, 0, "a.x")

	// Another process deletes the queue: d's declarations are stale.
	if err := d.TopicSubscribe(ctx, f.topic, q, "a.*"); err != nil {
		t.Fatal(err)
	}
	other := openTest(t)
	unregister(other)
	other.scope += "\x00elsewhere"
	register(other)
	if err := other.QueueDelete(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := d.TopicSubscribe(ctx, f.topic, q, "b.*"); err != nil {
		t.Fatalf("TopicSubscribe of a queue deleted behind the driver: %v", err)
	}
	publishKinds(t, d, f.topic, 0, "a.x")
	publishKinds(t, d, f.topic, -1, "b.x")
	expectKinds(t, d, q, "b.x")

	// The topic exchange goes behind the driver's back (its binding to
	// the fanout exchange and the subscription's bindings with it).
	tn, _ := d.topicExchanges(f.topic)
	os, err := other.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.oneShot(ctx, func(ch *amqp.Channel) error { return ch.ExchangeDelete(tn.route, false, false) }); err != nil {
		t.Fatal(err)
	}
	publishKinds(t, d, f.topic, 0, "b.x")
	if err := d.TopicSubscribe(ctx, f.topic, q, "c.*"); err != nil {
		t.Fatalf("TopicSubscribe after the topic exchange was deleted: %v", err)
	}
	if err := d.TopicSubscribe(ctx, f.topic, q, "b.*"); err != nil {
		t.Fatal(err)
	}
	publishKinds(t, d, f.topic, -1, "b.x", "c.x", "d.x")
	expectKinds(t, d, q, "b.x", "c.x")
}

// TestRouteConcurrentSubscribe: subscriptions of one queue with several
// patterns, and of other queues, made at once by several drivers while
// messages are published, all hold: a publish after them reaches each
// queue once per message its patterns take.
func TestRouteConcurrentSubscribe(t *testing.T) {
	d := openTest(t)
	others := []*Driver{d, openTest(t), openTest(t)}
	f := newTopic(t, d, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	patterns := []string{"a.*", "b.#", "*.c", "#.d", "e"}
	queues := []string{f.topic + "-s0", f.topic + "-s1", f.topic + "-s2"}
	f.subs = append(f.subs, queues...)
	stop := make(chan struct{})
	var pubs sync.WaitGroup
	pubs.Add(1)
	go func() { // publishes during the subscribes: must not fail
		defer pubs.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := others[2].TopicPublish(ctx, f.topic, []backend.Message{kindMsg("z.z.z")}); err != nil {
				t.Errorf("TopicPublish during the subscribes: %v", err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(queues)*len(patterns))
	for qi, q := range queues {
		for pi, p := range patterns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := others[(qi+pi)%len(others)].TopicSubscribe(ctx, f.topic, q, p); err != nil {
					errs <- fmt.Errorf("TopicSubscribe(%s, %q): %w", q, p, err)
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	pubs.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	kinds := []string{"a.x", "b", "b.x.y", "x.c", "d", "x.y.d", "e", "e.x", "f", "a.c"}
	var want []string
	for _, k := range kinds {
		if backend.KindMatchAny(patterns, k) {
			want = append(want, k)
		}
	}
	publishKinds(t, d, f.topic, -1, kinds...)
	for _, q := range queues {
		// Only the kinds published after the subscribes; z.z.z matches none.
		expectKinds(t, d, q, want...)
	}
}

// TestTopicSubNames: a subscription exchange's name fits RabbitMQ's limit
// for the longest prefix, queue and topic names, keeps at least 12 hash
// characters, and differs between topics and from the queue's other
// names.
func TestTopicSubNames(t *testing.T) {
	for _, tc := range []struct{ prefix, queue string }{
		{"fila", "q"},
		{strings.Repeat("p", maxPrefix), strings.Repeat("q", 128)},
	} {
		d := &Driver{opts: Options{Prefix: tc.prefix}}
		n, err := d.names(tc.queue)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{n.main: true, n.dead: true}
		for _, topic := range []string{"t", "T", "t2", strings.Repeat("t", 128), strings.Repeat("t", 127)} {
			name := n.topicSub(topic)
			if len(name) > maxNameLen {
				t.Errorf("subscription exchange of %.20q to %.20q: name is %d bytes", tc.queue, topic, len(name))
			}
			if h := len(name) - len(n.main+subInfix); h < 12 {
				t.Errorf("subscription exchange of %.20q to %.20q: only %d hash characters", tc.queue, topic, h)
			}
			if seen[name] {
				t.Errorf("subscription exchange of %.20q to %.20q: name %q taken", tc.queue, topic, name)
			}
			seen[name] = true
			if n.topicSub(topic) != name {
				t.Errorf("subscription exchange of %.20q to %.20q: name not stable", tc.queue, topic)
			}
			if strings.Count(name, ":") != 2 {
				t.Errorf("subscription exchange name %q: want exactly the infix's ':'", name)
			}
		}
	}
}
