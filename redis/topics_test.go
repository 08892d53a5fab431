package redis_test

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/redis"
)

// receiveIDs receives from queue until it has want messages (acking them),
// and returns their ids.
func receiveIDs(t *testing.T, c *fila.Client, queue string, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids []string
	for len(ids) < want {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: want - len(ids)})
		if err != nil {
			t.Fatalf("Receive(%s) after %d of %d: %v", queue, len(ids), want, err)
		}
		for _, d := range ds {
			ids = append(ids, d.ID)
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
	}
	return ids
}

// TestTopicLogPublishesOnce: a publish to a topic with three subscriptions
// writes each event once, to the topic's log, and nothing to the
// subscriptions' streams; each subscription then receives every event once,
// with its copy id, and once all have, the log is trimmed empty.
func TestTopicLogPublishesOnce(t *testing.T) {
	bothPaths(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		c := e.client(t, redis.Options{})
		subs := []string{"a", "b", "c"}
		for _, q := range subs {
			if err := c.TopicSubscribe(ctx, "news", q); err != nil {
				t.Fatal(err)
			}
		}
		msgs := make([]fila.Message, 10)
		for i := range msgs {
			msgs[i] = fila.Message{Kind: "event", Body: []byte{byte(i)}}
		}
		res, err := c.PublishBatch(ctx, "news", msgs)
		if err != nil || res.Subscriptions != 3 {
			t.Fatalf("PublishBatch = %+v, %v; want 3 subscriptions", res, err)
		}
		log := redis.TopicLogKey(e.prefix, "news")
		if n := e.raw.XLen(ctx, log).Val(); n != 10 {
			t.Errorf("topic log holds %d entries after publishing 10; want 10", n)
		}
		for _, q := range subs {
			stream := redis.QueueKeys(e.prefix, q)[redis.KeyStream]
			if n := e.raw.XLen(ctx, stream).Val(); n != 0 {
				t.Errorf("queue %s's stream holds %d entries after the publish; want none (copied when read)", q, n)
			}
		}
		for _, q := range subs {
			got := receiveIDs(t, c, q, 10)
			var want []string
			for _, id := range res.IDs {
				want = append(want, fila.CopyID(id, q))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s received %v; want the copies %v", q, got, want)
			}
			st, err := c.QueueStats(ctx, q)
			if err != nil || st.Ready != 0 {
				t.Errorf("QueueStats(%s) after receiving everything = %+v, %v; want nothing ready", q, st, err)
			}
		}
		// The subscriptions record their progress on their next pull.
		for _, q := range subs {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, _ = c.Receive(rctx, q, fila.ReceiveParams{Max: 1})
			cancel()
		}
		if n := e.raw.XLen(ctx, log).Val(); n != 0 {
			t.Errorf("topic log holds %d entries after every subscription read them; want it trimmed to none", n)
		}
	})
}

// TestTopicLogStalledSubscription: a subscription that reads nothing keeps
// the log's events (once), counts them as ready in its stats with their age,
// and is named in a warning once they are older than the lag age; deleting
// its queue skips them, and the log is then trimmed.
func TestTopicLogStalledSubscription(t *testing.T) {
	defer redis.SetLagWarnAge(200 * time.Millisecond)()
	e := newEnv(t)
	ctx := testCtx(t)
	rec := testenv.NewLogRecorder()
	c := e.client(t, redis.Options{Logger: rec.Logger()})
	for _, q := range []string{"live", "stalled"} {
		if err := c.TopicSubscribe(ctx, "feed", q); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	msgs := make([]fila.Message, 5)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "event"}
	}
	if _, err := c.PublishBatch(ctx, "feed", msgs); err != nil {
		t.Fatal(err)
	}
	receiveIDs(t, c, "live", 5)
	// live records its progress on the topic's side with its next read.
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _ = c.Receive(rctx, "live", fila.ReceiveParams{Max: 1})
	cancel()
	st, err := c.QueueStats(ctx, "stalled")
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != 5 || st.OldestReadyAt.IsZero() || st.OldestReadyAt.Before(before.Add(-time.Second)) {
		t.Errorf("QueueStats(stalled) = %+v; want 5 ready, the oldest since the publish (%v)", st, before)
	}
	log := redis.TopicLogKey(e.prefix, "feed")
	// The warning comes with a publish or a read once the oldest event is
	// older than the lag age.
	deadline := time.Now().Add(10 * time.Second)
	warned := func() bool {
		for _, r := range rec.Records() {
			if r.Level == slog.LevelWarn && strings.Contains(r.Message, "subscription lags") {
				var sub string
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "subscription" {
						sub = a.Value.String()
					}
					return true
				})
				if sub == "stalled" {
					return true
				}
			}
		}
		return false
	}
	for !warned() {
		if time.Now().After(deadline) {
			t.Fatalf("no warning naming the stalled subscription; logged: %v", rec.Records())
		}
		if _, err := c.Publish(ctx, "feed", fila.Message{Kind: "event"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	receiveIDs(t, c, "live", int(e.raw.XLen(ctx, log).Val())-5)
	if err := c.QueueDelete(ctx, "stalled", fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.QueueStats(ctx, "stalled"); err != nil || st.Ready != 0 {
		t.Errorf("QueueStats(stalled) after QueueDelete = %+v, %v; want nothing ready", st, err)
	}
	rctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	_, _ = c.Receive(rctx, "live", fila.ReceiveParams{Max: 1}) // records live's progress
	cancel()
	if n := e.raw.XLen(ctx, log).Val(); n != 0 {
		t.Errorf("topic log holds %d entries after the stalled queue was deleted and both read; want none", n)
	}
	subs, err := c.TopicSubscriptions(ctx, "feed")
	if err != nil || !reflect.DeepEqual(subs, []fila.Subscription{{Queue: "live"}, {Queue: "stalled"}}) {
		t.Errorf("TopicSubscriptions after QueueDelete = %v, %v; want both still subscribed", subs, err)
	}
}

// TestTopicLogWakesBlockedReceive: a Receive blocked on an empty
// subscription wakes on a publish from another client, well before its
// block interval (one minute here) would have made it look again.
func TestTopicLogWakesBlockedReceive(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	rx := e.client(t, redis.Options{Block: time.Minute})
	tx := e.client(t, redis.Options{})
	if err := tx.TopicSubscribe(ctx, "wake", "q"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		ds, err := rx.Receive(rctx, "q", fila.ReceiveParams{Max: 1})
		if err == nil && len(ds) != 1 {
			err = context.DeadlineExceeded
		}
		got <- err
	}()
	// Publish until the receive is done: one publish may land before the
	// receiver's first look, which would find it without waiting.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	published := false
	for {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("blocked Receive: %v", err)
			}
			if !published {
				t.Fatal("Receive returned before anything was published")
			}
			return
		case <-tick.C:
			if !published {
				if _, err := tx.Publish(ctx, "wake", fila.Message{Kind: "event"}); err != nil {
					t.Fatal(err)
				}
				published = true
			}
		}
	}
}

// TestTopicLogAdoptsLegacySubscriptions: a subscription kept as a mark by
// an earlier Fila version (the portable layer's) is adopted: it is listed
// and receives what this version publishes; and a subscription made by this
// version keeps the mark, so such versions copy to it.
func TestTopicLogAdoptsLegacySubscriptions(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	d := e.driver(t, redis.Options{})
	if _, err := d.MarkSet(ctx, "fila.topic.old", "sub/legacy", time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Publish(ctx, "old", fila.Message{Kind: "event"})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveIDs(t, c, "legacy", 1); got[0] != fila.CopyID(id, "legacy") {
		t.Errorf("legacy subscription received %v; want the copy of %s", got, id)
	}
	subs, err := c.TopicSubscriptions(ctx, "old")
	if err != nil || !reflect.DeepEqual(subs, []fila.Subscription{{Queue: "legacy"}}) {
		t.Errorf("TopicSubscriptions = %v, %v; want [legacy]", subs, err)
	}
	if err := c.TopicSubscribe(ctx, "old", "fresh"); err != nil {
		t.Fatal(err)
	}
	marks, err := d.MarkList(ctx, "fila.topic.old", "sub/")
	if err != nil || !slices.Equal(marks, []string{"sub/fresh", "sub/legacy"}) {
		t.Errorf("marks of the topic = %v, %v; want both subscriptions, for earlier versions", marks, err)
	}
	if err := c.TopicUnsubscribe(ctx, "old", "fresh"); err != nil {
		t.Fatal(err)
	}
	if marks, err := d.MarkList(ctx, "fila.topic.old", "sub/"); err != nil || !slices.Equal(marks, []string{"sub/legacy"}) {
		t.Errorf("marks after unsubscribing fresh = %v, %v; want only legacy's", marks, err)
	}
}

// TestTopicLogLagNotFalse: subscriptions that copied everything but whose
// receives stopped before recording it on the topic's side are not named
// as lagging: the check records their progress instead, which trims the
// log.
func TestTopicLogLagNotFalse(t *testing.T) {
	defer redis.SetLagWarnAge(time.Second)()
	e := newEnv(t)
	ctx := testCtx(t)
	rec := testenv.NewLogRecorder()
	c := e.client(t, redis.Options{Logger: rec.Logger()})
	for _, q := range []string{"a", "b"} {
		if err := c.TopicSubscribe(ctx, "quiet", q); err != nil {
			t.Fatal(err)
		}
	}
	first := time.Now()
	if _, err := c.PublishBatch(ctx, "quiet", []fila.Message{{Kind: "e"}, {Kind: "e"}, {Kind: "e"}}); err != nil {
		t.Fatal(err)
	}
	// Each receive gets all three at once and returns: neither goes idle,
	// so neither records its cursor on the topic's side.
	receiveIDs(t, c, "a", 3)
	receiveIDs(t, c, "b", 3)
	for time.Since(first) < 1200*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
	}
	// This publish finds the log's oldest event past the lag age.
	if _, err := c.Publish(ctx, "quiet", fila.Message{Kind: "e"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Records() {
		if r.Level >= slog.LevelWarn {
			t.Errorf("logged %q although every subscription had read the old events", r.Message)
		}
	}
	if n := e.raw.XLen(ctx, redis.TopicLogKey(e.prefix, "quiet")).Val(); n != 1 {
		t.Errorf("topic log holds %d entries; want 1 (the old ones trimmed by the check)", n)
	}
}

// receiveKinds receives from queue until it has want messages (acking
// them), checks that nothing more comes, and returns their kinds, sorted.
func receiveKinds(t *testing.T, c *fila.Client, queue string, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var kinds []string
	for len(kinds) < want {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: want - len(kinds)})
		if err != nil {
			t.Fatalf("Receive(%s) after %d of %d: %v", queue, len(kinds), want, err)
		}
		for _, d := range ds {
			kinds = append(kinds, d.Kind)
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer rcancel()
	if ds, err := c.Receive(rctx, queue, fila.ReceiveParams{Max: 10}); err == nil && len(ds) > 0 {
		t.Errorf("Receive(%s) after its %d messages got %d more, the first of kind %q", queue, want, len(ds), ds[0].Kind)
	}
	slices.Sort(kinds)
	return kinds
}

// TestTopicPatternsLog: the log holds only the messages some subscription
// takes; a subscription with a pattern counts as ready only the uncopied
// events it takes, passes over the others (its cursor moves past them, so
// the log is trimmed) and receives only the first; a publish that mixes
// messages copied at publish (dedup key, delay) with logged ones counts the
// subscriptions either reached once.
func TestTopicPatternsLog(t *testing.T) {
	bothPaths(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		c := e.client(t, redis.Options{})
		sub := func(topic, q, p string) {
			t.Helper()
			if err := c.TopicSubscribe(ctx, topic, q, fila.KindPattern(p)); err != nil {
				t.Fatal(err)
			}
		}
		pub := func(topic string, want int, msgs ...fila.Message) {
			t.Helper()
			res, err := c.PublishBatch(ctx, topic, msgs)
			if err != nil || res.Subscriptions != want {
				t.Fatalf("PublishBatch(%s) = %+v, %v; want %d subscriptions", topic, res, err, want)
			}
		}
		sub("mix", "every", "")
		sub("mix", "pa", "a.*")
		pub("mix", 2, fila.Message{Kind: "b.x"}, fila.Message{Kind: "a.x"}, fila.Message{Kind: "b.y"}, fila.Message{Kind: "a.y"}, fila.Message{Kind: "b.z"})
		log := redis.TopicLogKey(e.prefix, "mix")
		if n := e.raw.XLen(ctx, log).Val(); n != 5 {
			t.Errorf("topic log holds %d entries; want 5", n)
		}
		if st, err := c.QueueStats(ctx, "pa"); err != nil || st.Ready != 2 || st.OldestReadyAt.IsZero() {
			t.Errorf("QueueStats(pa) = %+v, %v; want the 2 events it takes ready", st, err)
		}
		if got := receiveKinds(t, c, "every", 5); len(got) != 5 {
			t.Errorf("every received %v", got)
		}
		if got := receiveKinds(t, c, "pa", 2); !slices.Equal(got, []string{"a.x", "a.y"}) {
			t.Errorf("pa received %v; want [a.x a.y]", got)
		}
		if st, err := c.QueueStats(ctx, "pa"); err != nil || st.Ready != 0 {
			t.Errorf("QueueStats(pa) after receiving = %+v, %v; want nothing ready", st, err)
		}
		// Events pa passes over move its cursor too: the log empties.
		pub("mix", 1, fila.Message{Kind: "b.w"})
		receiveKinds(t, c, "every", 1)
		receiveKinds(t, c, "pa", 0)
		if n := e.raw.XLen(ctx, log).Val(); n != 0 {
			t.Errorf("topic log holds %d entries after both subscriptions read it; want it trimmed to none", n)
		}

		// Nothing is stored when no subscription takes the message.
		sub("only", "pa", "a.*")
		pub("only", 0, fila.Message{Kind: "b.x"})
		if n := e.raw.XLen(ctx, redis.TopicLogKey(e.prefix, "only")).Val(); n != 0 {
			t.Errorf("topic log holds %d entries after a publish no subscription takes; want none", n)
		}

		// Logged and copied-at-publish messages: each subscription counted once.
		sub("both", "qa", "a.#")
		sub("both", "qb", "b.#")
		sub("both", "qc", "c.#")
		pub("both", 2, fila.Message{Kind: "a.1"}, fila.Message{Kind: "b.1", DedupKey: "k-b1"})
		pub("both", 1, fila.Message{Kind: "a.2"}, fila.Message{Kind: "a.3", Delay: 50 * time.Millisecond})
		pub("both", 2, fila.Message{Kind: "a.4"}, fila.Message{Kind: "a.5", DedupKey: "k-a5"}, fila.Message{Kind: "b.2", Delay: time.Millisecond})
		if got := receiveKinds(t, c, "qa", 5); !slices.Equal(got, []string{"a.1", "a.2", "a.3", "a.4", "a.5"}) {
			t.Errorf("qa received %v", got)
		}
		if got := receiveKinds(t, c, "qb", 2); !slices.Equal(got, []string{"b.1", "b.2"}) {
			t.Errorf("qb received %v", got)
		}
		receiveKinds(t, c, "qc", 0)
	})
}

// TestTopicPatternAppliesFromSubscribe: a pattern added to a subscription
// applies to what is published after it is added, not to the log's older
// events the subscription has not copied yet; subscribing without a pattern
// likewise, after which the queue's side forgets its patterns.
func TestTopicPatternAppliesFromSubscribe(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	c := e.client(t, redis.Options{})
	sub := func(q, p string) {
		t.Helper()
		if err := c.TopicSubscribe(ctx, "grow", q, fila.KindPattern(p)); err != nil {
			t.Fatal(err)
		}
	}
	pub := func(kinds ...string) {
		t.Helper()
		for _, k := range kinds {
			if _, err := c.Publish(ctx, "grow", fila.Message{Kind: k}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sub("every", "")
	sub("q", "a.*")
	pub("a.old", "b.old")
	sub("q", "b.*")
	pub("b.new", "c.mid")
	sub("q", "")
	pub("c.new")
	subs, err := c.TopicSubscriptions(ctx, "grow")
	if want := []fila.Subscription{{Queue: "every"}, {Queue: "q"}}; err != nil || !reflect.DeepEqual(subs, want) {
		t.Errorf("TopicSubscriptions = %v, %v; want %v", subs, err, want)
	}
	pats := redis.QueueTopicPatternsKey(e.prefix, "q")
	if !e.raw.HExists(ctx, pats, "grow").Val() {
		t.Errorf("q's side forgot its patterns before it copied the events they apply to")
	}
	if got := receiveKinds(t, c, "q", 3); !slices.Equal(got, []string{"a.old", "b.new", "c.new"}) {
		t.Errorf("q received %v; want [a.old b.new c.new]", got)
	}
	if e.raw.HExists(ctx, pats, "grow").Val() {
		t.Errorf("q's side keeps its patterns after copying past the point from which it takes every kind")
	}
	receiveKinds(t, c, "every", 5)
}

// TestTopicLogAdoptsLegacyPatterns: subscriptions kept as marks with
// patterns ("sub/<queue>/<pattern>", the portable layer's) are adopted
// with their patterns; a subscription with a mark without a pattern takes
// every kind; this version writes such marks, and unsubscribing deletes
// every mark of the queue.
func TestTopicLogAdoptsLegacyPatterns(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	d := e.driver(t, redis.Options{})
	for _, m := range []string{"sub/pat/a.*", "sub/pat/b.*", "sub/both/x", "sub/both"} {
		if _, err := d.MarkSet(ctx, "fila.topic.old", m, time.Time{}, false); err != nil {
			t.Fatal(err)
		}
	}
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	subs, err := c.TopicSubscriptions(ctx, "old")
	want := []fila.Subscription{{Queue: "both"}, {Queue: "pat", Patterns: []string{"a.*", "b.*"}}}
	if err != nil || !reflect.DeepEqual(subs, want) {
		t.Errorf("TopicSubscriptions = %v, %v; want %v", subs, err, want)
	}
	for _, k := range []string{"a.1", "b.1", "c.1"} {
		if _, err := c.Publish(ctx, "old", fila.Message{Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	if got := receiveKinds(t, c, "pat", 2); !slices.Equal(got, []string{"a.1", "b.1"}) {
		t.Errorf("pat received %v; want [a.1 b.1]", got)
	}
	if got := receiveKinds(t, c, "both", 3); !slices.Equal(got, []string{"a.1", "b.1", "c.1"}) {
		t.Errorf("both received %v; want every kind", got)
	}
	if err := c.TopicSubscribe(ctx, "old", "fresh", fila.KindPattern("z.#")); err != nil {
		t.Fatal(err)
	}
	if err := c.TopicUnsubscribe(ctx, "old", "pat"); err != nil {
		t.Fatal(err)
	}
	marks, err := d.MarkList(ctx, "fila.topic.old", "sub/")
	if want := []string{"sub/both", "sub/both/x", "sub/fresh/z.#"}; err != nil || !slices.Equal(marks, want) {
		t.Errorf("marks = %v, %v; want %v", marks, err, want)
	}
}
