package fila

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
)

// Fan-out: a topic has subscriptions, and each subscription is a queue.
// Publish stores a copy of the message in every queue subscribed to the
// topic at that moment; each copy then lives on its own, with its own
// leases, attempts, retries, dead letters, stats and dedup keys, and is
// consumed with Receive, a worker, the CLI or Relay as any queue's
// messages are.
//
// Drivers that implement backend.Topics keep subscriptions and make the
// copies in the broker (RabbitMQ: a fanout exchange bound to the
// subscriptions' queues, one publish; PostgreSQL's log mode: one row per
// event, read by a cursor per subscription; Redis: one entry per event in
// the topic's stream, copied into each subscription as it is read). For
// the others the portable layer keeps subscriptions as marks of the topic
// and stores the copies with one backend.MultiEnqueuer call, all or none
// (PostgreSQL: one transaction), or else with one Enqueue per
// subscription, concurrently: a publish that fails part way has then
// stored the copies of some subscriptions and not others, and publishing
// again may give the first ones a second copy (at least once).

// topicMarkQueue prefixes the name under which the portable layer keeps a
// topic's subscriptions as marks, and topicSubMark the name of each mark.
// Queue names starting with topicMarkQueue are refused as subscriptions.
const (
	topicMarkQueue = "fila.topic."
	topicSubMark   = "sub/"
)

// MaxTopicNameLen is the longest topic name, in bytes.
const MaxTopicNameLen = MaxQueueNameLen - len(topicMarkQueue)

// ValidateTopicName reports whether name is a valid topic name: 1 to
// MaxTopicNameLen bytes of ASCII letters, digits, '.', '_' and '-', starting
// with a letter or digit (the queue-name rule, shorter).
func ValidateTopicName(name string) error {
	if len(name) > MaxTopicNameLen {
		return invalidf("topic name %.20q… is %d bytes; the limit is %d", name, len(name), MaxTopicNameLen)
	}
	if name == "" {
		return invalidf("topic name is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return invalidf("topic name %q must start with a letter or digit", name)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return invalidf("topic name %q has %q; use letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

func validateSubscription(topic, queue string) error {
	if err := ValidateTopicName(topic); err != nil {
		return err
	}
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	if strings.HasPrefix(queue, topicMarkQueue) {
		return invalidf("queue %q cannot subscribe: names starting with %q are kept for topics", queue, topicMarkQueue)
	}
	return nil
}

// topics returns the driver's native topics, or nil when the portable layer
// keeps subscriptions as marks; it fails when it can do neither.
func (c *Client) topics() (backend.Topics, error) {
	if t, ok := c.drv.(backend.Topics); ok {
		if sw, ok := c.drv.(backend.TopicsSwitch); !ok || sw.TopicsNative() {
			return t, nil
		}
	}
	if c.marker == nil || c.lister == nil {
		return nil, &UnsupportedError{Driver: c.name, Capability: "topics (the driver has neither backend.Topics nor listable marks)"}
	}
	return nil, nil
}

// TopicSubscribe makes queue a subscription of topic: every message
// published to topic after it returns is copied to queue. Messages published
// before are not. Subscribing twice is not an error, and one queue may
// subscribe to several topics.
func (c *Client) TopicSubscribe(ctx context.Context, topic, queue string) error {
	if err := validateSubscription(topic, queue); err != nil {
		return err
	}
	native, err := c.topics()
	if err != nil {
		return err
	}
	return c.call(ctx, func(ctx context.Context) error {
		if native != nil {
			return native.TopicSubscribe(ctx, topic, queue)
		}
		_, err := c.marker.MarkSet(ctx, topicMarkQueue+topic, topicSubMark+queue, time.Time{}, false)
		return err
	})
}

// TopicUnsubscribe ends queue's subscription to topic and deletes the queue
// with everything it holds (QueueDelete with Force), so its pending copies
// are not processed. A publish running at the same moment, in this process
// or another, may still leave its copy in the queue; nothing published after
// TopicUnsubscribe returns reaches it. Ending a subscription that does not
// exist is not an error.
func (c *Client) TopicUnsubscribe(ctx context.Context, topic, queue string) error {
	if err := validateSubscription(topic, queue); err != nil {
		return err
	}
	native, err := c.topics()
	if err != nil {
		return err
	}
	if _, ok := c.drv.(backend.QueueDeleter); !ok {
		return &UnsupportedError{Driver: c.name, Capability: "unsubscribing (it deletes the queue, which needs queue deletion)"}
	}
	err = c.call(ctx, func(ctx context.Context) error {
		if native != nil {
			return native.TopicUnsubscribe(ctx, topic, queue)
		}
		return c.marker.MarkDelete(ctx, topicMarkQueue+topic, topicSubMark+queue)
	})
	if err != nil {
		return err
	}
	return c.QueueDelete(ctx, queue, QueueDeleteParams{Force: true})
}

// TopicSubscriptions returns the queues subscribed to topic, sorted. Drivers
// that cannot list them (RabbitMQ over AMQP) return ErrUnsupported.
func (c *Client) TopicSubscriptions(ctx context.Context, topic string) ([]string, error) {
	if err := ValidateTopicName(topic); err != nil {
		return nil, err
	}
	native, err := c.topics()
	if err != nil {
		return nil, err
	}
	var subs []string
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		subs, err = c.subscriptions(ctx, native, topic)
		return err
	})
	return subs, err
}

// TopicRewind moves queue's subscription to topic to the point in time to:
// the topic's messages published at or after to are delivered to queue
// again, as copies at attempt 1 with their copy ids, and the messages
// before it are not delivered (a to after the newest message skips what
// the subscription has not read yet). Only messages the broker still keeps
// can be delivered again: PostgreSQL's log mode keeps them for its
// fila_topic_retention. The subscription's unsettled deliveries of the
// messages delivered again end (their Ack, Retry and Dead return
// ErrLeaseLost); a copy waiting for a retry is delivered by the rewind and
// again by its retry; messages published with a dedup key are copied into
// each subscription and are not delivered again. Other subscriptions are
// untouched. To start a new subscription from a point in the past,
// TopicSubscribe it, then TopicRewind it. A queue that is not subscribed to
// topic gives ErrInvalid; drivers that cannot rewind return ErrUnsupported.
func (c *Client) TopicRewind(ctx context.Context, topic, queue string, to time.Time) error {
	if err := validateSubscription(topic, queue); err != nil {
		return err
	}
	native, err := c.topics()
	if err != nil {
		return err
	}
	rw, ok := native.(backend.TopicRewinder)
	if !ok {
		return &UnsupportedError{Driver: c.name, Capability: "rewinding subscriptions (it needs a broker that keeps a topic's messages after they were read: PostgreSQL with fila_mode=log)"}
	}
	return c.call(ctx, func(ctx context.Context) error {
		return rw.TopicRewind(ctx, topic, queue, to)
	})
}

func (c *Client) subscriptions(ctx context.Context, native backend.Topics, topic string) ([]string, error) {
	if native != nil {
		subs, err := native.TopicSubscriptions(ctx, topic)
		if errors.Is(err, ErrUnsupported) {
			return nil, &UnsupportedError{Driver: c.name, Capability: "listing subscriptions"}
		}
		return subs, err
	}
	marks, err := c.lister.MarkList(ctx, topicMarkQueue+topic, topicSubMark)
	if err != nil {
		return nil, err
	}
	subs := make([]string, 0, len(marks))
	for _, m := range marks {
		subs = append(subs, strings.TrimPrefix(m, topicSubMark))
	}
	sort.Strings(subs)
	return subs, nil
}

// PublishResult is what PublishBatch reports besides the ids.
type PublishResult struct {
	// IDs are the published messages' ids, in order. The copy of IDs[i] in
	// subscription queue q has the id CopyID(IDs[i], q).
	IDs []string
	// Subscriptions is how many subscriptions got a copy of the batch, or
	// -1 when the driver knows only that at least one subscription got
	// them (RabbitMQ).
	Subscriptions int
}

// CopyID returns the id that the copy of the message published with id has
// in subscription queue: every copy has an id of its own, so that a
// subscription's dead letters, cancels and logs name its copy alone.
func CopyID(id, queue string) string { return backend.CopyID(id, queue) }

// Publish publishes one message to topic and returns its id; see
// PublishBatch.
func (c *Client) Publish(ctx context.Context, topic string, m Message) (string, error) {
	r, err := c.PublishBatch(ctx, topic, []Message{m})
	if len(r.IDs) == 1 {
		return r.IDs[0], err
	}
	return "", err
}

// PublishBatch copies msgs to every queue subscribed to topic. A topic
// without subscriptions stores nothing, and that is not an error: the result
// says how many subscriptions got the batch. The batch is validated as
// EnqueueBatch validates it. A dedup key applies in each subscription on
// its own: a subscription whose pending message holds the key gets no copy
// (and no error). UniqueFor is refused: hold the period on the subscription
// queues' own enqueues instead.
func (c *Client) PublishBatch(ctx context.Context, topic string, msgs []Message) (PublishResult, error) {
	bms, native, res, err := c.preparePublish(topic, msgs)
	if err != nil {
		return PublishResult{}, err
	}
	err = c.call(ctx, func(ctx context.Context) error {
		if native != nil {
			n, err := native.TopicPublish(ctx, topic, bms)
			res.Subscriptions = n
			return err
		}
		subs, err := c.subscriptions(ctx, nil, topic)
		if err != nil {
			return err
		}
		if me, ok := c.drv.(backend.MultiEnqueuer); ok && len(subs) > 0 && !hasDedup(bms) {
			if err := me.EnqueueMulti(ctx, batchesFor(subs, bms)); err != nil {
				return err
			}
			res.Subscriptions = len(subs)
			return nil
		}
		n, err := c.copyToAll(ctx, subs, bms)
		res.Subscriptions = n
		return err
	})
	if err != nil {
		return PublishResult{IDs: res.IDs}, err
	}
	return res, nil
}

// copyToAll enqueues the copies of bms to every queue of subs at once, and
// returns how many queues stored theirs.
func (c *Client) copyToAll(ctx context.Context, subs []string, bms []backend.Message) (int, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		n    int
		errs []error
	)
	for _, q := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.drv.Enqueue(ctx, q, copiesFor(q, bms))
			if err == nil && len(res) != len(bms) {
				err = fmt.Errorf("fila: driver returned %d results for %d messages", len(res), len(bms))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("subscription %s: %w", q, err))
				return
			}
			n++
		}()
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// batchesFor returns the copies of bms for every queue of subs.
func batchesFor(subs []string, bms []backend.Message) []backend.QueueBatch {
	out := make([]backend.QueueBatch, len(subs))
	for i, q := range subs {
		out[i] = backend.QueueBatch{Queue: q, Msgs: copiesFor(q, bms)}
	}
	return out
}

func hasDedup(bms []backend.Message) bool {
	for i := range bms {
		if bms[i].DedupKey != "" {
			return true
		}
	}
	return false
}

// copiesFor returns the copies of bms for subscription queue q.
func copiesFor(q string, bms []backend.Message) []backend.Message {
	out := make([]backend.Message, len(bms))
	for i := range bms {
		out[i] = bms[i]
		out[i].ID = backend.CopyID(bms[i].ID, q)
	}
	return out
}

// PublishTx publishes msgs to topic inside a transaction the caller owns, so
// the copies commit or roll back with the caller's own writes (the outbox
// for topics). The type of tx depends on the driver, as for EnqueueTx;
// drivers without transactional enqueue return ErrUnsupported. The
// subscriptions are those of the moment PublishTx runs.
func (c *Client) PublishTx(ctx context.Context, tx any, topic string, msgs []Message) (PublishResult, error) {
	bms, native, res, err := c.preparePublish(topic, msgs)
	if err != nil {
		return PublishResult{}, err
	}
	if txp, ok := c.drv.(backend.TxPublisher); ok && native != nil {
		err := c.call(ctx, func(ctx context.Context) error {
			n, err := txp.PublishTx(ctx, tx, topic, bms)
			res.Subscriptions = n
			return err
		})
		if err != nil {
			return PublishResult{IDs: res.IDs}, err
		}
		return res, nil
	}
	txe, ok := c.drv.(backend.TxEnqueuer)
	if !ok {
		return PublishResult{}, &UnsupportedError{Driver: c.name, Capability: "transactional publish"}
	}
	err = c.call(ctx, func(ctx context.Context) error {
		subs, err := c.subscriptions(ctx, native, topic)
		if err != nil {
			return err
		}
		if me, ok := c.drv.(backend.TxMultiEnqueuer); ok && len(subs) > 0 && !hasDedup(bms) {
			if err := me.EnqueueMultiTx(ctx, tx, batchesFor(subs, bms)); err != nil {
				return err
			}
			res.Subscriptions = len(subs)
			return nil
		}
		// One transaction is not safe for concurrent use: one subscription
		// after another.
		for _, q := range subs {
			r, err := txe.EnqueueTx(ctx, tx, q, copiesFor(q, bms))
			if err != nil {
				return fmt.Errorf("subscription %s: %w", q, err)
			}
			if len(r) != len(bms) {
				return fmt.Errorf("fila: driver returned %d results for %d messages", len(r), len(bms))
			}
			res.Subscriptions++
		}
		return nil
	})
	if err != nil {
		return PublishResult{IDs: res.IDs}, err
	}
	return res, nil
}

// preparePublish validates a publish and returns its messages, the
// driver's native topics (nil: the portable layer's) and the result with
// the ids filled in.
func (c *Client) preparePublish(topic string, msgs []Message) ([]backend.Message, backend.Topics, PublishResult, error) {
	if err := ValidateTopicName(topic); err != nil {
		return nil, nil, PublishResult{}, err
	}
	for i := range msgs {
		if msgs[i].UniqueFor != 0 {
			return nil, nil, PublishResult{}, invalidf("a published message cannot hold a dedup key for a period (UniqueFor): the period is per queue")
		}
	}
	// The batch rules are EnqueueBatch's; the topic's mark queue is a valid
	// queue name that stands in for the topic.
	bms, err := c.prepareBatch(topicMarkQueue+topic, msgs)
	if err != nil {
		return nil, nil, PublishResult{}, err
	}
	native, err := c.topics()
	if err != nil {
		return nil, nil, PublishResult{}, err
	}
	res := PublishResult{IDs: make([]string, len(bms))}
	for i := range bms {
		res.IDs[i] = bms[i].ID
	}
	return bms, native, res, nil
}
