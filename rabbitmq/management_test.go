package rabbitmq_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
)

// openWith opens a driver on the test RabbitMQ with o's other fields,
// closed when the test ends.
func openWith(t *testing.T, o rabbitmq.Options) *rabbitmq.Driver {
	t.Helper()
	if o.URL == "" {
		o.URL = testenv.RabbitMQURL(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := rabbitmq.New(ctx, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// With the management API, QueueList names the Fila queues of the
// driver's prefix, whatever RabbitMQ queue they have (a main queue, only a
// level's, only a mark), and no other prefix's; TopicSubscriptions reads a
// topic's bindings: a subscription without a pattern, one with patterns,
// and one made both ways (it takes every kind).
func TestManagementListing(t *testing.T) {
	api := testenv.RabbitMQManagementURL(t)
	prefix := "mgmt" + strings.ReplaceAll(uniqueQueue(t)[len("rmqtest-TestManagementListing-"):], "-", "")
	d := openWith(t, rabbitmq.Options{Prefix: prefix, ManagementURL: api})
	other := openWith(t, rabbitmq.Options{Prefix: prefix + "x", ManagementURL: api})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	queues := []string{"plain", "only.level2", "marked", "a.b-c_d"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range append(queues, "sub.all", "sub.some", "sub.both") {
			_ = d.QueueDelete(ctx, q)
		}
		_ = other.QueueDelete(ctx, "elsewhere")
		_ = rabbitmq.DeleteTopicExchange(ctx, d, "events")
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Enqueue(ctx, "plain", fila.Message{Kind: "k"})
	must(err)
	_, err = c.Enqueue(ctx, "only.level2", fila.Message{Kind: "k", Priority: 2})
	must(err)
	_, err = d.MarkSet(ctx, "marked", "m", time.Time{}, false)
	must(err)
	_, err = c.Enqueue(ctx, "a.b-c_d", fila.Message{Kind: "k"})
	must(err)
	_, err = other.Enqueue(ctx, "elsewhere", []backend.Message{{ID: "x", Kind: "k", MaxAttempts: 1}})
	must(err)

	must(c.TopicSubscribe(ctx, "events", "sub.all"))
	must(c.TopicSubscribe(ctx, "events", "sub.some", fila.KindPattern("order.*")))
	must(c.TopicSubscribe(ctx, "events", "sub.some", fila.KindPattern("#.refunded")))
	must(c.TopicSubscribe(ctx, "events", "sub.both", fila.KindPattern("order.*")))
	must(c.TopicSubscribe(ctx, "events", "sub.both"))

	got, err := c.QueueList(ctx)
	must(err)
	want := append(slices.Clone(queues), "sub.all", "sub.both", "sub.some")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("QueueList = %v, want %v", got, want)
	}
	subs, err := c.TopicSubscriptions(ctx, "events")
	must(err)
	wantSubs := []fila.Subscription{{Queue: "sub.all"}, {Queue: "sub.both"}, {Queue: "sub.some", Patterns: []string{"#.refunded", "order.*"}}}
	if !slices.EqualFunc(subs, wantSubs, func(a, b fila.Subscription) bool {
		return a.Queue == b.Queue && slices.Equal(a.Patterns, b.Patterns)
	}) {
		t.Errorf("TopicSubscriptions = %+v, want %+v", subs, wantSubs)
	}
	must(c.TopicUnsubscribe(ctx, "events", "sub.some"))
	subs, err = c.TopicSubscriptions(ctx, "events")
	must(err)
	if len(subs) != 2 || subs[0].Queue != "sub.all" || subs[1].Queue != "sub.both" {
		t.Errorf("after unsubscribing sub.some, TopicSubscriptions = %+v", subs)
	}
	if subs, err := c.TopicSubscriptions(ctx, "never.used"); err != nil || len(subs) != 0 {
		t.Errorf("TopicSubscriptions of a topic never used = %+v, %v; want none", subs, err)
	}
}

// Without a management URL, listing answers ErrUnsupported and says what
// to set.
func TestManagementMissing(t *testing.T) {
	d := openWith(t, rabbitmq.Options{})
	ctx := context.Background()
	if _, err := d.QueueList(ctx); !errors.Is(err, fila.ErrUnsupported) || !strings.Contains(err.Error(), "fila_management_url") {
		t.Errorf("QueueList without a management URL: %v; want ErrUnsupported naming fila_management_url", err)
	}
	if _, err := d.TopicSubscriptions(ctx, "t"); !errors.Is(err, fila.ErrUnsupported) || !strings.Contains(err.Error(), "fila_management_url") {
		t.Errorf("TopicSubscriptions without a management URL: %v; want ErrUnsupported naming fila_management_url", err)
	}
}

// Credentials never show: fila_management_url with a user part is refused
// (a query parameter's password would be quoted with the URL); a wrong
// password is ErrInvalid, and an address where nothing answers
// ErrUnavailable, neither with the password in its message.
func TestManagementCredentials(t *testing.T) {
	api := testenv.RabbitMQManagementURL(t)
	raw := testenv.RabbitMQURL(t)
	ctx := context.Background()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("fila_management_url", "http://guest:s3cr3t-pw@127.0.0.1:15672")
	u.RawQuery = q.Encode()
	if _, err := rabbitmq.Open(ctx, u, backend.OpenOptions{}); !errors.Is(err, fila.ErrInvalid) || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("Open with a password in fila_management_url: %v; want ErrInvalid without the password", err)
	}

	au, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	au.User = url.UserPassword("guest", "s3cr3t-pw")
	d := openWith(t, rabbitmq.Options{ManagementURL: au.String()})
	if _, err := d.QueueList(ctx); !errors.Is(err, fila.ErrInvalid) || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("QueueList with a wrong management password: %v; want ErrInvalid without the password", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing answers there now
	amqpURL, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := amqpURL.User.Password()
	d = openWith(t, rabbitmq.Options{ManagementURL: "http://" + addr})
	_, err = d.QueueList(ctx)
	if !errors.Is(err, fila.ErrUnavailable) || (pw != "" && strings.Contains(err.Error(), ":"+pw+"@")) {
		t.Errorf("QueueList with nothing at the management address: %v; want ErrUnavailable without credentials", err)
	}
	if _, err := rabbitmq.New(ctx, rabbitmq.Options{URL: raw, ManagementURL: "ftp://x"}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("New with a management URL that is not http(s): %v; want ErrInvalid", err)
	}
}

// With the management API, QueueStats counts the delay queues another
// instance created (it names them); without it, an instance sees only
// the delay queues it published to.
func TestManagementDelayedCounts(t *testing.T) {
	api := testenv.RabbitMQManagementURL(t)
	q := uniqueQueue(t)
	a := openWith(t, rabbitmq.Options{})
	withAPI := openWith(t, rabbitmq.Options{ManagementURL: api})
	without := openWith(t, rabbitmq.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = a.QueueDelete(ctx, q)
	})
	_, err := a.Enqueue(ctx, q, []backend.Message{
		{ID: "late0", Kind: "k", MaxAttempts: 1, Delay: time.Hour},
		{ID: "late2", Kind: "k", MaxAttempts: 1, Delay: 2 * time.Hour, Priority: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := withAPI.QueueStats(ctx, q); err != nil || st.Delayed != 2 {
		t.Errorf("QueueStats through an instance with the management API = %+v, %v; want 2 delayed", st, err)
	}
	if st, err := without.QueueStats(ctx, q); err != nil || st.Delayed != 0 {
		t.Errorf("QueueStats through an instance without it = %+v, %v; want 0 delayed (it cannot see delay queues it did not use)", st, err)
	}
}
