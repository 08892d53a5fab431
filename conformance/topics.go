package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// Fan-out (contract: fan-out): a topic copies every published message to
// each of its subscriptions, and each subscription is a queue.

// topic returns a fresh topic name for t.
func (s *suite) topic(t *testing.T) string {
	return "t" + s.queue(t)
}

// subscribe subscribes fresh queues to topic and returns them.
func (s *suite) subscribe(t *testing.T, c *fila.Client, topic string, n int) []string {
	t.Helper()
	qs := make([]string, n)
	for i := range qs {
		qs[i] = s.queue(t) + "-" + strconv.Itoa(i)
		if err := c.TopicSubscribe(ctxTimeout(t, 10*time.Second), topic, qs[i]); err != nil {
			t.Fatalf("TopicSubscribe(%s, %s): %v", topic, qs[i], err)
		}
	}
	return qs
}

// publish publishes msgs or fails the test, and checks the subscription count.
func publish(t *testing.T, c *fila.Client, topic string, subs int, msgs ...fila.Message) []string {
	t.Helper()
	r, err := c.PublishBatch(ctxTimeout(t, 30*time.Second), topic, msgs)
	if err != nil {
		t.Fatalf("PublishBatch(%s): %v", topic, err)
	}
	if len(r.IDs) != len(msgs) {
		t.Fatalf("PublishBatch(%s) returned %d ids for %d messages", topic, len(r.IDs), len(msgs))
	}
	// -1: the driver knows only that at least one subscription got them.
	if subs >= 0 && r.Subscriptions != subs && !(r.Subscriptions == -1 && subs > 0) {
		t.Errorf("PublishBatch(%s) reached %d subscriptions, want %d", topic, r.Subscriptions, subs)
	}
	return r.IDs
}

// testTopicEveryCopyOnce: every subscription gets one copy of every message,
// with the copy's own id, and a queue that did not subscribe gets none.
func (s *suite) testTopicEveryCopyOnce(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 3)
	if s.has(FeatureTopicList) {
		got, err := c.TopicSubscriptions(ctxTimeout(t, 10*time.Second), topic)
		var want []fila.Subscription
		for _, q := range subs {
			want = append(want, fila.Subscription{Queue: q})
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Queue < want[j].Queue })
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("TopicSubscriptions = %v, %v; want %v", got, err, want)
		}
	}
	// Subscribing again changes nothing.
	if err := c.TopicSubscribe(ctxTimeout(t, 10*time.Second), topic, subs[0]); err != nil {
		t.Fatalf("second TopicSubscribe: %v", err)
	}
	other := s.queue(t)
	const n = 21
	bodies := map[string]string{} // published id -> body
	var msgs []fila.Message
	for i := range n - 1 {
		msgs = append(msgs, fila.Message{Kind: "fan", Body: []byte("m" + strconv.Itoa(i)), Headers: map[string]string{"i": strconv.Itoa(i)}})
	}
	for i, id := range publish(t, c, topic, 3, msgs...) {
		bodies[id] = string(msgs[i].Body)
	}
	one, err := c.Publish(ctxTimeout(t, 10*time.Second), topic, fila.Message{Kind: "fan", Body: []byte("single")})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	bodies[one] = "single"
	for _, q := range subs {
		got := drain(t, c, q, n, 30*time.Second)
		for id, body := range bodies {
			d := got[fila.CopyID(id, q)]
			if d == nil {
				t.Errorf("subscription %s: no copy of %s (want id %s)", q, id, fila.CopyID(id, q))
				continue
			}
			if string(d.Body) != body || d.Kind != "fan" || d.Attempt != 1 {
				t.Errorf("subscription %s: copy of %s has kind %q body %q attempt %d; want fan, %q, 1", q, id, d.Kind, d.Body, d.Attempt, body)
			}
		}
		s.expectNone(t, c, q, 500*time.Millisecond, "subscription "+q+" after every copy was acked")
	}
	s.expectNone(t, c, other, 500*time.Millisecond, "a queue that did not subscribe")
}

// testTopicSubscriptionsIndependent: one subscription's retries, lease
// expiries and dead letters do not touch another's copies.
func (s *suite) testTopicSubscriptionsIndependent(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	a, b := subs[0], subs[1]
	ids := publish(t, c, topic, 2, fila.Message{Kind: "retry"}, fila.Message{Kind: "dead"}, fila.Message{Kind: "expire"})
	ctx := ctxTimeout(t, 60*time.Second)
	byKind := map[string]*fila.Delivery{}
	for len(byKind) < 3 {
		// A long lease, so that a slow broker does not end the leases
		// settled below; "expire" gets the short one after.
		ds, err := c.Receive(ctx, a, fila.ReceiveParams{Max: 3, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive(%s): %v", a, err)
		}
		for _, d := range ds {
			byKind[d.Kind] = d
		}
	}
	if err := byKind["retry"].Retry(ctx, 0, "failed in a"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if err := byKind["dead"].Dead(ctx, "poison in a"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	// "expire" is left to a short lease.
	if err := byKind["expire"].Extend(ctx, s.h.Lease); err != nil {
		t.Fatalf("Extend: %v", err)
	}

	// b sees each message once, at attempt 1, and nothing after acking.
	got := drain(t, c, b, 3, 30*time.Second)
	for _, id := range ids {
		if d := got[fila.CopyID(id, b)]; d == nil || d.Attempt != 1 {
			t.Errorf("subscription b: copy of %s = %v, want it at attempt 1", id, d)
		}
	}
	s.expectNone(t, c, b, s.h.Lease+s.h.RedeliveryBound, "subscription b after acking, while a retries")
	if s.has(FeatureDeadLetters) {
		page, err := c.DeadList(ctx, b, fila.DeadListParams{Limit: 10})
		if err != nil || len(page.Letters) != 0 {
			t.Errorf("subscription b's dead letters: %d, %v; want none", len(page.Letters), err)
		}
		if l := s.findDead(t, c, a, fila.CopyID(ids[1], a)); l != nil && l.Reason != "poison in a" {
			t.Errorf("subscription a's dead letter has reason %q", l.Reason)
		}
	}
	// a gets "retry" and "expire" again, at attempt 2.
	again := map[string]int{}
	for len(again) < 2 {
		ds, err := c.Receive(ctx, a, fila.ReceiveParams{Max: 2, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive(%s) again: %v", a, err)
		}
		for _, d := range ds {
			again[d.Kind] = d.Attempt
			_ = d.Ack(ctx)
		}
	}
	if !reflect.DeepEqual(again, map[string]int{"retry": 2, "expire": 2}) {
		t.Errorf("subscription a redelivered %v, want retry and expire at attempt 2", again)
	}
}

// testTopicSlowSubscription: a subscription nobody reads does not hold up
// another, and keeps every copy until it is read.
func (s *suite) testTopicSlowSubscription(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	fast, slow := subs[0], subs[1]
	n := s.h.FanoutBacklog
	var want []string
	for sent := 0; sent < n; {
		k := min(100, n-sent)
		msgs := make([]fila.Message, k)
		for i := range msgs {
			msgs[i] = fila.Message{Kind: "backlog", Body: []byte(strconv.Itoa(sent + i))}
		}
		want = append(want, publish(t, c, topic, 2, msgs...)...)
		sent += k
	}
	got := drainSteady(t, c, fast, n, 30*time.Second)
	for _, id := range want {
		if got[fila.CopyID(id, fast)] == nil {
			t.Fatalf("the fast subscription lacks the copy of %s", id)
		}
	}
	got = drainSteady(t, c, slow, n, 30*time.Second)
	for _, id := range want {
		if got[fila.CopyID(id, slow)] == nil {
			t.Fatalf("the slow subscription lost the copy of %s", id)
		}
	}
}

// testTopicSubscribeWhilePublishing: a subscription made while a publisher
// runs gets every message published after it was made and none published
// before; once it is removed its queue is gone and gets nothing published
// after; a subscription that stays gets everything.
func (s *suite) testTopicSubscribeWhilePublishing(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureQueueDelete)
	c, admin := s.client(t), s.client(t)
	topic := s.topic(t)
	stay := s.subscribe(t, c, topic, 1)[0]
	late := s.queue(t) + "-late"
	ctx := ctxTimeout(t, 90*time.Second)

	// started[i] and ended[i] hold when message i's Publish began and
	// returned.
	var (
		mu      sync.Mutex
		started = map[int]time.Time{}
		ended   = map[int]time.Time{}
		ids     = map[int]string{}
		stop    atomic.Bool
		wg      sync.WaitGroup
		pubErr  error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			at := time.Now()
			id, err := c.Publish(ctx, topic, fila.Message{Kind: "seq", Body: []byte(strconv.Itoa(i))})
			mu.Lock()
			started[i], ended[i], ids[i] = at, time.Now(), id
			if err != nil && pubErr == nil {
				pubErr = fmt.Errorf("Publish %d: %w", i, err)
			}
			mu.Unlock()
			if err != nil {
				return
			}
			time.Sleep(2 * time.Millisecond) // a few hundred a second: enough to cross both changes
		}
	}()
	// pause lets the publisher run: until it has published three more
	// messages (on a slow broker that takes longer than on a fast one),
	// so that publishes cross each change.
	pause := func() {
		mu.Lock()
		from := len(ids)
		mu.Unlock()
		for ctx.Err() == nil {
			mu.Lock()
			n, failed := len(ids), pubErr != nil
			mu.Unlock()
			if n >= from+3 || failed {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	pause()
	subAt := time.Now()
	if err := admin.TopicSubscribe(ctx, topic, late); err != nil {
		t.Fatalf("TopicSubscribe while publishing: %v", err)
	}
	pause()
	if err := admin.TopicUnsubscribe(ctx, topic, late); err != nil {
		t.Fatalf("TopicUnsubscribe while publishing: %v", err)
	}
	unsubDone := time.Now()
	pause()
	stop.Store(true)
	wg.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	mu.Lock()
	total := len(ids)
	mu.Unlock()

	// The late subscription's copies that survived the unsubscribe can only
	// be of messages published while it existed.
	left := map[string]bool{}
	for {
		ds, err := c.Receive(ctxTimeout(t, 500*time.Millisecond), late, fila.ReceiveParams{Max: 100, Lease: time.Minute})
		if err != nil {
			break
		}
		for _, d := range ds {
			left[d.ID] = true
			_ = d.Ack(ctx)
		}
	}
	for i := range total {
		id := fila.CopyID(ids[i], late)
		if left[id] && (ended[i].Before(subAt) || started[i].After(unsubDone)) {
			t.Errorf("message %d (published %v after the subscribe began, %v after the unsubscribe returned) is in the removed subscription",
				i, started[i].Sub(subAt), started[i].Sub(unsubDone))
		}
	}

	// The subscription that stayed has every message.
	got := drain(t, c, stay, total, 60*time.Second)
	for i := range total {
		if got[fila.CopyID(ids[i], stay)] == nil {
			t.Errorf("the subscription that stayed lacks message %d", i)
		}
	}
	if total < 9 {
		t.Errorf("the publisher published only %d messages across the three pauses", total)
	}
}

// testTopicSubscribeWindow: a subscription gets the messages published
// after TopicSubscribe returned and not those published before it began.
func (s *suite) testTopicSubscribeWindow(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	early := s.subscribe(t, c, topic, 1)[0]
	before := publish(t, c, topic, 1, fila.Message{Kind: "before"})
	late := s.subscribe(t, c, topic, 1)[0]
	after := publish(t, c, topic, 2, fila.Message{Kind: "after"})
	d := receiveOne(t, c, late, time.Minute, 10*time.Second)
	if d.ID != fila.CopyID(after[0], late) || d.Kind != "after" {
		t.Errorf("late subscription received %s (%s), want the copy of %s published after it", d.ID, d.Kind, after[0])
	}
	_ = d.Ack(ctxTimeout(t, 10*time.Second))
	s.expectNone(t, c, late, 500*time.Millisecond, "the late subscription: a message published before it existed")
	got := drain(t, c, early, 2, 10*time.Second)
	if got[fila.CopyID(before[0], early)] == nil || got[fila.CopyID(after[0], early)] == nil {
		t.Errorf("the early subscription got %d messages, want both", len(got))
	}
}

// testTopicWithoutSubscriptions: publishing to a topic nobody subscribed to
// stores nothing and is not an error; a later subscription does not get it.
func (s *suite) testTopicWithoutSubscriptions(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	publish(t, c, topic, 0, fila.Message{Kind: "nobody"})
	if s.has(FeatureTopicList) {
		subs, err := c.TopicSubscriptions(ctxTimeout(t, 10*time.Second), topic)
		if err != nil || len(subs) != 0 {
			t.Errorf("TopicSubscriptions of an unused topic = %v, %v; want none", subs, err)
		}
	}
	q := s.subscribe(t, c, topic, 1)[0]
	s.expectNone(t, c, q, 500*time.Millisecond, "a subscription made after the publish")
}

// testTopicBadInput: bad topic and subscription names are ErrInvalid, and
// so is a unique period on a published message.
func (s *suite) testTopicBadInput(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	ctx := ctxTimeout(t, 10*time.Second)
	topic := s.topic(t)
	for _, bad := range []string{"", "-x", "a b", "a/b", strings.Repeat("t", fila.MaxTopicNameLen+1), "ü"} {
		wantErr(t, fmt.Sprintf("TopicSubscribe to topic %q", bad), c.TopicSubscribe(ctx, bad, s.queue(t)), fila.ErrInvalid)
		_, err := c.Publish(ctx, bad, fila.Message{Kind: "k"})
		wantErr(t, fmt.Sprintf("Publish to topic %q", bad), err, fila.ErrInvalid)
		wantErr(t, fmt.Sprintf("TopicUnsubscribe from topic %q", bad), c.TopicUnsubscribe(ctx, bad, s.queue(t)), fila.ErrInvalid)
	}
	for _, bad := range []string{"", "a b", "fila.topic.x"} {
		wantErr(t, fmt.Sprintf("TopicSubscribe of queue %q", bad), c.TopicSubscribe(ctx, topic, bad), fila.ErrInvalid)
	}
	_, err := c.Publish(ctx, topic, fila.Message{Kind: ""})
	wantErr(t, "Publish without a kind", err, fila.ErrInvalid)
	_, err = c.Publish(ctx, topic, fila.Message{Kind: "k", DedupKey: "d", UniqueFor: time.Minute})
	if !errors.Is(err, fila.ErrInvalid) && !errors.Is(err, fila.ErrUnsupported) {
		t.Errorf("Publish with UniqueFor: want ErrInvalid (or ErrUnsupported), got %v", err)
	}
	_, err = c.PublishBatch(ctx, topic, nil)
	wantErr(t, "PublishBatch of nothing", err, fila.ErrInvalid)
}

// testTopicPublishTx: copies published in a transaction appear in every
// subscription on commit and in none on rollback.
func (s *suite) testTopicPublishTx(t *testing.T) {
	s.need(t, FeatureTopics)
	s.need(t, FeatureTxEnqueue)
	c := s.client(t)
	topic := s.topic(t)
	subs := s.subscribe(t, c, topic, 2)
	ctx := ctxTimeout(t, 30*time.Second)

	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	if _, err := c.PublishTx(ctx, tx.Value, topic, []fila.Message{{Kind: "rolled-back"}}); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("PublishTx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	tx, err = s.h.BeginTx(ctx)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	r, err := c.PublishTx(ctx, tx.Value, topic, []fila.Message{{Kind: "committed"}})
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("PublishTx: %v", err)
	}
	if r.Subscriptions != 2 {
		t.Errorf("PublishTx reached %d subscriptions, want 2", r.Subscriptions)
	}
	s.expectNone(t, c, subs[0], 300*time.Millisecond, "before commit")
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, q := range subs {
		d := receiveOne(t, c, q, time.Minute, s.afterNone())
		if d.ID != fila.CopyID(r.IDs[0], q) || d.Kind != "committed" {
			t.Errorf("subscription %s received %s (%s), want the committed copy", q, d.ID, d.Kind)
		}
		_ = d.Ack(ctx)
		s.expectNone(t, c, q, 300*time.Millisecond, "the rolled-back publish")
	}
}
