package conformance

import (
	"context"
	"time"

	"github.com/fila-go/fila/backend"
)

// Feature names a promise of the contract that a driver may not keep. A
// harness lists the ones its driver lacks in Harness.Missing, with a reason;
// the tests that need them skip with that reason. Everything else must pass.
type Feature string

// Features the suite knows.
const (
	// FeatureDedup: dedup keys (contract: dedup-keys); the driver implements backend.Deduper.
	FeatureDedup Feature = "dedup"
	// FeatureDeadLetters: list, replay and purge dead letters (contract: dead-letter-management); the
	// driver implements backend.DeadLetterer.
	FeatureDeadLetters Feature = "dead-letters"
	// FeatureStats: queue counts (contract: stats); the driver implements
	// backend.StatsReader.
	FeatureStats Feature = "stats"
	// FeatureOldestReady: Stats.OldestReadyAt is filled in.
	FeatureOldestReady Feature = "stats-oldest-ready"
	// FeatureDeadByKind: Stats.DeadByKind is filled in.
	FeatureDeadByKind Feature = "stats-dead-by-kind"
	// FeatureConcurrentClaims: competing consumers never hold one message at
	// once (contract: visibility, under concurrency). Only a broken server lacks it.
	FeatureConcurrentClaims Feature = "concurrent-claims"
	// FeatureTxEnqueue: enqueue inside a caller's transaction; the driver
	// implements backend.TxEnqueuer and the harness sets BeginTx.
	FeatureTxEnqueue Feature = "tx-enqueue"
	// FeatureAtomicBatch: a failed Enqueue of a batch stores none of it.
	FeatureAtomicBatch Feature = "atomic-batch"
	// FeatureReceiveDelayed: take delayed messages early, for moving a queue
	// to another broker; the driver implements backend.DelayedReceiver.
	FeatureReceiveDelayed Feature = "receive-delayed"
	// FeatureDeadImport: store dead letters taken from another broker; the
	// driver implements backend.DeadImporter.
	FeatureDeadImport Feature = "dead-import"
	// FeatureQueueList: QueueList names every queue holding something
	// (backend.QueueLister).
	FeatureQueueList Feature = "queue-list"
	// FeatureQueueDelete: QueueDelete removes a queue with everything in it
	// (backend.QueueDeleter).
	FeatureQueueDelete Feature = "queue-delete"
	// FeatureBulkLimits: the largest message and batches the limits allow
	// (a body of fila.MaxBodyBytes, a batch of fila.MaxBatchBytes, a batch
	// of fila.MaxBatch messages) are stored and delivered within the
	// suite's time. Every broker Fila supports carries them; a harness
	// declares this missing only for a stand-in server too slow to move
	// them while the other tests run, or for a second configuration of a
	// driver whose first one moves them through the same code (a costlier
	// wire encoding). One past each limit is checked either way.
	FeatureBulkLimits Feature = "bulk-limits"
	// FeatureMarks: named marks with an expiry, stored in the broker
	// (backend.Marker); queue pause, periodic jobs and unique-for-a-period
	// dedup keys need them.
	FeatureMarks Feature = "marks"
	// FeatureMarkList: list a queue's marks (backend.MarkLister); cancel by
	// id needs it.
	FeatureMarkList Feature = "mark-list"
	// FeatureTopics: topics with subscriptions (contract: fan-out); the
	// driver implements backend.Topics, or backend.Marker and
	// backend.MarkLister for the portable layer's subscriptions.
	FeatureTopics Feature = "topics"
	// FeatureTopicList: TopicSubscriptions lists a topic's subscriptions.
	FeatureTopicList Feature = "topic-list"
	// FeatureTopicDelayCounts: QueueStats counts a delayed topic copy as
	// Delayed, not Ready, before any receiver of its subscription has seen
	// it. Without it only the sum of the two is checked.
	FeatureTopicDelayCounts Feature = "topic-delay-counts"
	// FeatureTopicRewind: TopicRewind delivers a topic's kept messages
	// again from a point in time (backend.TopicRewinder). Unlike the other
	// features it is checked only where the driver offers it: a driver
	// that does not implement backend.TopicRewinder, or whose topics the
	// portable layer keeps, skips the test without declaring anything.
	FeatureTopicRewind Feature = "topic-rewind"
	// FeatureTopicQueueDelete: QueueDelete of a subscription's queue
	// deletes its copies and keeps the subscription, so later publishes
	// reach the queue again.
	FeatureTopicQueueDelete Feature = "topic-queue-delete"
	// FeaturePriority: a queue's ready messages of a higher
	// Message.Priority are handed out first, and a message keeps its level
	// through delays, retries and dead letters (backend.Prioritizer).
	FeaturePriority Feature = "priority"
	// FeatureMessageList: a queue's pending messages can be listed by
	// state, paged and found by id, without claiming or changing them
	// (backend.MessageLister).
	FeatureMessageList Feature = "message-list"
)

// AllFeatures lists every Feature, for drivers that want to print a table.
var AllFeatures = []Feature{
	FeatureDedup, FeatureDeadLetters, FeatureStats, FeatureOldestReady, FeatureDeadByKind,
	FeatureConcurrentClaims, FeatureTxEnqueue, FeatureAtomicBatch, FeatureReceiveDelayed, FeatureDeadImport,
	FeatureQueueList, FeatureQueueDelete, FeatureBulkLimits, FeatureMarks, FeatureMarkList,
	FeatureTopics, FeatureTopicList, FeatureTopicDelayCounts, FeatureTopicRewind, FeatureTopicQueueDelete,
	FeaturePriority, FeatureMessageList,
}

// Tx is a transaction begun by Harness.BeginTx.
type Tx struct {
	// Value is passed to Client.EnqueueTx (for PostgreSQL a pgx.Tx).
	Value    any
	Commit   func(ctx context.Context) error
	Rollback func(ctx context.Context) error
}

// Harness tells the suite how to reach one driver.
type Harness struct {
	// Open returns a new, independent driver instance with its own
	// connections, as a separate process would have. The suite opens several
	// to play competing consumers and crashed consumers, and closes each.
	// Required.
	Open func(ctx context.Context) (backend.Driver, error)

	// Missing maps each feature the driver lacks to the reason, printed in
	// the skip line.
	Missing map[Feature]string

	// BeginTx begins a transaction on the broker for the transactional
	// enqueue tests. Required unless FeatureTxEnqueue is missing.
	BeginTx func(ctx context.Context) (Tx, error)

	// Lease is the short lease the tests use; default 1s.
	Lease time.Duration

	// RedeliveryBound is how long after a lease deadline, a retry delay or a
	// run-at the message must be receivable again, beyond what a Receive of
	// a message already waiting, started at that moment, takes; default 3s.
	// Drivers whose blocked receivers poll set it to their poll interval
	// plus a margin.
	RedeliveryBound time.Duration

	// WakeupBound is how soon a Receive blocked on an empty queue must return
	// after an enqueue (or another client's release) returned, beyond what a
	// Receive of a message already waiting, started at that moment, takes;
	// default 2s.
	WakeupBound time.Duration

	// Parallel bounds how many tests run at once; 0 runs them all at once
	// (they mostly wait on leases and delays). A harness for a server that
	// serializes its work, such as a stand-in on SQLite, sets a bound so the
	// suite's own load does not push single operations past its time
	// bounds.
	Parallel int

	// FanoutBacklog is how many messages a subscription nobody reads falls
	// behind by in the fan-out test (default 1000); a driver's own CI may
	// raise it (the contract's figure is 100,000).
	FanoutBacklog int

	// QueuePrefix starts every queue name the suite makes (default "conf"),
	// so leftovers are easy to find. Each test uses fresh, random names.
	QueuePrefix string
}

func (h *Harness) defaults() {
	if h.Lease == 0 {
		h.Lease = time.Second
	}
	if h.RedeliveryBound == 0 {
		h.RedeliveryBound = 3 * time.Second
	}
	if h.WakeupBound == 0 {
		h.WakeupBound = 2 * time.Second
	}
	if h.FanoutBacklog == 0 {
		h.FanoutBacklog = 1000
	}
	if h.QueuePrefix == "" {
		h.QueuePrefix = "conf"
	}
}
