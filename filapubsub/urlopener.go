package filapubsub

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"gocloud.dev/pubsub"
)

// SchemePrefix starts the URL schemes of this package: "fila+" followed by
// a Fila scheme (fila+postgres://…).
const SchemePrefix = "fila+"

// Schemes are the URL schemes registered with pubsub.DefaultURLMux: "fila+"
// before each scheme of Fila's drivers. They are registered whether or not
// the driver package is imported (its own init registers it with Fila,
// in no particular order with this one); opening a URL whose driver is not
// imported fails with Fila's error naming the package to import. To use a
// scheme of another driver, register a URLOpener for "fila+<scheme>" with a
// pubsub.URLMux.
var Schemes = []string{
	"fila+mem",
	"fila+postgres", "fila+postgresql",
	"fila+redis", "fila+rediss",
	"fila+amqp", "fila+amqps",
	"fila+mongodb", "fila+mongodb+srv",
	"fila+mysql",
}

var defaultOpener = new(URLOpener)

func init() {
	for _, s := range Schemes {
		pubsub.DefaultURLMux().RegisterTopic(s, defaultOpener)
		pubsub.DefaultURLMux().RegisterSubscription(s, defaultOpener)
	}
}

// DefaultURLOpener returns the URLOpener registered with
// pubsub.DefaultURLMux, so that a program can set its options before the
// first open, and Close the clients it opened when done.
func DefaultURLOpener() *URLOpener { return defaultOpener }

// URLOpener opens topics and subscriptions from fila+<scheme> URLs; see the
// package documentation for the parameters. It opens one *fila.Client per
// distinct broker URL (the URL without this package's parameters) and
// shares it among the topics and subscriptions opened from it. Those
// clients stay open until Close; topics and subscriptions never close them.
//
// Set the fields before the first open; the methods are safe for
// concurrent use.
type URLOpener struct {
	// ClientOptions are passed to fila.Open for every client.
	ClientOptions []fila.Option
	// TopicOptions are the defaults of the topics opened; URL parameters
	// override them.
	TopicOptions TopicOptions
	// SubscriptionOptions are the defaults of the subscriptions opened;
	// URL parameters override them.
	SubscriptionOptions SubscriptionOptions

	mu      sync.Mutex
	clients map[string]*fila.Client
}

// Parameters of topic and subscription URLs.
var (
	topicParams = map[string]bool{"topic": true, "kind": true, "max_attempts": true, "require_subscription": true}
	subParams   = map[string]bool{"queue": true, "topic": true, "lease": true, "nack_delay": true,
		"receive_wait": true, "check_interval": true}
)

// OpenTopicURL opens the topic of a URL such as
// fila+postgres://app@db/app?topic=orders.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*pubsub.Topic, error) {
	q, broker, err := splitURL(u, topicParams, subParams, "a subscription")
	if err != nil {
		return nil, fmt.Errorf("open topic %s: %w", fila.Redact(u.String()), err)
	}
	opts := o.TopicOptions
	name := q.Get("topic")
	if name == "" {
		err = backend.Invalidf("parameter topic is required")
	}
	if v, ok := q["kind"]; ok && err == nil {
		opts.Kind = v[0]
	}
	if v, ok := q["max_attempts"]; ok && err == nil {
		opts.MaxAttempts, err = strconv.Atoi(v[0])
		if err != nil {
			err = backend.Invalidf("parameter max_attempts=%q is not a number", v[0])
		}
	}
	if v, ok := q["require_subscription"]; ok && err == nil {
		opts.RequireSubscription, err = strconv.ParseBool(v[0])
		if err != nil {
			err = backend.Invalidf("parameter require_subscription=%q is not a boolean", v[0])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open topic %s: %w", fila.Redact(u.String()), err)
	}
	if err := fila.ValidateTopicName(name); err != nil {
		return nil, fmt.Errorf("open topic %s: %w", fila.Redact(u.String()), err)
	}
	c, err := o.client(ctx, broker)
	if err != nil {
		return nil, fmt.Errorf("open topic %q: %w", name, err) // fila.Open's error names the URL, redacted
	}
	return OpenTopic(c, name, &opts), nil
}

// OpenSubscriptionURL opens the subscription of a URL such as
// fila+postgres://app@db/app?queue=orders.billing&topic=orders, which
// subscribes the queue to the topic; without topic it consumes the queue.
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*pubsub.Subscription, error) {
	fail := func(err error) (*pubsub.Subscription, error) {
		return nil, fmt.Errorf("open subscription %s: %w", fila.Redact(u.String()), err)
	}
	q, broker, err := splitURL(u, subParams, topicParams, "a topic")
	if err != nil {
		return fail(err)
	}
	opts := o.SubscriptionOptions
	queue := q.Get("queue")
	if queue == "" {
		return fail(backend.Invalidf("parameter queue is required"))
	}
	if v, ok := q["topic"]; ok {
		opts.Topic = v[0]
	}
	for name, d := range map[string]*time.Duration{
		"lease": &opts.Lease, "nack_delay": &opts.NackDelay,
		"receive_wait": &opts.ReceiveWait, "check_interval": &opts.CheckInterval,
	} {
		v, ok := q[name]
		if !ok {
			continue
		}
		if *d, err = time.ParseDuration(v[0]); err != nil {
			return fail(backend.Invalidf("parameter %s=%q is not a duration (such as 30s)", name, v[0]))
		}
	}
	c, err := o.client(ctx, broker)
	if err != nil {
		return nil, fmt.Errorf("open subscription %q: %w", queue, err) // fila.Open's error names the URL, redacted
	}
	s, err := OpenSubscription(ctx, c, queue, &opts)
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// splitURL takes this package's parameters (ours) out of u and returns
// them with the broker URL left. Parameters of the other kind of URL
// (theirs, but not ours) are refused, and each of ours may appear once.
func splitURL(u *url.URL, ours, theirs map[string]bool, other string) (url.Values, string, error) {
	scheme, ok := strings.CutPrefix(strings.ToLower(u.Scheme), SchemePrefix)
	if !ok || scheme == "" {
		return nil, "", backend.Invalidf("scheme %q does not start with %q and a Fila scheme", u.Scheme, SchemePrefix)
	}
	all, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, "", backend.Invalidf("query does not parse")
	}
	q := url.Values{}
	for name, v := range all {
		switch {
		case ours[name]:
			if len(v) != 1 {
				return nil, "", backend.Invalidf("parameter %s is given %d times", name, len(v))
			}
			q[name] = v
			delete(all, name)
		case theirs[name]:
			return nil, "", backend.Invalidf("parameter %s belongs in %s URL", name, other)
		}
	}
	b := *u
	b.Scheme = scheme
	b.RawQuery = all.Encode()
	return q, b.String(), nil
}

// client returns the client of broker, opening it on first use.
func (o *URLOpener) client(ctx context.Context, broker string) (*fila.Client, error) {
	o.mu.Lock()
	c := o.clients[broker]
	o.mu.Unlock()
	if c != nil {
		return c, nil
	}
	// Opening may take a while: not under the lock. Two concurrent first
	// opens of one broker both connect, and one client is kept.
	c, err := fila.Open(ctx, broker, o.ClientOptions...)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev := o.clients[broker]; prev != nil {
		_ = c.Close()
		return prev, nil
	}
	if o.clients == nil {
		o.clients = map[string]*fila.Client{}
	}
	o.clients[broker] = c
	return c, nil
}

// Close closes the clients the opener opened; the topics and subscriptions
// opened from them fail with fila.ErrClosed afterwards (shut them down
// first). Opening again after Close opens new clients.
func (o *URLOpener) Close() error {
	o.mu.Lock()
	clients := o.clients
	o.clients = nil
	o.mu.Unlock()
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
