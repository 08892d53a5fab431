// Package redis is Fila's Redis driver, built on Redis Streams with one
// consumer group per queue and Lua scripts for every state change. Import it
// for its side effect to open "redis://" and "rediss://" URLs:
//
//	import _ "github.com/fila-go/fila/redis"
//
//	c, err := fila.Open(ctx, "redis://localhost:6379/0?fila_prefix=jobs")
//
// or build a driver over a go-redis client you own (single node, Sentinel or
// Cluster):
//
//	drv, err := redis.New(rdb, redis.Options{Prefix: "jobs"})
//	c := fila.New(drv)
//
// It needs Redis 7.0 or later (XAUTOCLAIM reporting deleted entries,
// exclusive XRANGE ranges).
//
// # Keys
//
// Every key of a queue carries the hash tag {<prefix>:<queue>}, so all of a
// queue's keys live in one Redis Cluster slot and each script touches one
// slot: the stream of ready and leased messages (with its consumer group
// "fila"), a hash of lease records (stream id → token, attempt, message id,
// dedup key), a sorted set of lease deadlines, a sorted set of delayed
// messages by run-at with a hash of their payloads, a hash of dedup keys, the
// dead-letter stream, a hash of dead-letter counts per kind and a hash from
// message id to dead-letter entry (so imports are idempotent). The lease hash
// and the two sorted sets keep one permanent padding member (72 '~'
// characters, score +inf), longer than the listpack limits, so Redis keeps
// them in their hashtable and skiplist encodings: in the compact encoding
// each batched insert or delete would rescan the whole key. A stream entry
// has two fields, the message id and a payload Go packs (kind, enqueue time,
// max attempts, headers, body), plus the dedup key, attempts so far and last
// error when there are any. A message enqueued with attempts carried over
// from another broker (Message.Attempts) starts with that count.
//
// # Delivery semantics
//
// Delivery is at least once. Receive runs one script that promotes due
// delayed messages into the stream, takes over deliveries whose own recorded
// deadline has passed (XCLAIM of exactly those entries, so a short lease never
// steals a message leased longer by someone else), then reads new entries with
// XREADGROUP. For a batch (Max of 10 or more) while no lease is known to have
// expired, it instead runs a MULTI/EXEC transaction with the XREADGROUP
// outside any script, which is cheaper for many entries; the transaction
// records the leases of what it read atomically with the read (see
// fastrecv.go). Each Receive call draws a fresh lease token; a delivery's
// receipt is its stream id plus that token, recorded in the lease hash. Ack, Retry, Dead and Extend are scripts that
// check the token first and return ErrLeaseLost, changing nothing, when it is
// not current. Ack does XACK + XDEL, so the stream only holds pending work;
// Retry moves the message to the delayed set (or straight back to the stream
// for a zero delay); Dead appends it to the dead-letter stream. Attempts are
// a counter kept with each lease record and carried in the entry across
// retries; crashed deliveries count.
//
// A Receive that finds nothing waits with XREAD BLOCK on the stream from the
// group's last-delivered id (a read without side effects, so a cancelled
// Receive can never strand a message) until a new entry arrives, the next due
// time it knows of (earliest run-at or lease deadline) comes, or Options.Block
// (default 1 s) passes; then it claims again. Wake-up after an enqueue is one
// round trip (well under 10 ms on a local server); a delay, retry or lease
// expiry is noticed within Options.Block plus a round trip. go-redis cannot
// interrupt a blocking read, so a cancelled Receive returns at once and the
// abandoned XREAD finishes in the background within Options.Block; each
// blocked Receive holds one pooled connection while it waits, so size
// pool_size above the number of concurrent blocked receivers.
//
// A batch enqueue is one script call, so it is stored whole. Dedup keys are
// held in a hash (HSETNX semantics inside the enqueue script) and freed by
// the Ack and Dead scripts.
//
// # Moving queues
//
// The driver implements backend.DelayedReceiver and backend.DeadImporter for
// fila's relay. ReceiveDelayed takes delayed messages before their run-at
// (earliest first) without giving them a stream entry: the message's fields
// stay in the delayed payload hash and the lease is recorded under a pseudo
// stream id "d<run-at>-<message id>", which Ack, Retry, Dead and Extend
// recognise. Such a message never becomes ready before its run-at: Retry
// (and Release, which a relay uses on a batch it could not move) makes it
// ready at the later of its run-at and the retry delay, and when its lease
// expires unsettled, the next Receive (or ReceiveDelayed or QueueStats) puts
// it back in the delayed set at its run-at, or into the stream when that
// run-at has passed, with the attempt counted. DeadImport appends letters to the dead-letter stream with their
// reason, attempts and dead-at; a letter whose message id already has a
// dead letter in the queue is skipped. Imported letters are listed after
// the ones already there and count in the per-kind totals.
//
// # Errors
//
// Failures a retry may cure wrap backend.ErrUnavailable (fila.ErrUnavailable):
// refused, lost or timed-out connections, an exhausted connection pool, and
// the LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, NOREPLICAS, BUSY,
// OOM and max-clients replies. A retried call may repeat work whose reply was
// lost (an enqueue stored twice, a settlement already applied reporting
// ErrLeaseLost).
//
// # Cost
//
// Every operation is one round trip (a script call, or for a batch Receive
// one transaction). Measured on a shared 2-core machine against a local
// Redis 7.0, an EnqueueBatch of 100 reaches about 0.6 of raw pipelined
// XADD, a single Enqueue about 0.6 of a single XADD, a single Receive+Ack
// about 0.65 of XREADGROUP+XACK, and a Receive of 100 with AckBatch about
// 0.39 of XREADGROUP COUNT 100 + XACK (0.35 when the XREADGROUP ran inside
// the receive script). Server-side, per 100 messages: the receive
// transaction ~0.3 ms, of which the native XREADGROUP ~0.08 ms and the
// script recording the leases ~0.1 ms (XPENDING, HSET, ZADD and their Lua
// conversions); the ack script ~0.2 ms, of which XDEL ~0.06 ms (see
// bench_test.go).
//
// # Recovery
//
// If the stream or its group vanishes (FLUSHALL, a restart without
// persistence, a DEL of the keys) the scripts recreate them (XGROUP CREATE …
// MKSTREAM) instead of failing with NOGROUP. A delivery whose pending entry
// was lost while its stream entry survived is re-added as a new entry when its
// lease expires. A throttled sweep (Options.SweepEvery, default 30 s per
// queue) walks the pending list with XAUTOCLAIM: pending entries with no lease
// record (read by a foreign XREADGROUP, or whose record was lost) get an
// expired lease so they are handed out again, and entries deleted from the
// stream behind the driver's back (the third element of XAUTOCLAIM's reply)
// have their lease and dedup key cleaned up. The sweep also forgets consumers
// of closed clients that hold nothing and have been idle for an hour.
//
// # Durability
//
// Enqueue returns once Redis has applied the script in memory. What a crash
// of the Redis server can lose depends on its persistence settings, not on
// this driver:
//   - appendonly yes, appendfsync always: every acknowledged write is on disk
//     before the reply; nothing acknowledged is lost (slowest).
//   - appendonly yes, appendfsync everysec (the usual setting): up to about
//     one second of acknowledged enqueues, acks and retries can be lost; a
//     lost ack means a message is delivered again, a lost enqueue means a
//     message is gone.
//   - RDB snapshots only, or no persistence: everything since the last
//     snapshot, or everything.
//
// With replication, a failover can lose writes the replica had not received
// (use WAIT if you need more; this driver does not).
//
// # Memory and eviction
//
// maxmemory-policy must be noeviction: any other policy lets Redis evict a
// queue's keys under memory pressure, silently losing messages, lease records
// or dedup keys. The driver reads the policy when it starts and logs a
// warning otherwise (it cannot read it where CONFIG is disabled). Memory stays
// bounded by the pending work: acked entries are deleted, never left for
// blind trimming (a trimmed pending entry would lose its payload), and each
// dead-letter stream keeps at most Options.DeadCap entries (default 100000),
// dropping the oldest.
//
// # Caveats
//
//   - No transactional enqueue (TxEnqueuer): a MULTI cannot run the enqueue
//     script's reads.
//   - Scripts are atomic but not rolled back: a script aborted mid-way (for
//     example by a server out of memory) may leave a batch half stored.
//   - Lease deadlines, delays and run-at times use the Redis server's clock;
//     Delivery.Deadline is that clock's deadline.
//   - Ordering is FIFO for a single consumer without retries or delays;
//     retried and promoted messages go to the end of the stream.
//   - A long lease that is never extended may show in XPENDING as owned by
//     another consumer after a sweep: the lease record, not the pending list,
//     decides who holds a message.
package redis
