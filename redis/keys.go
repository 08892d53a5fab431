package redis

import (
	"strconv"

	"github.com/fila-go/fila/backend"
)

// keys names every Redis key of one queue. All of them carry the hash tag
// {<prefix>:<queue>}, so they live in one Redis Cluster slot and every script
// of the driver touches a single slot.
type keys struct {
	stream   string // the ready and leased messages (a stream with one consumer group)
	leases   string // hash: early lease pseudo stream id -> "token\nattempt\nmessage id\ndedup key"
	deadline string // sorted set: lease consumer name (or early lease pseudo stream id) -> lease deadline (Unix ms)
	delayed  string // sorted set: message id -> run-at (Unix ms)
	payloads string // hash: message id -> msgpack of the stream fields of a delayed message
	dedup    string // hash: dedup key -> id of the pending message that holds it
	dead     string // stream of dead letters
	deadKind string // hash: kind -> number of dead letters of that kind
	sweep    string // hash: state of the sweep ("c" stream cursor, "t" next run, Unix ms)
	deadIDs  string // hash: message id -> stream id of its dead letter (for idempotent imports)
	dedupIDs string // hash: stream id -> "message id\ndedup key" for each entry holding a dedup key
	moved    string // set: lease consumers that lost an entry to another consumer (see the ack script)
	marks    string // sorted set: mark name -> expiry (Unix ms, +inf for none); see marks.go
	topics   string // hash: topic -> cursor on its log, "n:<topic>" -> log entries counted up to it; see topics.go
	tpats    string // hash: topic -> the kind patterns of the queue's subscription to it, when it has some; see topics.go
	// levels are the streams of the messages of levels 1 to MaxPriority
	// (levels[0] is level 1), each with its own consumer group as the
	// stream of level 0 has; each exists only while it holds entries (see
	// lua/prelude.lua).
	levels [backend.MaxPriority]string
}

// list returns the keys in the order the scripts expect them (KEYS[1..15]:
// the twelve of level 0, then the level streams). The marks key is not
// among them: only the mark scripts use it.
func (k keys) list() []string {
	return []string{k.stream, k.leases, k.deadline, k.delayed, k.payloads, k.dedup, k.dead, k.deadKind, k.sweep, k.deadIDs, k.dedupIDs, k.moved,
		k.levels[0], k.levels[1], k.levels[2]}
}

// levelStream returns the stream of the messages of level p.
func (k keys) levelStream(p int) string {
	if p = level(p); p > 0 {
		return k.levels[p-1]
	}
	return k.stream
}

// streams returns the queue's streams, level 0 first, as a Receive waits
// on them.
func (k keys) streams() []string {
	return []string{k.stream, k.levels[0], k.levels[1], k.levels[2]}
}

// all returns every key of the queue that QueueDelete deletes: all but
// topics and tpats, as the queue's subscriptions outlive it.
func (k keys) all() []string { return append(k.list(), k.marks) }

// The scripts know the levels 1 to 3 (lua/prelude.lua's KS1..KS3): this
// fails to compile when backend.MaxPriority is another number.
const _, _ uint = backend.MaxPriority - 3, 3 - backend.MaxPriority

func queueKeys(prefix, queue string) keys {
	tag := "{" + prefix + ":" + queue + "}"
	var levels [backend.MaxPriority]string
	for i := range levels {
		levels[i] = tag + ":stream:" + strconv.Itoa(i+1)
	}
	return keys{
		levels:   levels,
		stream:   tag + ":stream",
		leases:   tag + ":leases",
		deadline: tag + ":deadlines",
		delayed:  tag + ":delayed",
		payloads: tag + ":payloads",
		dedup:    tag + ":dedup",
		dead:     tag + ":dead",
		deadKind: tag + ":deadkinds",
		sweep:    tag + ":sweep",
		deadIDs:  tag + ":deadids",
		dedupIDs: tag + ":dedupsids",
		moved:    tag + ":moved",
		marks:    tag + ":marks",
		topics:   tag + ":topics",
		tpats:    tag + ":topicpats",
	}
}
