package redis

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
}

// list returns the keys in the order the scripts expect them (KEYS[1..12]).
// The marks key is not among them: only the mark scripts use it.
func (k keys) list() []string {
	return []string{k.stream, k.leases, k.deadline, k.delayed, k.payloads, k.dedup, k.dead, k.deadKind, k.sweep, k.deadIDs, k.dedupIDs, k.moved}
}

// all returns every key of the queue that QueueDelete deletes: all but
// topics, as the queue's subscriptions outlive it.
func (k keys) all() []string { return append(k.list(), k.marks) }

func queueKeys(prefix, queue string) keys {
	tag := "{" + prefix + ":" + queue + "}"
	return keys{
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
	}
}
