package filapubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fila-go/fila"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/driver"
	"gocloud.dev/pubsub/drivertest"
)

// harness is drivertest's view of one broker. Topics and subscription
// queues get unique names; a subscription's cleanup ends it
// (TopicUnsubscribe), which deletes its queue.
type harness struct {
	t      *testing.T
	c      *fila.Client
	prefix string
	n      atomic.Int64
}

func (h *harness) name() string { return fmt.Sprintf("%s-%d", h.prefix, h.n.Add(1)) }

func (h *harness) CreateTopic(ctx context.Context, testName string) (driver.Topic, func(), error) {
	return newTopic(h.c, h.name(), &TopicOptions{}), func() {}, nil
}

// MakeNonexistentTopic returns a topic that has no subscription, opened
// with RequireSubscription: Fila has no topics that do not exist (a topic
// without subscriptions accepts publishes and stores nothing), and
// RequireSubscription is what makes such a Send fail with NotFound.
func (h *harness) MakeNonexistentTopic(ctx context.Context) (driver.Topic, error) {
	return newTopic(h.c, h.name(), &TopicOptions{RequireSubscription: true}), nil
}

func (h *harness) CreateSubscription(ctx context.Context, dt driver.Topic, testName string) (driver.Subscription, func(), error) {
	t := dt.(*topic)
	queue := t.name + ".sub-" + h.name()
	s, err := newSubscription(ctx, h.c, queue, &SubscriptionOptions{Topic: t.name})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { h.unsubscribe(t.name, queue) }, nil
}

// MakeNonexistentSubscription returns a subscription whose queue was
// subscribed to a topic and then unsubscribed (which deletes the queue):
// a Fila queue exists while it holds something, so a subscription that
// was ended is the one that does not exist. Its receives fail with
// NotFound on brokers that can list subscriptions (not RabbitMQ).
func (h *harness) MakeNonexistentSubscription(ctx context.Context) (driver.Subscription, func(), error) {
	topic := h.name()
	queue := topic + ".gone"
	s, err := newSubscription(ctx, h.c, queue, &SubscriptionOptions{Topic: topic})
	if err != nil {
		return nil, nil, err
	}
	if err := h.c.TopicUnsubscribe(ctx, topic, queue); err != nil {
		return nil, nil, err
	}
	return s, func() {}, nil
}

func (h *harness) unsubscribe(topic, queue string) {
	if err := h.c.TopicUnsubscribe(context.Background(), topic, queue); err != nil {
		h.t.Errorf("unsubscribe %s from %s: %v", queue, topic, err)
	}
}

func (h *harness) Close() {}

func (h *harness) MaxBatchSizes() (int, int) { return fila.MaxBatch, 0 }

func (h *harness) SupportsMultipleSubscriptions() bool { return true }

// noSubscriptionListing names the drivertest tests that need receives from
// an ended subscription to fail with NotFound, which a broker that cannot
// list subscriptions (RabbitMQ) cannot detect: its receive waits on an
// empty queue instead. They are skipped there, with this reason, and
// README.md explains it; TestAsOnEveryBroker checks As on RabbitMQ too.
var noSubscriptionListing = []string{
	"TestNonExistentSubscriptionSucceedsOnOpenButFailsOnReceive",
	"TestAs/",
}

func TestConformance(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		newHarness := func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
			if !b.listsSubscriptions {
				for _, n := range noSubscriptionListing {
					if strings.Contains(t.Name(), "/"+n) {
						t.Skipf("%s cannot list a topic's subscriptions, so a receive from an ended subscription "+
							"waits on its empty queue instead of failing with NotFound (see README.md)", b.name)
					}
				}
			}
			return &harness{t: t, c: c, prefix: "gc-" + unique()}, nil
		}
		drivertest.RunConformanceTests(t, newHarness, []drivertest.AsTest{asTest{}})
	})
}

// asTest checks what As and ErrorAs expose.
type asTest struct{}

func (asTest) Name() string { return "fila types" }

func (asTest) TopicCheck(t *pubsub.Topic) error {
	var c *fila.Client
	if !t.As(&c) || c == nil {
		return errors.New("Topic.As(**fila.Client) failed")
	}
	return nil
}

func (asTest) SubscriptionCheck(s *pubsub.Subscription) error {
	var c *fila.Client
	if !s.As(&c) || c == nil {
		return errors.New("Subscription.As(**fila.Client) failed")
	}
	return nil
}

func (asTest) TopicErrorCheck(t *pubsub.Topic, err error) error {
	var nf *NotFoundError
	if !t.ErrorAs(err, &nf) || nf.Topic == "" || nf.Queue != "" {
		return fmt.Errorf("Topic.ErrorAs(%v, **NotFoundError) failed: %+v", err, nf)
	}
	var c *fila.Client
	if t.ErrorAs(err, &c) {
		return errors.New("Topic.ErrorAs(**fila.Client) succeeded")
	}
	return nil
}

func (asTest) SubscriptionErrorCheck(s *pubsub.Subscription, err error) error {
	var nf *NotFoundError
	if !s.ErrorAs(err, &nf) || nf.Topic == "" || nf.Queue == "" {
		return fmt.Errorf("Subscription.ErrorAs(%v, **NotFoundError) failed: %+v", err, nf)
	}
	return nil
}

func (asTest) MessageCheck(m *pubsub.Message) error {
	var d *fila.Delivery
	if !m.As(&d) || d == nil {
		return errors.New("Message.As(**fila.Delivery) failed")
	}
	if m.Metadata["set-in-before-send"] != "yes" {
		return fmt.Errorf("metadata %v lacks what BeforeSend set", m.Metadata)
	}
	if d.ID != m.LoggableID || d.Attempt != 1 || string(d.Body) != string(m.Body) {
		return fmt.Errorf("delivery %s attempt %d body %q; message %s body %q", d.ID, d.Attempt, d.Body, m.LoggableID, m.Body)
	}
	return nil
}

func (asTest) BeforeSend(as func(any) bool) error {
	var m *fila.Message
	if !as(&m) || m == nil || m.Kind == "" {
		return errors.New("BeforeSend As(**fila.Message) failed")
	}
	m.Headers = map[string]string{"set-in-before-send": "yes"}
	return nil
}

func (asTest) AfterSend(as func(any) bool) error {
	var info PublishInfo
	if !as(&info) || info.ID == "" || info.Subscriptions == 0 {
		return fmt.Errorf("AfterSend As(*PublishInfo) failed: %+v", info)
	}
	return nil
}

// TestErrorCodes checks the mapping of Fila's errors to gcerrors codes.
func TestErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want gcerrors.ErrorCode
	}{
		{fmt.Errorf("x: %w", fila.ErrInvalid), gcerrors.InvalidArgument},
		{fmt.Errorf("x: %w", fila.ErrTooLarge), gcerrors.InvalidArgument},
		{fmt.Errorf("x: %w", fila.ErrUnavailable), gcerrors.Unknown},
		{fmt.Errorf("x: %w", fila.ErrAccessDenied), gcerrors.PermissionDenied},
		{fmt.Errorf("x: %w", fila.ErrLeaseLost), gcerrors.FailedPrecondition},
		{fila.ErrClosed, gcerrors.FailedPrecondition},
		{fila.ErrCancelled, gcerrors.FailedPrecondition},
		{fila.ErrQueueNotEmpty, gcerrors.FailedPrecondition},
		{&fila.UnsupportedError{Driver: "d", Capability: "c"}, gcerrors.Unimplemented},
		{&fila.DuplicateError{Queue: "q", ID: "i"}, gcerrors.AlreadyExists},
		{&NotFoundError{Topic: "t"}, gcerrors.NotFound},
		{fmt.Errorf("x: %w", context.Canceled), gcerrors.Canceled},
		{context.DeadlineExceeded, gcerrors.DeadlineExceeded},
		{errors.New("other"), gcerrors.Unknown},
	} {
		if got := errorCode(c.err); got != c.want {
			t.Errorf("errorCode(%v) = %v, want %v", c.err, got, c.want)
		}
		if got, want := isRetryable(c.err), errors.Is(c.err, fila.ErrUnavailable); got != want {
			t.Errorf("isRetryable(%v) = %v", c.err, got)
		}
	}
	var u *fila.UnsupportedError
	if !errorAs(fmt.Errorf("w: %w", &fila.UnsupportedError{Driver: "d"}), &u) || u.Driver != "d" {
		t.Error("errorAs(**fila.UnsupportedError) failed")
	}
	var c *fila.Client
	if errorAs(errors.New("x"), &c) {
		t.Error("errorAs(**fila.Client) succeeded")
	}
	// Acks: lease-lost parts are dropped, others kept.
	other := errors.New("boom")
	if err := withoutLeaseLost(errors.Join(fmt.Errorf("d1: %w", fila.ErrLeaseLost), fila.ErrLeaseLost)); err != nil {
		t.Errorf("withoutLeaseLost(all lease lost) = %v", err)
	}
	if err := withoutLeaseLost(errors.Join(fila.ErrLeaseLost, other)); !errors.Is(err, other) || errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("withoutLeaseLost(mixed) = %v", err)
	}
}
