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
// A subscription made with KindPattern takes only the kinds its patterns
// match (backend.KindMatch); the portable layer keeps each pattern as a
// mark of its own, "sub/<queue>/<pattern>", beside "sub/<queue>" for a
// subscription that takes every kind, and enqueues only the copies a
// subscription takes.
//
// Drivers that implement backend.Topics keep subscriptions and make the
// copies in the broker (RabbitMQ: a fanout exchange bound to the
// subscriptions' queues, and a topic exchange behind it for patterns, one
// publish; PostgreSQL's log mode: one row per event, read by a cursor per
// subscription; Redis: one entry per event in the topic's stream, copied
// into each subscription as it is read), and apply the patterns. For
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

// Subscription is one queue's subscription to a topic.
type Subscription struct {
	// Queue is the subscription's queue.
	Queue string
	// Patterns are the kind patterns it takes messages of, sorted; none:
	// it takes every kind.
	Patterns []string
}

// SubscribeOption configures a TopicSubscribe.
type SubscribeOption func(*subscribeOptions)

type subscribeOptions struct {
	pattern string
}

// KindPattern makes a subscription take only the messages whose kind
// matches pattern, in the syntax of AMQP topic exchanges over the kind's
// dot-separated words: "*" matches exactly one word, "#" zero or more,
// any other word itself ("order.*.refunded", "*.brazil.#"). Words may be
// empty. A pattern is 1 to MaxKindLen bytes of printable UTF-8; the empty
// pattern is the same as no KindPattern: every kind.
func KindPattern(pattern string) SubscribeOption {
	return func(o *subscribeOptions) { o.pattern = pattern }
}

// ValidateKindPattern reports whether pattern is a valid kind pattern (see
// KindPattern); "" is valid and matches every kind.
func ValidateKindPattern(pattern string) error {
	if pattern == "" {
		return nil
	}
	if len(pattern) > MaxKindLen || !printable(pattern) {
		return invalidf("kind pattern %.40q must be 1 to %d bytes of printable UTF-8", pattern, MaxKindLen)
	}
	return nil
}

// KindMatch reports whether kind matches pattern (see KindPattern), as
// every driver routes it.
func KindMatch(pattern, kind string) bool { return backend.KindMatch(pattern, kind) }

// TopicSubscribe makes queue a subscription of topic: every message
// published to topic after it returns is copied to queue. Messages published
// before are not. One queue may subscribe to several topics.
//
// With KindPattern, the subscription takes only the messages whose kind
// matches the pattern. Subscribing again is not an error: it adds the
// pattern, and the subscription then takes the kinds any of its patterns
// matches (a subscription made without a pattern takes every kind). To
// narrow a subscription, TopicUnsubscribe it and subscribe it again.
func (c *Client) TopicSubscribe(ctx context.Context, topic, queue string, opts ...SubscribeOption) error {
	var o subscribeOptions
	for _, f := range opts {
		f(&o)
	}
	if err := validateSubscription(topic, queue); err != nil {
		return err
	}
	if err := ValidateKindPattern(o.pattern); err != nil {
		return err
	}
	native, err := c.topics()
	if err != nil {
		return err
	}
	return c.call(ctx, func(ctx context.Context) error {
		if native != nil {
			return native.TopicSubscribe(ctx, topic, queue, o.pattern)
		}
		_, err := c.marker.MarkSet(ctx, topicMarkQueue+topic, subMarkName(queue, o.pattern), time.Time{}, false)
		return err
	})
}

// subMarkName names the mark that keeps queue's subscription with pattern
// ("": every kind). Queue names hold no '/', so the queue ends at the
// first one.
func subMarkName(queue, pattern string) string {
	if pattern == "" {
		return topicSubMark + queue
	}
	return topicSubMark + queue + "/" + pattern
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
		// Every mark of the queue's subscription: one per pattern.
		marks, err := c.lister.MarkList(ctx, topicMarkQueue+topic, topicSubMark+queue)
		if err != nil {
			return err
		}
		for _, m := range marks {
			if q, _ := parseSubMark(m); q == queue {
				if err := c.marker.MarkDelete(ctx, topicMarkQueue+topic, m); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.QueueDelete(ctx, queue, QueueDeleteParams{Force: true})
}

// TopicSubscriptions returns topic's subscriptions, sorted by queue, each
// with its kind patterns. Drivers that cannot list them (RabbitMQ over
// AMQP) return ErrUnsupported.
func (c *Client) TopicSubscriptions(ctx context.Context, topic string) ([]Subscription, error) {
	if err := ValidateTopicName(topic); err != nil {
		return nil, err
	}
	native, err := c.topics()
	if err != nil {
		return nil, err
	}
	var subs []backend.Subscription
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		subs, err = c.subscriptions(ctx, native, topic)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Subscription, len(subs))
	for i, s := range subs {
		out[i] = Subscription{Queue: s.Queue, Patterns: s.Patterns}
	}
	return out, nil
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

func (c *Client) subscriptions(ctx context.Context, native backend.Topics, topic string) ([]backend.Subscription, error) {
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
	return subsFromMarks(marks), nil
}

// parseSubMark returns the queue and the pattern of a subscription mark.
func parseSubMark(name string) (queue, pattern string) {
	rest := strings.TrimPrefix(name, topicSubMark)
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i], rest[i+1:]
	}
	return rest, ""
}

// subsFromMarks returns the subscriptions that a topic's marks keep, sorted
// by queue: a queue with a mark without a pattern takes every kind.
func subsFromMarks(marks []string) []backend.Subscription {
	byQueue := map[string]*backend.Subscription{}
	all := map[string]bool{}
	var subs []*backend.Subscription
	for _, m := range marks {
		q, p := parseSubMark(m)
		s := byQueue[q]
		if s == nil {
			s = &backend.Subscription{Queue: q}
			byQueue[q] = s
			subs = append(subs, s)
		}
		if p == "" {
			all[q] = true
		} else {
			s.Patterns = append(s.Patterns, p)
		}
	}
	out := make([]backend.Subscription, len(subs))
	for i, s := range subs {
		if all[s.Queue] {
			s.Patterns = nil
		}
		sort.Strings(s.Patterns)
		out[i] = *s
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// PublishResult is what PublishBatch reports besides the ids.
type PublishResult struct {
	// IDs are the published messages' ids, in order. The copy of IDs[i] in
	// subscription queue q has the id CopyID(IDs[i], q).
	IDs []string
	// Subscriptions is how many subscriptions got a copy of at least one
	// message of the batch (a subscription with kind patterns takes only
	// the kinds they match), or -1 when the driver knows only that at least
	// one subscription got one (RabbitMQ).
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

// PublishBatch copies msgs to every queue subscribed to topic, each message
// to the subscriptions whose kind patterns take its kind (KindPattern). A
// topic without subscriptions, or none that takes a kind of the batch,
// stores nothing, and that is not an error: the result says how many
// subscriptions got a copy. The batch is validated as
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
		batches := batchesFor(subs, bms)
		if me, ok := c.drv.(backend.MultiEnqueuer); ok && len(batches) > 0 && !hasDedup(bms) {
			if err := me.EnqueueMulti(ctx, batches); err != nil {
				return err
			}
			res.Subscriptions = len(batches)
			return nil
		}
		n, err := c.copyToAll(ctx, batches)
		res.Subscriptions = n
		return err
	})
	if err != nil {
		return PublishResult{IDs: res.IDs}, err
	}
	return res, nil
}

// copyToAll enqueues every batch at once, and returns how many queues
// stored theirs.
func (c *Client) copyToAll(ctx context.Context, batches []backend.QueueBatch) (int, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		n    int
		errs []error
	)
	for _, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.drv.Enqueue(ctx, b.Queue, b.Msgs)
			if err == nil && len(res) != len(b.Msgs) {
				err = fmt.Errorf("fila: driver returned %d results for %d messages", len(res), len(b.Msgs))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("subscription %s: %w", b.Queue, err))
				return
			}
			n++
		}()
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// batchesFor returns, for every subscription of subs that takes a kind of
// bms, the copies of the messages it takes.
func batchesFor(subs []backend.Subscription, bms []backend.Message) []backend.QueueBatch {
	out := make([]backend.QueueBatch, 0, len(subs))
	for _, s := range subs {
		if len(s.Patterns) == 0 {
			out = append(out, backend.QueueBatch{Queue: s.Queue, Msgs: copiesFor(s.Queue, bms)})
			continue
		}
		var taken []backend.Message
		for i := range bms {
			if backend.KindMatchAny(s.Patterns, bms[i].Kind) {
				taken = append(taken, bms[i])
			}
		}
		if len(taken) > 0 {
			out = append(out, backend.QueueBatch{Queue: s.Queue, Msgs: copiesFor(s.Queue, taken)})
		}
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
		batches := batchesFor(subs, bms)
		if me, ok := c.drv.(backend.TxMultiEnqueuer); ok && len(batches) > 0 && !hasDedup(bms) {
			if err := me.EnqueueMultiTx(ctx, tx, batches); err != nil {
				return err
			}
			res.Subscriptions = len(batches)
			return nil
		}
		// One transaction is not safe for concurrent use: one subscription
		// after another.
		for _, b := range batches {
			r, err := txe.EnqueueTx(ctx, tx, b.Queue, b.Msgs)
			if err != nil {
				return fmt.Errorf("subscription %s: %w", b.Queue, err)
			}
			if len(r) != len(b.Msgs) {
				return fmt.Errorf("fila: driver returned %d results for %d messages", len(r), len(b.Msgs))
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
