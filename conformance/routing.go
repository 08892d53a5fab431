package conformance

import (
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// Routing by kind pattern (contract: fan-out): a subscription made with a
// kind pattern takes the topic's messages whose kind matches it, in AMQP
// topic syntax, and only those.

// routePatterns are the patterns testTopicKindPatterns subscribes with,
// edge cases included: "#" alone, "#" first, last and in the middle, "*"
// alone and beside "#", wildcard characters inside a word (literal there),
// and a pattern with an empty word.
var routePatterns = []string{
	"#", "*", "a", "a.*", "a.#", "#.a", "a.#.b", "#.b.#", "*.*", "*.#", "a.*.b", "a*", "a..b",
	"order.*.refunded", "*.brazil.#",
}

// routeKinds are the kinds it publishes: one word, several, empty words
// (first, middle, last), a word holding '*', and a kind of many words.
var routeKinds = []string{
	"a", "b", "ab", "a*", "a.b", "b.a", "a.b.c", "a..b", "a.", ".a", "x.a", "a.x.y.b", "x.b.y",
	"order.brazil.refunded", "order.refunded", "order.brazil.created.late", "w.x.y.z.a",
}

// testTopicKindPatterns: every subscription gets exactly the messages whose
// kind its pattern matches (fila.KindMatch, the same on every broker), a
// subscription without a pattern gets every one, and a publish reports how
// many subscriptions took it. Delayed and dedup-keyed messages (where the
// driver has dedup keys), which some drivers copy by another path, are
// routed the same way.
func (s *suite) testTopicKindPatterns(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	ctx := ctxTimeout(t, 60*time.Second)
	base := s.queue(t)
	queues := make([]string, len(routePatterns)+1)
	for i, p := range routePatterns {
		queues[i] = base + "-" + strconv.Itoa(i)
		if err := c.TopicSubscribe(ctx, topic, queues[i], fila.KindPattern(p)); err != nil {
			t.Fatalf("TopicSubscribe(%s, %s, KindPattern(%q)): %v", topic, queues[i], p, err)
		}
	}
	all := base + "-all"
	queues[len(routePatterns)] = all
	if err := c.TopicSubscribe(ctx, topic, all); err != nil {
		t.Fatalf("TopicSubscribe(%s, %s): %v", topic, all, err)
	}
	pattern := func(i int) string {
		if i < len(routePatterns) {
			return routePatterns[i]
		}
		return ""
	}
	if s.has(FeatureTopicList) {
		got, err := c.TopicSubscriptions(ctx, topic)
		var want []fila.Subscription
		for i, q := range queues {
			sub := fila.Subscription{Queue: q}
			if p := pattern(i); p != "" {
				sub.Patterns = []string{p}
			}
			want = append(want, sub)
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Queue < want[j].Queue })
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("TopicSubscriptions = %v, %v; want %v", got, err, want)
		}
	}

	// One publish per kind, so that its subscription count is the kind's.
	published := map[string]string{} // id -> kind
	for _, kind := range routeKinds {
		n := 0
		for i := range queues {
			if fila.KindMatch(pattern(i), kind) {
				n++
			}
		}
		id := publish(t, c, topic, n, fila.Message{Kind: kind, Body: []byte(kind)})[0]
		published[id] = kind
	}
	// A batch of mixed kinds, a delayed message and a dedup-keyed one.
	for i, id := range publish(t, c, topic, -1,
		fila.Message{Kind: "a.b", Body: []byte("batch a.b")},
		fila.Message{Kind: "zzz", Body: []byte("batch zzz")},
		fila.Message{Kind: "x.a", Body: []byte("batch x.a")},
	) {
		published[id] = []string{"a.b", "zzz", "x.a"}[i]
	}
	extra := []fila.Message{{Kind: "a.x.y.b", Body: []byte("delayed"), Delay: 300 * time.Millisecond}}
	if s.has(FeatureDedup) {
		extra = append(extra, fila.Message{Kind: "order.chile.refunded", Body: []byte("dedup"), DedupKey: "route-" + base})
	}
	for _, m := range extra {
		published[publish(t, c, topic, -1, m)[0]] = m.Kind
	}

	for i, q := range queues {
		p := pattern(i)
		want := map[string]string{} // copy id -> kind
		for id, kind := range published {
			if fila.KindMatch(p, kind) {
				want[fila.CopyID(id, q)] = kind
			}
		}
		got := map[string]string{}
		if len(want) > 0 {
			for id, d := range drain(t, c, q, len(want), 30*time.Second) {
				got[id] = d.Kind
			}
		}
		s.expectNone(t, c, q, 300*time.Millisecond, "subscription "+q+" with pattern "+strconv.Quote(p)+" after its copies")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("subscription with pattern %q got kinds %v, want %v", p, sortedValues(got), sortedValues(want))
		}
	}
}

// sortedValues returns m's values, sorted.
func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// testTopicPatternChange: subscribing again adds a pattern (the
// subscription takes the kinds either matches); unsubscribing and
// subscribing again with another pattern narrows it, for later publishes;
// a publish no pattern matches stores nothing; a bad pattern is refused
// with ErrInvalid and changes nothing.
func (s *suite) testTopicPatternChange(t *testing.T) {
	s.need(t, FeatureTopics)
	c := s.client(t)
	topic := s.topic(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	sub := func(p string) {
		t.Helper()
		if err := c.TopicSubscribe(ctx, topic, q, fila.KindPattern(p)); err != nil {
			t.Fatalf("TopicSubscribe(%s, %s, KindPattern(%q)): %v", topic, q, p, err)
		}
	}
	kinds := func(n int) []string {
		t.Helper()
		var out []string
		for _, d := range drain(t, c, q, n, 30*time.Second) {
			out = append(out, d.Kind)
		}
		s.expectNone(t, c, q, 300*time.Millisecond, "subscription "+q+" after its copies")
		slices.Sort(out)
		return out
	}

	wantErr(t, "TopicSubscribe with a pattern holding a control character",
		c.TopicSubscribe(ctx, topic, q, fila.KindPattern("a.\n")), fila.ErrInvalid)
	wantErr(t, "TopicSubscribe with a pattern too long",
		c.TopicSubscribe(ctx, topic, q, fila.KindPattern(strings.Repeat("a", fila.MaxKindLen+1))), fila.ErrInvalid)
	// The refused subscribes made no subscription.
	publish(t, c, topic, 0, fila.Message{Kind: "a.x"})

	sub("a.*")
	publish(t, c, topic, 0, fila.Message{Kind: "c.x"})
	publish(t, c, topic, 1, fila.Message{Kind: "a.x"}, fila.Message{Kind: "b.x"})
	if got := kinds(1); !reflect.DeepEqual(got, []string{"a.x"}) {
		t.Errorf("subscription to a.* got %v, want [a.x]", got)
	}

	sub("b.*")
	if s.has(FeatureTopicList) {
		got, err := c.TopicSubscriptions(ctx, topic)
		want := []fila.Subscription{{Queue: q, Patterns: []string{"a.*", "b.*"}}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("TopicSubscriptions after a second pattern = %v, %v; want %v", got, err, want)
		}
	}
	publish(t, c, topic, 1, fila.Message{Kind: "a.y"}, fila.Message{Kind: "b.y"}, fila.Message{Kind: "c.y"})
	if got := kinds(2); !reflect.DeepEqual(got, []string{"a.y", "b.y"}) {
		t.Errorf("subscription to a.* and b.* got %v, want [a.y b.y]", got)
	}

	if err := c.TopicUnsubscribe(ctx, topic, q); err != nil {
		t.Fatalf("TopicUnsubscribe: %v", err)
	}
	sub("c.*")
	publish(t, c, topic, 1, fila.Message{Kind: "a.z"}, fila.Message{Kind: "b.z"}, fila.Message{Kind: "c.z"})
	if got := kinds(1); !reflect.DeepEqual(got, []string{"c.z"}) {
		t.Errorf("subscription to c.* after unsubscribing from a.* and b.* got %v, want [c.z]", got)
	}

	// A subscription without a pattern takes every kind, whatever patterns
	// it had.
	if err := c.TopicSubscribe(ctx, topic, q); err != nil {
		t.Fatalf("TopicSubscribe without a pattern: %v", err)
	}
	publish(t, c, topic, 1, fila.Message{Kind: "a.w"}, fila.Message{Kind: "d.w"})
	if got := kinds(2); !reflect.DeepEqual(got, []string{"a.w", "d.w"}) {
		t.Errorf("subscription to c.* and every kind got %v, want [a.w d.w]", got)
	}
	if s.has(FeatureTopicList) {
		got, err := c.TopicSubscriptions(ctx, topic)
		want := []fila.Subscription{{Queue: q}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("TopicSubscriptions after subscribing without a pattern = %v, %v; want %v", got, err, want)
		}
	}
}
