package filawatermill

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/fila-go/fila"
)

// UUIDHeader is the Fila header that carries a Watermill message's UUID,
// the name watermill-amqp uses. The Publisher sets it and the Subscriber
// takes msg.UUID from it (and leaves it out of msg.Metadata); a message
// without it, enqueued by a plain Fila producer, gets its Fila id as UUID.
const UUIDHeader = "_watermill_message_uuid"

// ErrPublisherClosed is returned by Publish after Close.
var ErrPublisherClosed = errors.New("filawatermill: publisher is closed")

// PublisherConfig configures a Publisher. The zero value publishes to Fila
// topics with the topic as the messages' kind.
type PublisherConfig struct {
	// Kind returns the Fila kind of msg, published to topic; nil uses the
	// topic. A kind is 1 to 255 bytes of printable UTF-8 (fila.MaxKindLen).
	Kind func(topic string, msg *message.Message) string

	// EnqueueToQueue makes Publish(name, ...) store one copy of each
	// message in the Fila queue called name (Client.EnqueueBatch) instead
	// of publishing to the topic called name (Client.PublishBatch, a copy
	// in every subscribed queue). Use it to feed a queue that a fila
	// worker, or a Subscriber with ReceiveFromQueue, consumes.
	EnqueueToQueue bool

	// Logger receives the publisher's log lines; nil discards them. The
	// fila.Client logs its own events to its own logger (fila.WithLogger).
	Logger watermill.LoggerAdapter
}

// Publisher is a watermill message.Publisher that publishes to Fila topics
// (or enqueues to Fila queues, with PublisherConfig.EnqueueToQueue). It is
// safe for concurrent use. It does not own the fila.Client: Close leaves the
// client open.
type Publisher struct {
	c      *fila.Client
	cfg    PublisherConfig
	logger watermill.LoggerAdapter

	mu     sync.RWMutex // held for reading by every Publish in flight
	closed bool
}

// NewPublisher returns a Publisher over c. It fails, with an error matching
// fila.ErrInvalid, only for a nil client.
func NewPublisher(c *fila.Client, cfg PublisherConfig) (*Publisher, error) {
	if c == nil {
		return nil, fmt.Errorf("filawatermill: NewPublisher: nil *fila.Client: %w", fila.ErrInvalid)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &Publisher{c: c, cfg: cfg, logger: logger}, nil
}

// Publish stores msgs for topic and returns once Fila has stored them at
// the broker's durability level (contract: durable-enqueue): with
// Client.PublishBatch a copy in every queue subscribed to topic at that
// moment, so in every consumer group that subscribed before; a topic
// without subscriptions stores nothing, and that is not an error. Each
// message's payload becomes the body byte for byte, its metadata the
// headers, its UUID the header UUIDHeader, and its kind comes from
// PublisherConfig.Kind.
//
// The call runs under the context of msgs[0] (msg.Context(), Background
// unless set). Messages go in batches of at most fila.MaxBatch messages
// and fila.MaxBatchBytes; each batch is validated whole, so a bad message
// (an invalid topic, kind or header, a body over the client's limit)
// stores nothing of its batch and Publish returns an error matching
// fila.ErrInvalid or fila.ErrTooLarge, wrapped with the topic and the
// message's UUID where Fila names one. An error of a later batch leaves
// the earlier batches stored.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	if len(msgs) == 0 {
		return nil
	}
	ctx := msgs[0].Context()
	fields := watermill.LogFields{"topic": topic}
	for start := 0; start < len(msgs); {
		end, batch := p.batch(topic, msgs, start)
		if err := p.store(ctx, topic, batch); err != nil {
			return p.publishErr(topic, msgs[start:end], err)
		}
		start = end
	}
	p.logger.Trace("Published messages", fields.Add(watermill.LogFields{"messages": len(msgs)}))
	return nil
}

// batch converts msgs[start:] up to the batch limits and returns where the
// batch ends.
func (p *Publisher) batch(topic string, msgs []*message.Message, start int) (int, []fila.Message) {
	var out []fila.Message
	size := 0
	end := start
	for ; end < len(msgs) && len(out) < fila.MaxBatch; end++ {
		m := p.toFila(topic, msgs[end])
		n := len(m.Body) + len(m.Kind)
		for k, v := range m.Headers {
			n += len(k) + len(v)
		}
		if len(out) > 0 && size+n > fila.MaxBatchBytes {
			break
		}
		size += n
		out = append(out, m)
	}
	return end, out
}

func (p *Publisher) store(ctx context.Context, name string, batch []fila.Message) error {
	if p.cfg.EnqueueToQueue {
		_, err := p.c.EnqueueBatch(ctx, name, batch)
		return err
	}
	res, err := p.c.PublishBatch(ctx, name, batch)
	if err == nil && res.Subscriptions == 0 {
		p.logger.Debug("Published to a topic without subscriptions: nothing stored",
			watermill.LogFields{"topic": name, "messages": len(batch)})
	}
	return err
}

// publishErr wraps a Fila error with the topic and, for a batch of one, the
// message's UUID.
func (p *Publisher) publishErr(topic string, batch []*message.Message, err error) error {
	verb := "publish to topic"
	if p.cfg.EnqueueToQueue {
		verb = "enqueue to queue"
	}
	if len(batch) == 1 {
		return fmt.Errorf("filawatermill: %s %q, message %s: %w", verb, topic, batch[0].UUID, err)
	}
	return fmt.Errorf("filawatermill: %s %q, batch of %d messages: %w", verb, topic, len(batch), err)
}

// toFila converts a Watermill message. Fila copies what it stores, so the
// payload is not copied here.
func (p *Publisher) toFila(topic string, msg *message.Message) fila.Message {
	kind := topic
	if p.cfg.Kind != nil {
		kind = p.cfg.Kind(topic, msg)
	}
	headers := make(map[string]string, len(msg.Metadata)+1)
	for k, v := range msg.Metadata {
		headers[k] = v
	}
	headers[UUIDHeader] = msg.UUID
	return fila.Message{Kind: kind, Body: msg.Payload, Headers: headers}
}

// Close makes later Publish calls fail with ErrPublisherClosed and returns
// once the calls in flight have ended. It does not close the fila.Client.
// Closing twice is harmless.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}
