package filawatermill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/fila-go/fila"
)

// Defaults of SubscriberConfig.
const (
	// DefaultLease is the lease of a delivery: fila.DefaultLease, 30 s.
	DefaultLease = fila.DefaultLease
	// DefaultNackDelay is how long a nacked message waits before it can be
	// delivered again: 100 ms, the NackResendSleep default of
	// watermill-kafka, so that a handler failing at once does not spin on
	// one message, yet the redelivery comes as soon as it does with the
	// adapters that requeue at once (watermill-amqp, watermill-sql).
	DefaultNackDelay = 100 * time.Millisecond
	// NoNackDelay, as SubscriberConfig.NackDelay, makes a nacked message
	// receivable again at once.
	NoNackDelay time.Duration = -1
	// NackReason is the reason a nack gives fila.Delivery.Retry: the
	// message's LastError, and what its dead letter shows as the last
	// error when nacks exhaust its attempts.
	NackReason = "nacked by a watermill handler"
)

// settleTimeout bounds an Ack, Retry or Release, which run on a context of
// their own so that a subscription ending does not cut them short.
const settleTimeout = 15 * time.Second

// ErrSubscriberClosed is returned by Subscribe and SubscribeInitialize after
// Close.
var ErrSubscriberClosed = errors.New("filawatermill: subscriber is closed")

// SubscriberConfig configures a Subscriber. The zero value consumes topics
// in the consumer group DefaultConsumerGroup, one message at a time, with
// 30 s leases kept alive while a handler runs and nacked messages back
// after 100 ms.
type SubscriberConfig struct {
	// ConsumerGroup names the subscription: subscribers with the same group
	// compete for one copy of each message published to a topic (each
	// message goes to one of them), and each group gets a copy of its own.
	// Empty means DefaultConsumerGroup.
	ConsumerGroup string

	// QueueName returns the name of the Fila queue that subscribes group to
	// topic; nil means DefaultQueueName. It must return a valid queue name
	// (fila.ValidateQueueName), the same for the same arguments in every
	// process, and different names for different pairs.
	QueueName func(topic, group string) string

	// ReceiveFromQueue makes Subscribe(name) consume the Fila queue called
	// name itself, with no topic subscription: ConsumerGroup and QueueName
	// are not used, and every subscriber of name competes for its messages.
	// It pairs with PublisherConfig.EnqueueToQueue, or with any Fila
	// producer (Client.Enqueue, a worker.Kind).
	ReceiveFromQueue bool

	// Lease is the lease of each delivery (fila.ReceiveParams.Lease); 0
	// means DefaultLease. While a message waits in the output channel or in
	// a handler, the subscriber extends its lease every third of Lease, so a
	// slow handler keeps it, and a process that dies gives it back to the
	// others about one Lease later. Between fila.MinLease and
	// fila.MaxLease.
	Lease time.Duration

	// NackDelay is how long a nacked message waits before it can be
	// delivered again (fila.Delivery.Retry's delay); 0 means
	// DefaultNackDelay, NoNackDelay means at once. At most fila.MaxDelay.
	NackDelay time.Duration

	// Prefetch is how many messages one Receive may take (with the same
	// lease, kept alive alike) while the output channel still hands them
	// out one at a time; 0 means 1. More saves round trips on a busy topic,
	// at the price of holding messages that a competing subscriber could
	// have run. At most fila.MaxReceive.
	Prefetch int

	// Logger receives the subscriber's log lines; nil discards them. The
	// fila.Client logs its own events (broker outages, dead-lettering on max
	// attempts) to its own logger (fila.WithLogger).
	Logger watermill.LoggerAdapter
}

// Subscriber is a watermill message.Subscriber (and
// message.SubscribeInitializer) over Fila topics: Subscribe makes the
// consumer group's queue a subscription of the topic and consumes it. It is
// safe for concurrent use. It does not own the fila.Client: Close leaves
// the client open.
type Subscriber struct {
	c      *fila.Client
	cfg    SubscriberConfig
	logger watermill.LoggerAdapter

	// root ends every subscription when Close cancels it.
	root   context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
	_ message.Publisher            = (*Publisher)(nil)
)

// NewSubscriber returns a Subscriber over c. It fails, with an error
// matching fila.ErrInvalid, for a nil client or a config value out of its
// range.
func NewSubscriber(c *fila.Client, cfg SubscriberConfig) (*Subscriber, error) {
	if c == nil {
		return nil, fmt.Errorf("filawatermill: NewSubscriber: nil *fila.Client: %w", fila.ErrInvalid)
	}
	if cfg.ConsumerGroup == "" {
		cfg.ConsumerGroup = DefaultConsumerGroup
	}
	if cfg.QueueName == nil {
		cfg.QueueName = DefaultQueueName
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Lease < fila.MinLease || cfg.Lease > fila.MaxLease {
		return nil, fmt.Errorf("filawatermill: SubscriberConfig.Lease %v is outside [%v, %v]: %w", cfg.Lease, fila.MinLease, fila.MaxLease, fila.ErrInvalid)
	}
	switch {
	case cfg.NackDelay == 0:
		cfg.NackDelay = DefaultNackDelay
	case cfg.NackDelay == NoNackDelay:
		cfg.NackDelay = 0
	case cfg.NackDelay < 0 || cfg.NackDelay > fila.MaxDelay:
		return nil, fmt.Errorf("filawatermill: SubscriberConfig.NackDelay %v is outside [0, fila.MaxDelay] (NoNackDelay for none): %w", cfg.NackDelay, fila.ErrInvalid)
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 1
	}
	if cfg.Prefetch < 1 || cfg.Prefetch > fila.MaxReceive {
		return nil, fmt.Errorf("filawatermill: SubscriberConfig.Prefetch %d is outside [1, %d]: %w", cfg.Prefetch, fila.MaxReceive, fila.ErrInvalid)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	root, cancel := context.WithCancel(context.Background())
	return &Subscriber{c: c, cfg: cfg, logger: logger, root: root, cancel: cancel}, nil
}

// queue returns the Fila queue that Subscribe(topic) consumes.
func (s *Subscriber) queue(topic string) (string, error) {
	q := topic
	if !s.cfg.ReceiveFromQueue {
		q = s.cfg.QueueName(topic, s.cfg.ConsumerGroup)
	}
	if err := fila.ValidateQueueName(q); err != nil {
		return "", fmt.Errorf("filawatermill: queue name for topic %q, group %q: %w", topic, s.cfg.ConsumerGroup, err)
	}
	return q, nil
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// initialize makes the consumer group's queue a subscription of topic and
// returns the queue.
func (s *Subscriber) initialize(ctx context.Context, topic string) (string, error) {
	if s.isClosed() {
		return "", ErrSubscriberClosed
	}
	q, err := s.queue(topic)
	if err != nil {
		return "", err
	}
	if s.cfg.ReceiveFromQueue {
		return q, nil
	}
	ctx, stop := mergeCancel(ctx, s.root)
	defer stop()
	if err := s.c.TopicSubscribe(ctx, topic, q); err != nil {
		if s.root.Err() != nil {
			return "", ErrSubscriberClosed
		}
		return "", fmt.Errorf("filawatermill: subscribe queue %q to topic %q: %w", q, topic, err)
	}
	return q, nil
}

// SubscribeInitialize makes the consumer group's queue a subscription of
// topic without consuming it (Client.TopicSubscribe): messages published to
// topic from then on wait in the queue for a Subscribe of the group. With
// ReceiveFromQueue it does nothing.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	_, err := s.initialize(context.Background(), topic)
	return err
}

// Subscribe makes the consumer group's queue a subscription of topic, as
// SubscribeInitialize does, before it returns, so every message published
// to topic after it returns is delivered to the group; then it consumes the
// queue in the background and returns the output channel.
//
// The channel hands out one message at a time: the next comes after the
// previous one was acked or nacked. Ack acks the Fila delivery; Nack
// retries it after NackDelay (its attempt count goes on, and a message past
// its max attempts goes to the queue's dead letters). The message's
// context derives from ctx, carries the delivery (DeliveryOf), and is
// cancelled once the message is acked or nacked, when the lease is lost, and
// when the subscription ends. The subscription ends, and the channel is
// closed, when ctx ends, when Close is called, or when the fila.Client is
// closed; a message received but not yet acked or nacked then is released
// at once (fila.Delivery.Release, which counts as an attempt), and a late
// Ack or Nack of it changes nothing.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	q, err := s.initialize(ctx, topic)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrSubscriberClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()

	out := make(chan *message.Message)
	sctx, stop := mergeCancel(ctx, s.root)
	fields := watermill.LogFields{"topic": topic, "queue": q}
	if !s.cfg.ReceiveFromQueue {
		fields["consumer_group"] = s.cfg.ConsumerGroup
	}
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer stop()
		s.consume(sctx, q, out, s.logger.With(fields))
	}()
	return out, nil
}

// Close ends every subscription, closes their output channels and returns
// once their goroutines have ended (messages not acked or nacked by then
// are released). Later Subscribe calls fail with ErrSubscriberClosed. It
// does not close the fila.Client. Closing twice is harmless.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// mergeCancel returns a context with ctx's values that also ends when other
// ends, and its stop function.
func mergeCancel(ctx, other context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stopAfter := context.AfterFunc(other, cancel)
	return ctx, func() { stopAfter(); cancel() }
}

// consume receives from queue until ctx ends, handing the messages out on
// out.
func (s *Subscriber) consume(ctx context.Context, queue string, out chan<- *message.Message, logger watermill.LoggerAdapter) {
	logger.Debug("Subscription started", nil)
	defer logger.Debug("Subscription ended", nil)
	p := fila.ReceiveParams{Max: s.cfg.Prefetch, Lease: s.cfg.Lease}
	var (
		failing bool
		backoff time.Duration
	)
	for ctx.Err() == nil {
		ds, err := s.c.Receive(ctx, queue, p)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, fila.ErrClosed) || errors.Is(err, fila.ErrInvalid) || errors.Is(err, fila.ErrUnsupported) {
				logger.Error("Receive failed for good; closing the subscription", err, nil)
				return
			}
			// A broker outage, refused credentials, or an unclassified
			// failure: try again with a capped backoff, logging the start
			// of the failure and its end (the client logs the outage too).
			if !failing {
				logger.Error("Receive failed; retrying with backoff", err, nil)
				failing = true
			} else {
				logger.Debug("Receive failed again", watermill.LogFields{"error": err.Error()})
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		if failing {
			logger.Info("Receive works again", nil)
			failing, backoff = false, 0
		}
		if !s.handOut(ctx, ds, out, logger) {
			return
		}
	}
}

// handOut hands ds out one at a time, keeping the leases of those not yet
// settled alive, and settles each as its message is acked or nacked. It
// reports false when ctx ended; the deliveries not settled by then are
// released.
func (s *Subscriber) handOut(ctx context.Context, ds []*fila.Delivery, out chan<- *message.Message, logger watermill.LoggerAdapter) bool {
	hb := s.heartbeat(ds, logger)
	defer hb.stop()
	for i, d := range ds {
		if !s.deliver(ctx, d, hb, out, logger) {
			for _, rest := range ds[i+1:] {
				s.release(rest, hb, logger)
			}
			return false
		}
	}
	return true
}

type deliveryKey struct{}

// DeliveryOf returns the Fila delivery behind a message of a Subscriber's
// output channel, from the message's context, or nil for another message.
// Read it (Attempt, MaxAttempts, ID, Queue, Kind, EnqueuedAt, LastError);
// settle the message with msg.Ack and msg.Nack, not with the delivery's
// own methods, which the subscriber calls.
func DeliveryOf(msg *message.Message) *fila.Delivery {
	d, _ := msg.Context().Value(deliveryKey{}).(*fila.Delivery)
	return d
}

// toMessage converts a delivery: the payload is the body byte for byte,
// the metadata the headers but UUIDHeader, which is the UUID (the Fila id
// when the message has none).
func toMessage(d *fila.Delivery) *message.Message {
	uuid, ok := d.Headers[UUIDHeader]
	if !ok {
		uuid = d.ID
	}
	msg := message.NewMessage(uuid, d.Body)
	msg.Metadata = make(message.Metadata, len(d.Headers))
	for k, v := range d.Headers {
		if k != UUIDHeader {
			msg.Metadata[k] = v
		}
	}
	return msg
}

// deliver hands d out and settles it as its message is acked or nacked. It
// reports false when ctx ended first; d is then released, unless it was
// acked or nacked in the meantime.
func (s *Subscriber) deliver(ctx context.Context, d *fila.Delivery, hb *heartbeat, out chan<- *message.Message, logger watermill.LoggerAdapter) bool {
	msg := toMessage(d)
	mctx, cancel := context.WithCancelCause(context.WithValue(ctx, deliveryKey{}, d))
	defer cancel(nil)
	msg.SetContext(mctx)
	hb.handedOut(d, cancel)
	fields := watermill.LogFields{"message_uuid": msg.UUID, "fila_id": d.ID, "attempt": d.Attempt}

	select {
	case out <- msg:
		logger.Trace("Message sent to consumer", fields)
	case <-ctx.Done():
		logger.Debug("Subscription ended before the message was consumed; releasing it", fields)
		s.release(d, hb, logger)
		return false
	}
	select {
	case <-msg.Acked():
		s.ack(d, hb, logger, fields)
		return true
	case <-msg.Nacked():
		s.nack(d, hb, logger, fields)
		return true
	case <-ctx.Done():
	}
	// The subscription ended; an ack or nack that came at the same moment
	// still counts.
	select {
	case <-msg.Acked():
		s.ack(d, hb, logger, fields)
	case <-msg.Nacked():
		s.nack(d, hb, logger, fields)
	default:
		logger.Debug("Subscription ended before the message was acked or nacked; releasing it", fields)
		s.release(d, hb, logger)
	}
	return false
}

func settleCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), settleTimeout)
}

func (s *Subscriber) ack(d *fila.Delivery, hb *heartbeat, logger watermill.LoggerAdapter, fields watermill.LogFields) {
	hb.settled(d)
	ctx, cancel := settleCtx()
	defer cancel()
	if err := d.Ack(ctx); err != nil {
		logger.Error("Ack failed; the message will be delivered again", err, fields)
		return
	}
	logger.Trace("Message acked", fields)
}

func (s *Subscriber) nack(d *fila.Delivery, hb *heartbeat, logger watermill.LoggerAdapter, fields watermill.LogFields) {
	hb.settled(d)
	ctx, cancel := settleCtx()
	defer cancel()
	if err := d.Retry(ctx, s.cfg.NackDelay, NackReason); err != nil {
		if errors.Is(err, fila.ErrCancelled) {
			logger.Info("Nacked message was cancelled (fila MessageCancel); dead-lettered instead", fields)
			return
		}
		logger.Error("Nack failed; the message comes back when its lease ends", err, fields)
		return
	}
	logger.Trace("Message nacked", fields)
}

func (s *Subscriber) release(d *fila.Delivery, hb *heartbeat, logger watermill.LoggerAdapter) {
	hb.settled(d)
	ctx, cancel := settleCtx()
	defer cancel()
	err := d.Release(ctx)
	switch {
	case err == nil, errors.Is(err, fila.ErrLeaseLost), errors.Is(err, fila.ErrCancelled):
	case errors.Is(err, fila.ErrClosed):
		// The client closed: the driver gives the leases back, or they end.
		logger.Debug("Release after the client closed", watermill.LogFields{"fila_id": d.ID})
	default:
		logger.Error("Release failed; the message comes back when its lease ends", err, watermill.LogFields{"fila_id": d.ID})
	}
}

// heartbeat extends the leases of a batch's unsettled deliveries every
// third of the lease (each extend may take until its lease's deadline), and
// cancels a handed-out message's context with
// fila.ErrLeaseLost when its lease was lost anyway.
type heartbeat struct {
	mu      sync.Mutex
	pending map[*fila.Delivery]context.CancelCauseFunc // nil until handed out
	done    chan struct{}
	wg      sync.WaitGroup
}

func (s *Subscriber) heartbeat(ds []*fila.Delivery, logger watermill.LoggerAdapter) *heartbeat {
	hb := &heartbeat{pending: make(map[*fila.Delivery]context.CancelCauseFunc, len(ds)), done: make(chan struct{})}
	for _, d := range ds {
		hb.pending[d] = nil
	}
	lease := s.cfg.Lease
	hb.wg.Add(1)
	go func() {
		defer hb.wg.Done()
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-hb.done:
				return
			case <-t.C:
			}
			hb.mu.Lock()
			todo := make([]*fila.Delivery, 0, len(hb.pending))
			for d := range hb.pending {
				todo = append(todo, d)
			}
			hb.mu.Unlock()
			for _, d := range todo {
				// An extend may take until the lease it extends ends: a
				// broker slow to answer (a loaded FerretDB stalls for
				// seconds) then still keeps the message, where a budget
				// of a third of the lease would give it up.
				ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(d.Deadline()), lease/3))
				err := d.Extend(ctx, lease)
				cancel()
				if err == nil {
					continue
				}
				hb.mu.Lock()
				stop, still := hb.pending[d]
				hb.mu.Unlock()
				if !still {
					continue // settled meanwhile: Extend found it settled
				}
				fields := watermill.LogFields{"fila_id": d.ID, "attempt": d.Attempt}
				if errors.Is(err, fila.ErrLeaseLost) {
					logger.Error("Lease lost while the message was held; it may be delivered again", err, fields)
					if stop != nil {
						stop(fila.ErrLeaseLost)
					}
					continue
				}
				logger.Error("Extending the lease failed; trying again", err, fields)
			}
		}
	}()
	return hb
}

func (hb *heartbeat) handedOut(d *fila.Delivery, cancel context.CancelCauseFunc) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.pending[d] = cancel
}

func (hb *heartbeat) settled(d *fila.Delivery) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	delete(hb.pending, d)
}

func (hb *heartbeat) stop() {
	close(hb.done)
	hb.wg.Wait()
}
