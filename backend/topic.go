package backend

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/fila-go/fila/internal/uuidtext"
)

// Topics is implemented by drivers that keep topics and their subscriptions
// in the broker and copy a published message to every subscription
// themselves, in one broker operation where the broker allows it (contract:
// fan-out). A subscription is a queue: its copies are received, settled,
// dead-lettered and counted as any queue's messages are.
//
// Without Topics, the portable layer keeps each topic's subscriptions as
// marks (it needs Marker and MarkLister) and enqueues one copy per
// subscription with Enqueue.
type Topics interface {
	// TopicSubscribe makes queue a subscription of topic: every message
	// published to topic after it returns whose kind matches pattern
	// (KindMatch; "": every kind) is copied to queue. Subscribing again
	// adds the pattern: the subscription takes the kinds any of its
	// patterns matches, and one subscribed without a pattern takes every
	// kind. The portable layer has validated pattern.
	TopicSubscribe(ctx context.Context, topic, queue, pattern string) error
	// TopicUnsubscribe ends the subscription; a publish that starts after
	// it returns copies nothing to queue. It leaves queue's messages alone
	// (the portable layer deletes the queue). Ending a subscription that
	// does not exist is not an error.
	TopicUnsubscribe(ctx context.Context, topic, queue string) error
	// TopicSubscriptions returns topic's subscriptions, sorted by queue,
	// each with its patterns (sorted; none when it takes every kind). A
	// driver that cannot list them returns an ErrUnsupported error.
	TopicSubscriptions(ctx context.Context, topic string) ([]Subscription, error)
	// TopicPublish stores a copy of every message for each current
	// subscription of topic whose patterns match the message's kind; the copy of msgs[i] in queue q carries the id
	// CopyID(msgs[i].ID, q) and is otherwise msgs[i]. It returns how many
	// subscriptions it copied to, or -1 when the driver knows only that at
	// least one subscription got them (RabbitMQ); none is not an error
	// (nothing is stored). Dedup keys apply per subscription: a subscription whose
	// pending message holds the key gets no copy.
	TopicPublish(ctx context.Context, topic string, msgs []Message) (int, error)
}

// Subscription is one queue's subscription to a topic.
type Subscription struct {
	// Queue is the subscription's queue.
	Queue string
	// Patterns are the kind patterns it takes messages of; none: every
	// kind.
	Patterns []string
}

// TopicsSwitch is implemented by drivers whose Topics methods serve only in
// some configurations (PostgreSQL: only in its log mode). When
// TopicsNative reports false, the portable layer keeps topics itself, as
// for a driver without Topics.
type TopicsSwitch interface {
	TopicsNative() bool
}

// TopicRewinder is implemented by Topics drivers that keep a topic's
// messages after its subscriptions read them (PostgreSQL's log mode with a
// retention) and can move a subscription's read position back, or forward.
type TopicRewinder interface {
	// TopicRewind moves subscription queue of topic to to: the topic's
	// kept messages published at or after to are delivered to queue again
	// (as copies at attempt 1), those before are not delivered at all.
	// The subscription's unsettled deliveries of the messages delivered
	// again end (their settlements report ErrLeaseLost). A queue that is
	// not subscribed to topic gives an ErrInvalid error.
	TopicRewind(ctx context.Context, topic, queue string, to time.Time) error
}

// TxPublisher is implemented by Topics drivers that can publish inside a
// transaction the caller owns, as TxEnqueuer enqueues. Without it, the
// portable layer publishes in a transaction by enqueueing each copy with
// TxEnqueuer.EnqueueTx.
type TxPublisher interface {
	PublishTx(ctx context.Context, tx any, topic string, msgs []Message) (int, error)
}

// CopyID returns the id of the copy, in subscription queue, of the message
// published with id: a UUID that keeps id's first 48 bits (the
// millisecond of a version 7 id, so copies sort as their originals do) and
// takes the rest from a hash of id and queue. Every copy of one message
// has its own id, the same whichever process or driver makes it.
func CopyID(id, queue string) string {
	h := sha256.New()
	h.Write([]byte("fila copy\x00"))
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(queue))
	var sum [32]byte
	h.Sum(sum[:0])
	var b [16]byte
	copy(b[:], sum[:16])
	if raw, ok := uuidtext.Parse(id); ok {
		copy(b[0:6], raw[0:6])
	}
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return uuidtext.Format(b)
}

// QueueBatch is one queue's messages in a MultiEnqueuer call.
type QueueBatch struct {
	Queue string
	Msgs  []Message
}

// MultiEnqueuer is implemented by drivers that can store batches for
// several queues in one broker operation, all or none. The portable layer
// publishes to a topic's subscriptions with it when the driver has no
// backend.Topics and no message carries a dedup key; without it, it
// enqueues to each subscription on its own, concurrently.
type MultiEnqueuer interface {
	EnqueueMulti(ctx context.Context, batches []QueueBatch) error
}

// TxMultiEnqueuer is MultiEnqueuer inside a transaction the caller owns, as
// TxEnqueuer is to Enqueue; PublishTx uses it when present.
type TxMultiEnqueuer interface {
	EnqueueMultiTx(ctx context.Context, tx any, batches []QueueBatch) error
}
