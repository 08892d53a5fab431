package filapubsub

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
)

// gocloudURL turns a Fila URL into this package's URL with params added.
func gocloudURL(t testing.TB, filaURL string, params ...string) string {
	t.Helper()
	u, err := url.Parse(filaURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = SchemePrefix + u.Scheme
	q := u.Query()
	for i := 0; i < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestURLParameters(t *testing.T) {
	ctx := context.Background()
	o := &URLOpener{ClientOptions: []fila.Option{fila.WithLogger(quiet)}}
	defer o.Close()
	mux := new(pubsub.URLMux)
	for _, s := range Schemes {
		mux.RegisterTopic(s, o)
		mux.RegisterSubscription(s, o)
	}
	broker := "fila+mem://urlparams-" + unique()

	top, err := mux.OpenTopic(ctx, broker+"?require_subscription=true&kind=order.created&topic=orders&max_attempts=3")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Shutdown(ctx)
	var dt *topic
	if !top.As(&dt) {
		t.Fatal("no *topic")
	}
	if want := (TopicOptions{Kind: "order.created", MaxAttempts: 3, RequireSubscription: true}); dt.name != "orders" || dt.opts != want {
		t.Errorf("topic %q %+v, want orders %+v", dt.name, dt.opts, want)
	}

	sub, err := mux.OpenSubscription(ctx, broker+"?queue=orders.billing&topic=orders&lease=5s&nack_delay=1s&receive_wait=100ms&check_interval=-1s")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Shutdown(ctx)
	var ds *subscription
	if !sub.As(&ds) {
		t.Fatal("no *subscription")
	}
	want := SubscriptionOptions{Topic: "orders", Lease: 5 * time.Second, NackDelay: time.Second,
		ReceiveWait: 100 * time.Millisecond, CheckInterval: -time.Second}
	if ds.queue != "orders.billing" || ds.opts != want {
		t.Errorf("subscription %q %+v, want orders.billing %+v", ds.queue, ds.opts, want)
	}
	// It subscribed the queue, and shares the topic's client (the order
	// of the parameters does not matter).
	var tc, sc *fila.Client
	top.As(&tc)
	sub.As(&sc)
	if tc != sc {
		t.Error("the topic and the subscription of one broker URL have different clients")
	}
	if subs, err := tc.TopicSubscriptions(ctx, "orders"); err != nil || len(subs) != 1 || subs[0].Queue != "orders.billing" {
		t.Errorf("subscriptions of orders: %v, %v", subs, err)
	}
	other, err := mux.OpenTopic(ctx, "fila+mem://urlparams-other-"+unique()+"?topic=orders")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown(ctx)
	var oc *fila.Client
	other.As(&oc)
	if oc == tc {
		t.Error("two broker URLs share a client")
	}
	if err := top.Send(ctx, &pubsub.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Ack()

	// Close closes the clients: later sends fail with ErrClosed.
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := top.Send(ctx, &pubsub.Message{}); !errors.Is(err, fila.ErrClosed) || gcerrors.Code(err) != gcerrors.FailedPrecondition {
		t.Errorf("send after Close: %v", err)
	}
}

func TestURLErrors(t *testing.T) {
	ctx := context.Background()
	o := &URLOpener{ClientOptions: []fila.Option{fila.WithLogger(quiet)}}
	defer o.Close()
	broker := "fila+mem://urlerrors"
	for _, c := range []struct {
		url, want string
		sub       bool
	}{
		{broker, "parameter topic is required", false},
		{broker + "?topic=bad%20name", "topic name", false},
		{broker + "?topic=t&bogus=1", "bogus", false},
		{broker + "?topic=t&topic=u", "given 2 times", false},
		{broker + "?topic=t&queue=q", "belongs in a subscription URL", false},
		{broker + "?topic=t&max_attempts=many", "max_attempts", false},
		{broker + "?topic=t&require_subscription=maybe", "require_subscription", false},
		{broker + "?topic=t", "parameter queue is required", true},
		{broker + "?queue=q&kind=k", "belongs in a topic URL", true},
		{broker + "?queue=q&lease=forever", "lease", true},
		{broker + "?queue=q&lease=1ns", "lease", true},
		{broker + "?queue=q&nack_delay=-1s", "nack delay", true},
		{broker + "?queue=q&receive_wait=soon", "receive_wait", true},
		{broker + "?queue=q&check_interval=x", "check_interval", true},
		{broker + "?queue=q&fila_bogus=1", "fila_bogus", true},
		{broker + "?queue=bad%20queue", "queue name", true},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if c.sub {
			_, err = o.OpenSubscriptionURL(ctx, u)
		} else {
			_, err = o.OpenTopicURL(ctx, u)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("open %s: %v; want ErrInvalid mentioning %q", c.url, err, c.want)
		}
	}
}

// No error of the opener carries a password, wherever it fails.
func TestURLErrorsRedactCredentials(t *testing.T) {
	t.Parallel() // RabbitMQ takes seconds to refuse credentials
	const secret = "s3cr3t-pw"
	o := &URLOpener{ClientOptions: []fila.Option{fila.WithLogger(quiet)}}
	t.Cleanup(func() { _ = o.Close() })
	check := func(t *testing.T, raw string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(raw, "queue=") {
			_, err = o.OpenSubscriptionURL(ctx, u)
		} else {
			_, err = o.OpenTopicURL(ctx, u)
		}
		if err == nil {
			t.Errorf("open %s: no error", fila.Redact(raw))
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("error carries the password: %v", err)
		}
	}
	for _, raw := range []string{
		"fila+postgres://app:" + secret + "@127.0.0.1:1/db?topic=t&connect_timeout=2",
		"fila+postgres://app@127.0.0.1:1/db?password=" + secret + "&topic=t&connect_timeout=2",
		"fila+postgres://app:" + secret + "@127.0.0.1:1/db?topic=t&max_attempts=x",
		"fila+redis://:" + secret + "@127.0.0.1:1/0?topic=t",
		"fila+amqp://guest:" + secret + "@127.0.0.1:1/?topic=t",
		"fila+amqp://guest:" + secret + "@127.0.0.1:1/?queue=q&lease=x",
		"fila+mem://x:" + secret + "@h?topic=t&bogus=1",
		"fila+mongodb://app:" + secret + "@127.0.0.1:1/?topic=t&serverSelectionTimeoutMS=500&connectTimeoutMS=500",
		"fila+mysql://app:" + secret + "@127.0.0.1:1/db?topic=t&timeout=2s",
		"fila+mysql://app:" + secret + "@127.0.0.1:1/db?queue=q&timeout=x",
		"fila+postgres://app:" + secret + "@127.0.0.1:1/db?topic=t&queue=q",
	} {
		check(t, raw)
	}
	// Refused credentials on real servers.
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		u, _ := url.Parse(testenv.PostgresURL(t))
		u.User = url.UserPassword("nobody", secret)
		check(t, gocloudURL(t, u.String(), "topic", "t"))
	})
	t.Run("rabbitmq", func(t *testing.T) {
		t.Parallel()
		u, _ := url.Parse(testenv.RabbitMQURL(t))
		u.User = url.UserPassword("nobody", secret)
		check(t, gocloudURL(t, u.String(), "queue", "q"))
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		u, _ := url.Parse(testenv.MySQLURL(t))
		u.User = url.UserPassword("nobody", secret)
		check(t, gocloudURL(t, u.String(), "topic", "t"))
	})
}

// The schemes are registered with the default mux, and the default
// opener's clients are shared and closed by its Close.
func TestDefaultURLMux(t *testing.T) {
	ctx := context.Background()
	for _, s := range Schemes {
		if !pubsub.DefaultURLMux().ValidTopicScheme(s) || !pubsub.DefaultURLMux().ValidSubscriptionScheme(s) {
			t.Errorf("scheme %s is not registered", s)
		}
	}
	// Every Fila scheme has its fila+ scheme.
	for _, s := range fila.Schemes() {
		if !pubsub.DefaultURLMux().ValidTopicScheme(SchemePrefix + s) {
			t.Errorf("Fila scheme %s has no %s%s", s, SchemePrefix, s)
		}
	}
	broker := "fila+mem://defaultmux-" + unique()
	sub, err := pubsub.OpenSubscription(ctx, broker+"?queue=q&topic=t")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Shutdown(ctx)
	top, err := pubsub.OpenTopic(ctx, broker+"?topic=t")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Shutdown(ctx)
	if err := top.Send(ctx, &pubsub.Message{Body: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Ack()
	if string(m.Body) != "hi" {
		t.Errorf("body %q", m.Body)
	}
}
