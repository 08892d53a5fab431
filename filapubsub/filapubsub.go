package filapubsub

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/batcher"
	"gocloud.dev/pubsub/driver"
	"golang.org/x/sync/errgroup"
)

// Defaults of the options.
const (
	// DefaultCheckInterval is how often a subscription with a topic checks
	// that its queue is still subscribed.
	DefaultCheckInterval = 30 * time.Second
	// NackReason is the reason a nacked message's retry records (its
	// last error, and the dead letter's reason's predecessor).
	NackReason = "nacked (gocloud pubsub)"
)

// Batching defaults. A send batch is one PublishBatch; fila.MaxBatch and
// fila.MaxBatchBytes bound it (100 messages at the default 256 KiB body
// limit stay well within the latter).
var (
	sendBatcherOpts = batcher.Options{MaxBatchSize: 100, MaxHandlers: 2}
	recvBatcherOpts = batcher.Options{MaxBatchSize: fila.MaxReceive, MaxHandlers: 2}
	ackBatcherOpts  = batcher.Options{MaxBatchSize: 1000, MaxHandlers: 2}
)

// TopicOptions configure OpenTopic. The zero value is ready to use.
type TopicOptions struct {
	// Kind is the Fila kind of the messages published, which Fila
	// requires and workers dispatch on. Default: the topic's name.
	Kind string
	// MaxAttempts is the max attempts of each message published (each
	// subscription's copy counts its own); 0 means the default of the
	// client that receives it (fila.WithMaxAttempts, 10 by default).
	MaxAttempts int
	// RequireSubscription makes Send fail with a *NotFoundError
	// (gcerrors.NotFound) when the topic has no subscription, instead of
	// succeeding and storing nothing, which is Fila's rule (a topic
	// without subscriptions accepts publishes). On RabbitMQ a batch counts
	// as delivered when at least one subscription got it.
	RequireSubscription bool
	// BatcherOptions tune gocloud's batching of sends; the zero value
	// means batches of up to 100 messages, 2 at a time.
	BatcherOptions batcher.Options
}

// SubscriptionOptions configure OpenSubscription. The zero value is ready
// to use.
type SubscriptionOptions struct {
	// Topic, when set, makes the queue a subscription of this topic:
	// OpenSubscription subscribes it (Client.TopicSubscribe; already
	// subscribed is fine), and receives fail with a *NotFoundError
	// (gcerrors.NotFound) once the queue is no longer subscribed (checked
	// every CheckInterval, on brokers that can list subscriptions: not
	// RabbitMQ). Without a Topic the subscription consumes the queue as it
	// is, including what Fila producers enqueue to it.
	Topic string
	// Lease is gocloud's ack deadline: how long a received message stays
	// invisible to other receivers before it is delivered again, unless
	// acked or nacked. gocloud does not extend it; use As to reach the
	// *fila.Delivery and Extend it for long work. 0 means the client's
	// lease (fila.WithLease, fila.DefaultLease by default).
	Lease time.Duration
	// NackDelay is how long after a Nack the message becomes receivable
	// again. Default 0: at once, as gocloud's services do. A nack is a
	// Fila retry, so it counts an attempt: a message nacked more times
	// than its max attempts ends in the queue's dead letters.
	NackDelay time.Duration
	// ReceiveWait, when positive, is how long a receive waits for a
	// message before it returns an empty batch to gocloud (which calls
	// again at once). Default 0: it waits until a message comes or
	// gocloud ends its context (Shutdown). gocloud suggests about a
	// second, but a wait that ends while the broker is claiming a message
	// leaves that message leased, unseen, until its lease ends (on
	// RabbitMQ it comes back at once, its attempt counted): the more
	// often waits end, the more often that happens, which loaded brokers
	// showed. A waiting receive holds nothing.
	ReceiveWait time.Duration
	// CheckInterval is how often, at most, receives check that the queue
	// is still subscribed to Topic; negative disables the check. Default
	// DefaultCheckInterval. The first receive always checks.
	CheckInterval time.Duration
	// ReceiveBatcherOptions and AckBatcherOptions tune gocloud's batching
	// of receives and acks; zero values mean up to fila.MaxReceive
	// messages a receive and 1000 acks a call, 2 at a time.
	ReceiveBatcherOptions batcher.Options
	AckBatcherOptions     batcher.Options
}

// OpenTopic returns a gocloud topic that publishes to the Fila topic named
// topic of c (Client.PublishBatch): every queue subscribed to it gets a
// copy. It does not contact the broker, and never closes c; an invalid name
// fails at Send with gcerrors.InvalidArgument.
func OpenTopic(c *fila.Client, topic string, opts *TopicOptions) *pubsub.Topic {
	if opts == nil {
		opts = &TopicOptions{}
	}
	return pubsub.NewTopic(newTopic(c, topic, opts), batcherOpts(opts.BatcherOptions, sendBatcherOpts))
}

// OpenSubscription returns a gocloud subscription that receives from queue
// of c. With opts.Topic set it first subscribes queue to that topic, so
// that what is published from then on reaches it; that is why it takes a
// context and can fail. It never closes c.
func OpenSubscription(ctx context.Context, c *fila.Client, queue string, opts *SubscriptionOptions) (*pubsub.Subscription, error) {
	if opts == nil {
		opts = &SubscriptionOptions{}
	}
	ds, err := newSubscription(ctx, c, queue, opts)
	if err != nil {
		return nil, err
	}
	return pubsub.NewSubscription(ds, batcherOpts(opts.ReceiveBatcherOptions, recvBatcherOpts),
		batcherOpts(opts.AckBatcherOptions, ackBatcherOpts)), nil
}

// batcherOpts returns o, or def where o is the zero value.
func batcherOpts(o, def batcher.Options) *batcher.Options {
	if o == (batcher.Options{}) {
		return &def
	}
	return &o
}

type topic struct {
	c    *fila.Client
	name string
	opts TopicOptions
}

func newTopic(c *fila.Client, name string, opts *TopicOptions) *topic {
	t := &topic{c: c, name: name, opts: *opts}
	if t.opts.Kind == "" {
		t.opts.Kind = name
	}
	return t
}

// PublishInfo is what a sent message's AfterSend callback reaches with As:
// the id Fila gave the message (its copy in subscription queue q has the id
// fila.CopyID(ID, q), the LoggableID receivers see) and how many
// subscriptions got the batch it was sent in (-1: at least one, on
// RabbitMQ).
type PublishInfo struct {
	ID            string
	Subscriptions int
}

// SendBatch publishes ms with one PublishBatch.
func (t *topic) SendBatch(ctx context.Context, ms []*driver.Message) error {
	msgs := make([]fila.Message, len(ms))
	for i, m := range ms {
		msgs[i] = fila.Message{
			Kind:        t.opts.Kind,
			Body:        m.Body,
			Headers:     encodeMetadata(m.Metadata),
			MaxAttempts: t.opts.MaxAttempts,
		}
		if m.BeforeSend != nil {
			fm := &msgs[i]
			asFunc := func(i any) bool {
				if p, ok := i.(**fila.Message); ok {
					*p = fm
					return true
				}
				return false
			}
			if err := m.BeforeSend(asFunc); err != nil {
				return err
			}
		}
	}
	res, err := t.c.PublishBatch(ctx, t.name, msgs)
	if err != nil {
		return err
	}
	if t.opts.RequireSubscription && res.Subscriptions == 0 {
		return &NotFoundError{Topic: t.name}
	}
	for i, m := range ms {
		if m.AfterSend == nil {
			continue
		}
		info := PublishInfo{ID: res.IDs[i], Subscriptions: res.Subscriptions}
		fm := &msgs[i]
		asFunc := func(i any) bool {
			switch p := i.(type) {
			case *PublishInfo:
				*p = info
				return true
			case **fila.Message:
				*p = fm
				return true
			}
			return false
		}
		if err := m.AfterSend(asFunc); err != nil {
			return err
		}
	}
	return nil
}

// IsRetryable reports whether the broker could not be reached.
func (*topic) IsRetryable(err error) bool { return isRetryable(err) }

// As exposes the *fila.Client (target **fila.Client).
func (t *topic) As(i any) bool {
	switch p := i.(type) {
	case **fila.Client:
		*p = t.c
		return true
	case **topic: // for this package's tests
		*p = t
		return true
	}
	return false
}

// ErrorAs exposes the error types in err's chain.
func (*topic) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// ErrorCode maps Fila's errors to gcerrors codes.
func (*topic) ErrorCode(err error) gcerrors.ErrorCode { return errorCode(err) }

// Close does nothing: the client is not the topic's to close.
func (*topic) Close() error { return nil }

type subscription struct {
	c     *fila.Client
	queue string
	opts  SubscriptionOptions

	mu        sync.Mutex
	checkedAt time.Time // of the last check that the queue is subscribed
	noCheck   bool      // the broker cannot list subscriptions
	gone      error     // a *NotFoundError once the check failed
}

func newSubscription(ctx context.Context, c *fila.Client, queue string, opts *SubscriptionOptions) (*subscription, error) {
	s := &subscription{c: c, queue: queue, opts: *opts}
	if err := fila.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	if s.opts.Lease != 0 && (s.opts.Lease < fila.MinLease || s.opts.Lease > fila.MaxLease) {
		return nil, backend.Invalidf("lease %v must be between %v and %v", s.opts.Lease, fila.MinLease, fila.MaxLease)
	}
	if s.opts.NackDelay < 0 || s.opts.NackDelay > fila.MaxDelay {
		return nil, backend.Invalidf("nack delay %v must be between 0 and %v", s.opts.NackDelay, fila.MaxDelay)
	}
	if s.opts.ReceiveWait < 0 {
		return nil, backend.Invalidf("receive wait %v is negative", s.opts.ReceiveWait)
	}
	if s.opts.CheckInterval == 0 {
		s.opts.CheckInterval = DefaultCheckInterval
	}
	if s.opts.Topic != "" {
		if err := c.TopicSubscribe(ctx, s.opts.Topic, queue); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ReceiveBatch receives up to maxMessages messages. It waits for the
// first one until ctx ends (gocloud ends it when the subscription shuts
// down), or at most ReceiveWait when that is set, and fails with a
// *NotFoundError as soon as the watch of the subscription sees it ended.
func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	if err := s.checkSubscribed(ctx); err != nil {
		return nil, err
	}
	// Waits end by cancellation, not by a deadline: a deadline that hits
	// a find on FerretDB can break its pooled connection (see the mongo
	// package's documentation).
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if s.opts.ReceiveWait > 0 {
		stop := time.AfterFunc(s.opts.ReceiveWait, func() { cancel(errWaitOver) })
		defer stop.Stop()
	}
	if s.watches() {
		go s.watch(rctx, cancel)
	}
	ds, err := s.c.Receive(rctx, s.queue, fila.ReceiveParams{Max: min(max(maxMessages, 1), fila.MaxReceive), Lease: s.opts.Lease})
	if err != nil {
		var nf *NotFoundError
		cause := context.Cause(rctx)
		switch {
		case ctx.Err() != nil || !errors.Is(err, context.Canceled):
			return nil, err
		case cause == errWaitOver:
			return nil, nil // nothing within ReceiveWait
		case errors.As(cause, &nf):
			return nil, cause
		}
		return nil, err
	}
	out := make([]*driver.Message, len(ds))
	for i, d := range ds {
		out[i] = &driver.Message{
			LoggableID: d.ID,
			Body:       d.Body,
			Metadata:   decodeMetadata(d.Headers),
			AckID:      d,
			AsFunc: func(i any) bool {
				if p, ok := i.(**fila.Delivery); ok {
					*p = d
					return true
				}
				return false
			},
		}
	}
	return out, nil
}

// errWaitOver ends a receive's wait after ReceiveWait.
var errWaitOver = errors.New("filapubsub: receive wait over")

// watches reports whether receives watch that the queue stays subscribed.
func (s *subscription) watches() bool {
	if s.opts.Topic == "" || s.opts.CheckInterval <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.noCheck
}

// watch checks every CheckInterval, until ctx ends, that the queue is
// still subscribed, and ends a blocked receive (cancel) once it is not.
func (s *subscription) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(s.opts.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var nf *NotFoundError
		if err := s.checkSubscribed(ctx); errors.As(err, &nf) {
			cancel(err)
			return
		}
	}
}

// checkSubscribed fails with a *NotFoundError once the queue is no longer
// subscribed to the subscription's topic, checking at most every
// CheckInterval.
func (s *subscription) checkSubscribed(ctx context.Context) error {
	if s.opts.Topic == "" || s.opts.CheckInterval < 0 {
		return nil
	}
	s.mu.Lock()
	if s.gone != nil || s.noCheck || !s.checkedAt.IsZero() && time.Since(s.checkedAt) < s.opts.CheckInterval*9/10 {
		defer s.mu.Unlock()
		return s.gone
	}
	prev := s.checkedAt
	s.checkedAt = time.Now() // concurrent receives do not check again meanwhile
	s.mu.Unlock()
	subs, err := s.c.TopicSubscriptions(ctx, s.opts.Topic)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		s.noCheck = true // RabbitMQ cannot list subscriptions
		return nil
	case err != nil:
		s.checkedAt = prev // check again next time
		return err
	case !slices.ContainsFunc(subs, func(sub fila.Subscription) bool { return sub.Queue == s.queue }):
		s.gone = &NotFoundError{Topic: s.opts.Topic, Queue: s.queue}
		return s.gone
	}
	return nil
}

func deliveries(ackIDs []driver.AckID) []*fila.Delivery {
	ds := make([]*fila.Delivery, len(ackIDs))
	for i, id := range ackIDs {
		ds[i] = id.(*fila.Delivery)
	}
	return ds
}

// SendAcks acks the deliveries with one AckBatch. Acks whose lease had
// ended (a double ack, or an ack after the ack deadline) are not errors,
// as gocloud wants: such a message comes back by itself.
func (s *subscription) SendAcks(ctx context.Context, ackIDs []driver.AckID) error {
	return withoutLeaseLost(s.c.AckBatch(ctx, deliveries(ackIDs)))
}

// CanNack is true: a nack is a Fila retry.
func (*subscription) CanNack() bool { return true }

// SendNacks retries the deliveries after NackDelay, with NackReason, a few
// at a time. Nacks whose lease had ended are not errors; a nacked message
// that was cancelled (Client.MessageCancel) is dead-lettered instead, not
// an error either.
func (s *subscription) SendNacks(ctx context.Context, ackIDs []driver.AckID) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	var mu sync.Mutex
	var errs []error
	for _, d := range deliveries(ackIDs) {
		g.Go(func() error {
			err := d.Retry(gctx, s.opts.NackDelay, NackReason)
			if err != nil && !errors.Is(err, fila.ErrLeaseLost) && !errors.Is(err, fila.ErrCancelled) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// IsRetryable reports whether the broker could not be reached.
func (*subscription) IsRetryable(err error) bool { return isRetryable(err) }

// As exposes the *fila.Client (target **fila.Client).
func (s *subscription) As(i any) bool {
	switch p := i.(type) {
	case **fila.Client:
		*p = s.c
		return true
	case **subscription: // for this package's tests
		*p = s
		return true
	}
	return false
}

// ErrorAs exposes the error types in err's chain.
func (*subscription) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// ErrorCode maps Fila's errors to gcerrors codes.
func (*subscription) ErrorCode(err error) gcerrors.ErrorCode { return errorCode(err) }

// Close does nothing: the client is not the subscription's to close.
func (*subscription) Close() error { return nil }
