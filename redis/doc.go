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
//	c, err := fila.New(drv)
//
// It needs Redis 7.0 or later (XCLAIM dropping deleted entries from the
// pending list, exclusive XRANGE ranges).
//
// # Redis Cluster and replicas
//
// fila_mode=cluster takes a Redis Cluster (redis://node1:6379?fila_mode=cluster&addr=node2:6379&addr=node3:6379):
// every queue's keys share one hash slot. When a master fails, its replica
// takes over; calls fail with fila.ErrUnavailable meanwhile and the driver
// asks go-redis to reload the slot map on each failure, so it follows the
// new master as soon as it is promoted (measured here: 2.5-3.4 s after a
// kill -9 with cluster-node-timeout 1000 ms). Redis replicates
// asynchronously: a message whose Enqueue returned nil can be lost if its
// master fails before a replica has it. fila_wait_replicas=N
// (Options.WaitReplicas) makes Enqueue and DeadImport wait (WAIT) until N
// replicas acknowledged the write, failing with fila.ErrUnavailable after
// fila_wait_timeout (default 1s) otherwise (read_timeout is raised to
// fila_wait_timeout + 3s when shorter, so the wait is not cut into an i/o
// timeout, and go-redis's own retries are turned off, so a lost reply is
// not sent again); the failover test loses nothing with it. Give each master N+1 replicas if it must keep accepting enqueues
// after a failover (the promoted replica needs replicas of its own).
// Everything else (acks, retries, dead letters) is safe to lose in a
// failover: the message is delivered again.
//
// Every script that writes runs in a MULTI/EXEC transaction: go-redis sends
// a plain command again when its reply is late past the read timeout or the
// connection breaks, and a script run twice is not the same as once (a
// second ack would report the lease lost). A lost reply is then an error
// (fila.ErrUnavailable) whose outcome is unknown: an ack may have settled
// the message, a receive's claims come back when their lease ends.
//
// Open connects and sends PING before returning, within ctx: an
// unreachable server fails there with an error matching fila.ErrUnavailable,
// as with every driver. New, over a client the caller owns, does not wait
// for the server (call Ping). go-redis reconnects by itself afterwards.
//
// # Logging
//
// The driver logs to Options.Logger (fila.WithLogger through fila.Open). It
// logs nothing of its own for an outage, which every call reports with
// fila.ErrUnavailable. go-redis has no logger per client, only a
// process-wide one (redis.SetLogger) that prints to standard error; this
// package replaces it when imported with one that forwards each go-redis
// line to slog at Debug: to the logger of the open driver whose server
// address the line names (go-redis's dial failures do), else to the loggers
// of all open drivers, else to slog.Default(). So nothing goes to standard
// error outside slog, lines about an application's own go-redis clients
// included; an application that wants go-redis's lines elsewhere calls
// redis.SetLogger after importing this package.
//
// # Keys
//
// Every key of a queue carries the hash tag {<prefix>:<queue>}, so all of a
// queue's keys live in one Redis Cluster slot and each script touches one
// slot: the stream of ready and leased messages (with its consumer group
// "fila"), a sorted set of lease deadlines (one member per lease, see below),
// a sorted set of delayed messages by run-at with a hash of their payloads, a
// hash of dedup keys with an index of the stream entries that hold one, the
// dead-letter stream, a hash of dead-letter counts per kind, a hash from
// message id to dead-letter entry (so imports are idempotent), a hash of the
// early leases of ReceiveDelayed, a set of leases that lost an entry to
// another consumer, and the sweep's state. The deadline and delayed sorted
// sets and the early lease hash keep one permanent padding member (72 '~'
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
// Delivery is at least once. A lease belongs to one Receive call, not to
// one message: each call draws a token and reads its entries (XREADGROUP) as
// the consumer "l<token>" of the queue's group, so the group's pending list
// itself records who holds which entry, and the call adds a single member,
// the consumer's name scored with its deadline, to the deadline set. A
// receipt is the stream id plus the token, current while the entry is
// pending for that consumer. Nothing is written per message on receive, and
// a consumer is deleted with its deadline as soon as it holds nothing.
//
// Receive runs one script that promotes due delayed messages into the stream,
// takes over the entries of leases whose deadline has passed (XPENDING of
// that consumer, then XCLAIM of exactly those entries, so a short lease never
// steals a message leased longer by someone else), then reads new entries.
// For a batch (Max of 10 or more) while no lease is known to have expired,
// it instead runs a MULTI/EXEC transaction with a native XREADGROUP followed
// by a script that records the deadline, which is cheaper for many entries
// (see fastrecv.go). Extend gives one delivery a consumer and deadline of its
// own ("l<token>:<stream id>", XCLAIM … JUSTID), so the rest of its batch
// keeps the old deadline. Ack, Retry, Dead and Extend are scripts that check
// the receipt first and return ErrLeaseLost, changing nothing, when it is not
// current: the entry is not pending for its lease's consumer, or that
// consumer's deadline has passed by the server's clock (even before another
// Receive took the entry over). Ack checks a batch from one Receive with one XACK whose count
// must match, while its lease has never lost an entry to another consumer,
// and otherwise against the pending list; it does XACK + XDEL, so the stream
// only holds pending work. Retry moves the message to the delayed set (or
// straight back to the stream for a zero delay); Dead appends it to the
// dead-letter stream. A delivery's attempt is the entry's count of earlier
// deliveries (carried across retries) plus the pending entry's delivery
// count, so crashed deliveries count.
//
// XAUTOCLAIM is not used for takeover: it selects entries by idle time, one
// idle time for the whole group, so honouring a deadline per delivery would
// need a record per message, which is what the per-call lease avoids.
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
// A batch enqueue is stored whole: one script call, or, for a batch without
// dedup keys, delays or run-at times, plain XADDs in one MULTI/EXEC (such a
// batch may create the stream before its consumer group exists; the first
// Receive creates the group from the stream's start). Dedup keys are
// held in a hash (HSETNX semantics inside the enqueue script) and freed by
// the Ack and Dead scripts, or when the entry holding one turns out to have
// been deleted behind the driver's back.
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
// # Queue administration
//
// QueueList scans the keyspace (SCAN, on every master of a cluster) for the
// queues under the driver's prefix; a queue whose messages were all acked
// keeps its empty stream and stays listed until it is deleted. QueueDelete
// deletes all of a queue's keys with one DEL: deliveries leased from it are
// then pending nowhere, so settling them returns ErrLeaseLost.
//
// # Marks
//
// The driver implements backend.Marker and backend.MarkLister. A queue's
// marks live in one more key of its slot, {<prefix>:<queue>}:marks, a
// sorted set with the mark name as member and its expiry as score (Unix
// ms, +inf for none); QueueDelete deletes it with the others. MarkSet and
// MarkGet are scripts that compare the expiry with the Redis server's clock
// (TIME), so every client agrees on what expired, to the millisecond; a
// client whose clock is off sets expiries off by as much. MarkSet with
// onlyNew checks and writes in one script, so of concurrent callers exactly
// one wins. MarkSet and MarkList remove the expired marks they pass, and
// the key expires (PEXPIREAT) with its latest mark unless one is permanent,
// so forgotten marks do not hold memory. MarkList reads the whole set and
// sorts in Go (the members have different scores, so ZRANGEBYLEX cannot
// select by prefix): its cost grows with the queue's live marks. Marks are
// not covered by fila_wait_replicas: a failover can lose a mark set just
// before it. The marks key does not make a queue appear in QueueList.
//
// # Errors
//
// Failures a retry may cure wrap backend.ErrUnavailable (fila.ErrUnavailable):
// refused, lost or timed-out connections, an exhausted connection pool, and
// the LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, NOREPLICAS, BUSY,
// OOM and max-clients replies. Refused credentials (WRONGPASS, NOAUTH) and
// ACL refusals (NOPERM) wrap fila.ErrAccessDenied, which a retry does not
// cure. A MULTI/EXEC transaction that Redis discarded
// (EXECABORT, because a queued command was refused) stored nothing and is
// reported with the refusal of that command, so a transaction refused with
// LOADING while Redis loads its data is retryable like any other LOADING
// reply. A retried call may repeat work whose reply was lost (an enqueue
// stored twice, a settlement already applied reporting ErrLeaseLost).
//
// # Cost
//
// Every operation is one round trip (a script call, or for a batch Receive
// one transaction). Measured on a shared 2-core machine against a local
// Redis 7.0, as ratios to raw go-redis in the same run (bench_test.go): an
// EnqueueBatch of 100 reaches about 0.71–0.74 of pipelined XADD (0.5–0.58
// through the script), a single Enqueue about 0.9 of a single XADD, a
// Receive of 100 with AckBatch 0.52–0.59 of XREADGROUP COUNT 100 + XACK, and
// a single Receive+Ack 0.56–0.65 of XREADGROUP+XACK. Server-side (INFO
// commandstats), per 100 messages: the receive transaction ~0.11 ms, of
// which the XREADGROUP ~0.08 ms; the ack script ~0.16 ms, of which XDEL
// ~0.06 ms and XACK ~0.02 ms (raw XREADGROUP + XACK: ~0.1 ms). Each script
// carries only the Lua helpers it calls (link.go).
//
// # Recovery
//
// If the stream or its group vanishes (FLUSHALL, a restart without
// persistence, a DEL of the keys) the scripts recreate them (XGROUP CREATE …
// MKSTREAM, from the stream's start) instead of failing with NOGROUP; entries
// that were leased when their group vanished are then delivered again at
// once. A throttled sweep (Options.SweepEvery, default 30 s per queue, and at
// once when a takeover finds a lease whose pending entries are gone) does two
// things. It gives consumers that hold entries but have no deadline (a foreign
// XREADGROUP, or a read whose deadline was never recorded) an expired one
// after Options.OrphanIdle, so the next takeover hands their entries out, and
// forgets empty ones idle for an hour. And it walks the stream up to the
// group's last-delivered id as of the pass's start, 100 entries per Receive: an entry there that is
// not pending lost its pending entry (a group destroyed and recreated from
// "$", a consumer deleted by hand) and is re-added as a new entry with that
// delivery counted. An entry deleted from the stream behind the driver's back
// while leased is dropped from the pending list by the takeover's XCLAIM; its
// dedup key is freed.
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
// queue's keys under memory pressure, silently losing messages, lease
// deadlines or dedup keys. The driver reads the policy when it starts and logs a
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
//   - The group's consumer list holds one consumer per Receive call with
//     unsettled deliveries (and one per extended delivery), so XINFO
//     CONSUMERS grows with the work in flight, not with the clients.
package redis
