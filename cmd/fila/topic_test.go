package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
)

// uncountedTopics keeps topics natively as RabbitMQ does: it cannot list a
// topic's subscriptions, and a publish reports "at least one" subscription
// (-1) instead of a count. It lets the commands' handling of both be tested
// on the in-memory broker.
type uncountedTopics struct {
	backend.Driver
	backend.StatsReader
	backend.QueueDeleter
	*subscriptions
}

// subscriptions are the topics of one clitest-uncounted URL host, kept
// across commands as memory.Named keeps the messages.
type subscriptions struct {
	mu   sync.Mutex
	subs map[string][]string
}

var uncounted = struct {
	sync.Mutex
	byHost map[string]*subscriptions
}{byHost: map[string]*subscriptions{}}

func init() {
	fila.Register("clitest-uncounted", func(_ context.Context, u *url.URL, _ backend.OpenOptions) (backend.Driver, error) {
		uncounted.Lock()
		defer uncounted.Unlock()
		s := uncounted.byHost[u.Host]
		if s == nil {
			s = &subscriptions{subs: map[string][]string{}}
			uncounted.byHost[u.Host] = s
		}
		d := memory.Named("uncounted" + u.Host).Open()
		return &uncountedTopics{Driver: d, StatsReader: d, QueueDeleter: d, subscriptions: s}, nil
	})
}

func (*uncountedTopics) DriverName() string { return "uncounted" }

var _ backend.Topics = (*uncountedTopics)(nil)

// TopicSubscribe ignores pattern: the tests that use this driver publish
// kinds every subscription takes.
func (d *uncountedTopics) TopicSubscribe(_ context.Context, topic, queue, _ string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.subs[topic], queue) {
		d.subs[topic] = append(d.subs[topic], queue)
	}
	return nil
}

func (d *uncountedTopics) TopicUnsubscribe(_ context.Context, topic, queue string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.subs[topic] = slices.DeleteFunc(d.subs[topic], func(q string) bool { return q == queue })
	return nil
}

func (*uncountedTopics) TopicSubscriptions(context.Context, string) ([]backend.Subscription, error) {
	return nil, backend.ErrUnsupported
}

func (d *uncountedTopics) TopicPublish(ctx context.Context, topic string, msgs []backend.Message) (int, error) {
	d.mu.Lock()
	subs := slices.Clone(d.subs[topic])
	d.mu.Unlock()
	for _, q := range subs {
		copies := slices.Clone(msgs)
		for i := range copies {
			copies[i].ID = backend.CopyID(msgs[i].ID, q)
		}
		if _, err := d.Enqueue(ctx, q, copies); err != nil {
			return 0, err
		}
	}
	if len(subs) == 0 {
		return 0, nil
	}
	return -1, nil
}

// receiveAll receives from q until it has n deliveries, and acks them.
func receiveAll(t *testing.T, c *fila.Client, q string, n int) []*fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got []*fila.Delivery
	for len(got) < n {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: n - len(got)})
		if err != nil {
			t.Fatalf("receive from %s (%d of %d so far): %v", q, len(got), n, err)
		}
		got = append(got, ds...)
	}
	if err := c.AckBatch(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTopicCommands(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		ctx := context.Background()
		topic := unique("topic")
		email, audit, other := unique("email"), unique("audit"), unique("other")
		for _, q := range []string{email, audit, other} {
			testenv.CleanupQueue(t, c, q)
		}
		t.Cleanup(func() {
			// Drops the marks of the subscriptions still standing.
			for _, q := range []string{email, audit} {
				_ = c.TopicUnsubscribe(context.Background(), topic, q)
			}
		})

		r := cli(t, "", "--url", url, "topic", "subscribe", topic, email)
		skipUnsupported(t, r, b, func() error { return c.TopicSubscribe(ctx, topic, email) })
		if r.code != 0 || r.stdout != fmt.Sprintf("subscribed queue %q to topic %q\n", email, topic) {
			t.Fatalf("topic subscribe: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		ok(t, "", "--url", url, "topic", "subscribe", topic, audit)
		ok(t, "", "--url", url, "topic", "subscribe", topic, audit) // twice is not an error

		_, err := c.TopicSubscriptions(ctx, topic)
		listable := !errors.Is(err, fila.ErrUnsupported)
		if listable {
			r := cli(t, "", "--url", url, "topic", "list", topic)
			if r.code != 0 || r.stdout != strings.Join(sorted(email, audit), "\n")+"\n" || r.stderr != "" {
				t.Errorf("topic list: exit %d, stdout %q, stderr %q; want %s and %s, one per line", r.code, r.stdout, r.stderr, email, audit)
			}
		} else {
			fails(t, 4, "The broker cannot tell which queues subscribe to a topic", "", "--url", url, "topic", "list", topic)
		}

		// Publish: the id, then the count; each subscription gets its copy,
		// with the id CopyID(id, queue) and everything else as published.
		out := ok(t, "body from stdin", "--url", url, "topic", "publish", topic, "-k", "order.created",
			"--header", "tenant=acme", "--max-attempts", "4")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 2 || len(lines[0]) != 36 || !countLine(lines[1], topic, 2, b) {
			t.Fatalf("topic publish printed %q; want the id, then %q", out, publishSummary(topic, 2))
		}
		id := lines[0]
		for _, q := range []string{email, audit} {
			d := receiveAll(t, c, q, 1)[0]
			if d.ID != fila.CopyID(id, q) || d.Kind != "order.created" || string(d.Body) != "body from stdin" || d.Headers["tenant"] != "acme" {
				t.Errorf("the copy in %s = id %s kind %q body %q headers %v; want id %s, kind order.created, the body and tenant=acme",
					q, d.ID, d.Kind, d.Body, d.Headers, fila.CopyID(id, q))
			}
		}

		// Unsubscribe: a declined prompt changes nothing.
		if _, err := c.Enqueue(ctx, audit, fila.Message{Kind: "pending"}); err != nil {
			t.Fatal(err)
		}
		r = fails(t, 1, "aborted; nothing changed", "n\n", "--url", url, "topic", "unsubscribe", topic, audit)
		if !strings.Contains(r.stderr, fmt.Sprintf("Unsubscribe queue %q from topic %q and delete the queue", audit, topic)) || !strings.Contains(r.stderr, "[y/N]") {
			t.Errorf("unsubscribe prompt: %q", r.stderr)
		}
		if s, err := c.QueueStats(ctx, audit); err != nil || s.Ready != 1 {
			t.Fatalf("after the declined unsubscribe: %+v, %v; want the message kept", s, err)
		}
		if listable {
			if out := ok(t, "", "--url", url, "topic", "list", topic); !strings.Contains(out, audit) {
				t.Fatalf("after the declined unsubscribe the subscription is gone:\n%s", out)
			}
		}

		// Yes: the subscription ends and the queue is deleted with its message.
		r = cli(t, "y\n", "--url", url, "topic", "unsubscribe", topic, audit)
		if r.code != 0 || r.stdout != fmt.Sprintf("unsubscribed queue %q from topic %q and deleted the queue\n", audit, topic) {
			t.Fatalf("topic unsubscribe: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if !listable && !strings.Contains(r.stderr, "cannot tell whether queue") {
			t.Errorf("unsubscribe where subscriptions cannot be listed: no warning in %q", r.stderr)
		}
		if s, err := c.QueueStats(ctx, audit); err != nil || s.Ready+s.Leased+s.Dead != 0 {
			t.Errorf("after unsubscribe, the queue holds %+v, %v; want it deleted", s, err)
		}
		if listable {
			if out := ok(t, "", "--url", url, "topic", "list", topic); out != email+"\n" {
				t.Errorf("topic list after the unsubscribe: %q; want only %s", out, email)
			}
		}
		out = ok(t, "", "--url", url, "topic", "publish", topic, "-k", "order.created", "--body", "second")
		if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || !countLine(lines[1], topic, 1, b) {
			t.Errorf("publish after the unsubscribe printed %q; want %q", out, publishSummary(topic, 1))
		}
		if d := receiveAll(t, c, email, 1)[0]; string(d.Body) != "second" {
			t.Errorf("the remaining subscription got %q", d.Body)
		}
		if s, err := c.QueueStats(ctx, audit); err != nil || s.Ready != 0 {
			t.Errorf("the unsubscribed queue got a copy: %+v, %v", s, err)
		}

		if listable {
			// A queue that is no subscription of the topic is not deleted.
			if _, err := c.Enqueue(ctx, other, fila.Message{Kind: "keep"}); err != nil {
				t.Fatal(err)
			}
			fails(t, 1, fmt.Sprintf("queue %q is not a subscription of topic %q; nothing deleted", other, topic), "", "--url", url, "topic", "unsubscribe", topic, other, "--yes")
			if s, err := c.QueueStats(ctx, other); err != nil || s.Ready != 1 {
				t.Errorf("the queue that is no subscription: %+v, %v; want its message kept", s, err)
			}
			// Running unsubscribe again finds nothing to do.
			if out := ok(t, "", "--url", url, "topic", "unsubscribe", topic, audit, "--yes"); !strings.HasPrefix(out, "nothing to do") {
				t.Errorf("second unsubscribe: %q", out)
			}
		}

		// A topic nobody subscribed to stores nothing, and says so.
		empty := unique("nosubs")
		r = cli(t, "", "--url", url, "topic", "publish", empty, "-k", "k", "--body", "x")
		if r.code != 0 || !strings.HasSuffix(r.stdout, fmt.Sprintf("copied to no subscription of topic %q: nothing stored\n", empty)) ||
			!strings.Contains(r.stderr, "has no subscriptions: nothing was stored; add one with 'fila topic subscribe "+empty+" QUEUE'") {
			t.Errorf("publish without subscriptions: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if listable {
			r = cli(t, "", "--url", url, "topic", "list", empty)
			if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "has no subscriptions (a misspelt topic has none either)") {
				t.Errorf("list without subscriptions: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
		}
	})
}

// countLine reports whether line says that n subscriptions of topic got a
// copy; on RabbitMQ, which cannot count them, "at least one" will do.
// TestTopicPatternCommands: fila topic subscribe --pattern routes by kind,
// and fila topic list prints the patterns after the queue.
func TestTopicPatternCommands(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		ctx := context.Background()
		topic := unique("ptopic")
		refunds, all := unique("refunds"), unique("all")
		for _, q := range []string{refunds, all} {
			testenv.CleanupQueue(t, c, q)
		}
		t.Cleanup(func() {
			for _, q := range []string{refunds, all} {
				_ = c.TopicUnsubscribe(context.Background(), topic, q)
			}
		})
		r := cli(t, "", "--url", url, "topic", "subscribe", topic, refunds, "--pattern", "order.*.refunded")
		skipUnsupported(t, r, b, func() error { return c.TopicSubscribe(ctx, topic, refunds) })
		if want := fmt.Sprintf("subscribed queue %q to the kinds of topic %q matching %q\n", refunds, topic, "order.*.refunded"); r.code != 0 || r.stdout != want {
			t.Fatalf("topic subscribe --pattern: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
		}
		ok(t, "", "--url", url, "topic", "subscribe", topic, refunds, "--pattern", "#.chargeback")
		ok(t, "", "--url", url, "topic", "subscribe", topic, all)
		if _, err := c.TopicSubscriptions(ctx, topic); !errors.Is(err, fila.ErrUnsupported) {
			out := ok(t, "", "--url", url, "topic", "list", topic)
			want := map[bool]string{
				true:  refunds + "\t#.chargeback\torder.*.refunded\n" + all + "\n",
				false: all + "\n" + refunds + "\t#.chargeback\torder.*.refunded\n",
			}[refunds < all]
			if out != want {
				t.Errorf("topic list = %q, want %q", out, want)
			}
		}
		for kind, n := range map[string]int{"order.br.refunded": 2, "card.chargeback": 2, "order.created": 1} {
			out := ok(t, "", "--url", url, "topic", "publish", topic, "-k", kind, "--body", kind)
			if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || !countLine(lines[1], topic, n, b) {
				t.Errorf("publish of %s printed %q; want %q", kind, out, publishSummary(topic, n))
			}
		}
		var kinds []string
		for _, d := range receiveAll(t, c, refunds, 2) {
			kinds = append(kinds, d.Kind)
		}
		if slices.Sort(kinds); !slices.Equal(kinds, []string{"card.chargeback", "order.br.refunded"}) {
			t.Errorf("the pattern subscription got %v, want the refund and the chargeback", kinds)
		}
		if st, err := c.QueueStats(ctx, refunds); err != nil || st.Ready != 0 {
			t.Errorf("the pattern subscription holds %+v, %v after its two copies; want nothing more", st, err)
		}
		if len(receiveAll(t, c, all, 3)) != 3 {
			t.Error("the subscription without a pattern did not get every kind")
		}
	})
}

func countLine(line, topic string, n int, b broker) bool {
	return line == publishSummary(topic, n) || b.name == "rabbitmq" && line == publishSummary(topic, -1)
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestTopicBadInput(t *testing.T) {
	t.Parallel()
	u := "mem://" + unique("topicbad")
	for _, args := range [][]string{
		{"subscribe", "bad topic!", "q"},
		{"unsubscribe", "bad topic!", "q", "--yes"},
		{"list", "bad topic!"},
		{"publish", "bad topic!", "-k", "k", "--body", "x"},
		{"list", strings.Repeat("x", fila.MaxTopicNameLen+1)},
	} {
		fails(t, 2, "invalid argument: topic name", "", append([]string{"--url", u, "topic"}, args...)...)
	}
	fails(t, 2, `queue name "bad queue" has ' '`, "", "--url", u, "topic", "subscribe", "orders", "bad queue")
	fails(t, 2, `queue name "bad queue" has ' '`, "", "--url", u, "topic", "unsubscribe", "orders", "bad queue", "--yes")
	fails(t, 2, `names starting with "fila.topic." are kept for topics`, "", "--url", u, "topic", "subscribe", "orders", "fila.topic.orders")
	fails(t, 2, `kind pattern "a.\x01" must be 1 to 255 bytes of printable UTF-8`, "", "--url", u, "topic", "subscribe", "orders", "q", "--pattern", "a.\x01")
	fails(t, 2, "name a topic and a queue (fila topic subscribe TOPIC QUEUE)", "", "--url", u, "topic", "subscribe", "orders")
	fails(t, 2, "name a topic and a queue (fila topic unsubscribe TOPIC QUEUE)", "", "--url", u, "topic", "unsubscribe", "orders", "a", "b")
	fails(t, 2, "name one topic (fila topic list TOPIC)", "", "--url", u, "topic", "list")
	fails(t, 2, "name one topic (fila topic publish TOPIC)", "", "--url", u, "topic", "publish", "-k", "k", "--body", "x")
	fails(t, 2, `required flag(s) "kind" not set`, "", "--url", u, "topic", "publish", "orders", "--body", "x")
	fails(t, 2, `--header "novalue" must be KEY=VALUE`, "", "--url", u, "topic", "publish", "orders", "-k", "k", "--body", "x", "--header", "novalue")
	fails(t, 2, "--run-at", "", "--url", u, "topic", "publish", "orders", "-k", "k", "--body", "x", "--run-at", "tomorrow")
	fails(t, 2, "invalid argument", "", "--url", u, "topic", "publish", "orders", "-k", "k", "--body", "x", "--delay", "-1s")
	fails(t, 2, "too large", strings.Repeat("x", fila.DefaultMaxBodyBytes+1), "--url", u, "topic", "publish", "orders", "-k", "k")
	fails(t, 2, "unknown flag: --queue", "", "--url", u, "topic", "publish", "orders", "-k", "k", "--queue", "q")
	// Nothing was subscribed nor stored by the refusals.
	c := client(t, u)
	if subs, err := c.TopicSubscriptions(context.Background(), "orders"); err != nil || len(subs) != 0 {
		t.Errorf("after the refusals: subscriptions %v, %v", subs, err)
	}
}

// TestTopicUnsupported: a driver without topics exits 4 for every command
// (without the hints meant for a driver that only cannot list them); a
// driver that keeps topics but can neither list nor count subscriptions
// (RabbitMQ's way) exits 4 for list with what to do instead, warns at
// unsubscribe and prints "at least one" at publish.
func TestTopicUnsupported(t *testing.T) {
	t.Parallel()
	bare := "clitest-bare://" + unique("topics")
	for _, args := range [][]string{
		{"subscribe", "orders", "q"},
		{"unsubscribe", "orders", "q", "--yes"},
		{"list", "orders"},
		{"publish", "orders", "-k", "k", "--body", "x"},
		{"rewind", "orders", "q", "--ago", "1h"},
	} {
		r := fails(t, 4, "the bare driver does not support topics", "", append([]string{"--url", bare, "topic"}, args...)...)
		if strings.Contains(r.stderr, "cannot list") || strings.Contains(r.stderr, "cannot tell") {
			t.Errorf("fila topic %s on a driver without topics: %q", args[0], r.stderr)
		}
	}

	u := "clitest-uncounted://" + unique("topics")
	ok(t, "", "--url", u, "topic", "subscribe", "orders", "orders.email")
	fails(t, 4, "the uncounted driver does not support listing subscriptions\nThe broker cannot tell which queues subscribe to a topic", "", "--url", u, "topic", "list", "orders")
	out := ok(t, "", "--url", u, "topic", "publish", "orders", "-k", "k", "--body", "x")
	if !strings.HasSuffix(out, "\ncopied to at least one subscription of topic \"orders\"\n") {
		t.Errorf("publish where the driver cannot count: %q", out)
	}
	r := cli(t, "y\n", "--url", u, "topic", "unsubscribe", "orders", "orders.email")
	if r.code != 0 || !strings.Contains(r.stderr, `fila: warning: the uncounted driver cannot list subscriptions: this command cannot tell whether queue "orders.email" is a subscription of topic "orders"`) {
		t.Errorf("unsubscribe where the driver cannot list: exit %d, stderr %q", r.code, r.stderr)
	}
	if s, err := client(t, u).QueueStats(context.Background(), "orders.email"); err != nil || s.Ready != 0 {
		t.Errorf("after unsubscribe: %+v, %v; want the copy deleted", s, err)
	}
}

func TestPublishSummary(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{
		-1: `copied to at least one subscription of topic "t"`,
		0:  `copied to no subscription of topic "t": nothing stored`,
		1:  `copied to 1 subscription of topic "t"`,
		3:  `copied to 3 subscriptions of topic "t"`,
	} {
		if got := publishSummary("t", n); got != want {
			t.Errorf("publishSummary(%d) = %q; want %q", n, got, want)
		}
	}
}

// TestTopicCredentialsNeverShown: the topic commands redact the URL as the
// others do.
func TestTopicCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"postgres://u:S3cretUser@127.0.0.1:1/db?password=S3cretPW&sslmode=disable",
		"amqp://guest:S3cretUser@127.0.0.1:1/",
	} {
		for _, args := range [][]string{
			{"topic", "subscribe", "orders", "q"},
			{"topic", "publish", "orders", "-k", "k", "--body", "x"},
		} {
			r := cli(t, "", append([]string{"--url", raw, "--connect-timeout", "2s"}, args...)...)
			if r.code != exitUnreachable || strings.Contains(r.stderr+r.stdout, "S3cret") {
				t.Errorf("fila --url %s %s: exit %d, stderr %q; want 3 without a credential", fila.Redact(raw), strings.Join(args, " "), r.code, r.stderr)
			}
		}
	}
}

// TestTopicRewindCommand: fila topic rewind delivers a subscription's copies
// again on PostgreSQL's log mode, refuses bad flags (exit 2), and exits 4
// where the driver cannot rewind.
func TestTopicRewindCommand(t *testing.T) {
	t.Parallel()
	u := withParam(withParam(testenv.PostgresURL(t), "fila_migrate", "true"), "fila_mode", "log")
	u = withParam(u, "fila_topic_retention", "1h")
	c := client(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic, q := unique("rewind"), unique("rewound")
	testenv.CleanupQueue(t, c, q)
	t.Cleanup(func() { _ = c.TopicUnsubscribe(context.Background(), topic, q) })
	ok(t, "", "--url", u, "topic", "subscribe", topic, q)
	id, err := c.Publish(ctx, topic, fila.Message{Kind: "k", Body: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	take := func(what string) {
		t.Helper()
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
		if err != nil || len(ds) != 1 || ds[0].ID != fila.CopyID(id, q) || ds[0].Attempt != 1 {
			t.Fatalf("%s: received %d deliveries, %v; want the copy %s at attempt 1", what, len(ds), err, fila.CopyID(id, q))
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	take("first delivery")
	out := ok(t, "", "--url", u, "topic", "rewind", topic, q, "--ago", "1h")
	if !strings.HasPrefix(out, fmt.Sprintf("rewound queue %q of topic %q to ", q, topic)) {
		t.Errorf("fila topic rewind printed %q", out)
	}
	take("after fila topic rewind --ago 1h")
	ok(t, "", "--url", u, "topic", "rewind", topic, q, "--to", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	take("after fila topic rewind --to an hour ago")

	fails(t, exitUsage, "say where to rewind to", "", "--url", u, "topic", "rewind", topic, q)
	fails(t, exitUsage, "not both", "", "--url", u, "topic", "rewind", topic, q, "--ago", "1h", "--to", "2026-01-02T15:04:05Z")
	fails(t, exitUsage, "is not an RFC 3339 time", "", "--url", u, "topic", "rewind", topic, q, "--to", "yesterday")
	fails(t, exitUnsupported, "rewinding subscriptions", "", "--url", "mem://"+unique("cli"), "topic", "rewind", topic, q, "--ago", "1h")
}
