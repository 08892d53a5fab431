// Package redis is Fila's Redis driver, built on Redis Streams with one
// consumer group per queue and Lua scripts for every change of state (the
// files of the package's lua folder, embedded). It needs Redis 7.0 or later
// and is built on github.com/redis/go-redis/v9.
//
// # Opening
//
// Import the package for its side effect, which registers the redis:// and
// rediss:// URL schemes, and open a client:
//
//	import _ "github.com/fila-go/fila/redis"
//
//	client, err := fila.Open(ctx, "redis://localhost:6379/0?fila_prefix=jobs")
//
// Or build a driver over a go-redis client the application owns (single
// node, Sentinel or Cluster) with [New] and wrap it with fila.New, as
// the example of New shows; Close then leaves the go-redis client open.
//
// Open connects and sends PING before it returns: an unreachable server
// fails there with fila.ErrUnavailable. New does not fail when the server
// does not answer (call Client.Ping). go-redis reconnects by itself afterwards.
//
// # URL parameters
//
// Parameters starting with fila_ are Fila's; an unknown one fails with
// fila.ErrInvalid. Every other parameter goes to go-redis, which refuses
// (as fila.ErrInvalid) what it does not know.
//
//	parameter             default   meaning
//	fila_prefix           fila      start of every key: a queue's keys are {<prefix>:<queue>}:…
//	                                (Options.Prefix; no '{' or '}')
//	fila_mode             single    single, cluster (Redis Cluster) or sentinel
//	fila_dead_cap         100000    dead letters kept per queue, the oldest dropped beyond it;
//	                                0 keeps all (Options.DeadCap)
//	fila_block            1s        longest single wait of a blocked Receive before it looks for
//	                                delays and leases that ended; bounds their latency
//	                                (Options.Block)
//	fila_sweep            30s       how often, per queue, a Receive sweeps for leases that lost
//	                                their records (see Recovery); 0 turns it off
//	                                (Options.SweepEvery)
//	fila_wait_replicas    0         replicas that must acknowledge each enqueue (WAIT) before it
//	                                returns (Options.WaitReplicas)
//	fila_wait_timeout     1s        how long an enqueue waits for those replicas before failing
//	                                with fila.ErrUnavailable (Options.WaitTimeout)
//	addr                  —         more cluster seed nodes (fila_mode=cluster) or sentinels
//	                                (fila_mode=sentinel), host:port, repeated
//	master_name           —         the Sentinel master's name (fila_mode=sentinel)
//	read_timeout          3s        go-redis's; raised to fila_wait_timeout + 3s when
//	                                fila_wait_replicas is set and it is shorter
//	max_retries           go-redis  go-redis's own retries; forced off (-1) when
//	                                fila_wait_replicas is set
//	any other             go-redis  passed to go-redis's URL parser for the mode: db, pool_size,
//	                                dial_timeout, …
//
// A blocked Receive holds one pooled connection while it waits (the
// Receives of one client waiting on the same queue share one), so set
// pool_size above the number of queues whose receives may block at once.
//
// # Durability
//
// Enqueue returns once Redis has applied the write in memory (contract:
// durable-enqueue). What a crash of the server can lose then depends on its
// persistence settings, not on Fila:
//
//   - appendonly yes, appendfsync always: nothing acknowledged is lost
//     (slowest);
//   - appendonly yes, appendfsync everysec (the usual setting): up to about
//     a second of acknowledged writes. A lost enqueue is a lost message; a
//     lost ack or retry means a message delivered again;
//   - RDB snapshots only, or no persistence: everything since the last
//     snapshot, or everything.
//
// Redis replicates asynchronously: when a master fails before its replica
// has a write, the promoted replica does not have it. Set
// fila_wait_replicas=N to make Enqueue (and dead-letter imports) wait until
// N replicas acknowledged, and give each master N+1 replicas if it must
// keep accepting enqueues after a failover. Acks, retries and dead letters
// lost in a failover only deliver a message again; marks are not covered
// by the wait.
//
// maxmemory-policy must be noeviction: any other policy lets Redis evict
// queue keys under memory pressure and lose messages, leases or dedup keys.
// The driver logs a warning at open when it can read another policy.
// Memory holds pending work only (acked messages are deleted, never
// trimmed) plus up to fila_dead_cap dead letters per queue.
//
// # Wake-up and latency
//
// A Receive blocked on an empty queue wakes one round trip after an enqueue
// (well under 10 ms on a local server). A Receive that knows the next due
// time (a run-at or lease deadline it saw) wakes at it on a local timer.
// Delays, retries and expired leases created by other clients after it
// began waiting are noticed within fila_block plus a round trip.
// A cancelled Receive returns at once; its blocking read ends in the
// background within fila_block, holding its connection until then. A claim
// it has already sent (the receive transaction) is not abandoned: it runs
// to its end, under a timeout of its own (10 s), and the Receive returns
// what it claimed, which fila.Client.Receive hands out, or gives back after
// Close (contract: cancellation).
//
// # Redis Cluster and Sentinel
//
// With fila_mode=cluster
// (redis://node1:6379?fila_mode=cluster&addr=node2:6379&addr=node3:6379)
// all of a queue's keys share one hash slot. When a master fails, calls
// fail with fila.ErrUnavailable until its replica is promoted, and then
// follow it (2.5 to 3.4 s after a kill -9 in the project's test, with
// cluster-node-timeout 1 s).
//
// With fila_mode=sentinel
// (redis://sentinel1:26379?fila_mode=sentinel&master_name=mymaster&addr=sentinel2:26379)
// the URL names Sentinels, not the master, and go-redis follows the master
// they report; the URL's user and password are the Sentinels' (see
// go-redis's ParseFailoverURL). Either way, replication is asynchronous
// (see Durability).
//
// # Logging
//
// The driver logs to fila.WithLogger's logger (Options.Logger with New);
// an outage shows as fila.ErrUnavailable on every call rather than as log
// lines. go-redis has only a process-wide logger, which prints to standard
// error; importing this package replaces it with one that forwards every
// go-redis line to slog at Debug (to the logger of the driver whose server
// the line names, else to every open driver's, else to slog.Default()),
// including lines about the application's own go-redis clients. Call
// go-redis's SetLogger after the import to send them elsewhere.
//
// # Caveats
//
//   - A write whose reply was lost (a timeout, a broken connection) fails
//     with fila.ErrUnavailable and an unknown outcome: an enqueue may have
//     been stored, an ack applied (a retry then reports ErrLeaseLost), a
//     receive's claims come back when their leases end.
//   - Scripts are atomic but not rolled back: one aborted midway, by an out
//     of memory server for example, may leave a batch partly stored.
//   - Lease deadlines, delays and run-at times follow the Redis server's
//     clock; Delivery.Deadline is that clock's deadline. Mark expiries
//     (pause, cancel, unique periods) are computed by the client's clock
//     and compared by the server's, so a skewed client sets them off by
//     its skew.
//   - Beyond fila_dead_cap a queue's oldest dead letters are deleted.
//   - A queue whose messages were all acked keeps an empty stream, and
//     QueueList names it until QueueDelete.
//   - Ordering: a single consumer without retries or delays gets FIFO
//     order within a level; retried and promoted messages go to the end of
//     their level's stream.
//   - XINFO CONSUMERS shows one consumer per Receive call with unsettled
//     deliveries (and one per extended delivery): it grows with the work in
//     flight, not with the clients.
//   - MarkList reads all of a queue's live marks, so message cancel costs
//     grow with them.
//
// # Topics
//
// A topic is one stream, its log: Publish appends each message once,
// whatever the number of subscriptions (none that takes it: nothing is
// stored), with
// fila_wait_replicas applying as to an enqueue. Each subscription queue
// keeps a cursor on the log, and its Receives copy what lies past the
// cursor into the queue as they need it (in the claim's own transaction,
// ahead of need: about 1 MiB of events, at most 1,000, per topic and
// copy), with the copy's id (fila.CopyID); from there a copy is an
// ordinary message of the queue. The
// log keeps an event until every subscription has copied it, so a
// subscription nobody reads keeps the events it has not read, once, not a
// copy per subscription: it shows them as Ready in its QueueStats (with
// their age), and the driver logs a warning naming it once its oldest
// unread event is a minute old (checked with publishes and reads, at most
// once a minute per topic). The way out is to consume it, to QueueDelete
// its queue (the subscription stays and skips what was published before)
// or to unsubscribe it.
//
// What it costs: a publish costs about what an enqueue does whatever the
// number of subscriptions (×0.87–0.92 of an enqueue in batches of 100 at 20
// subscriptions, against ×0.08 when each got a copy at publish), and a
// lagging subscription holds each event once (a fifth of the memory at five
// subscriptions). The copy is paid by the subscription's receives instead:
// Redis spends about twice the CPU per delivered message (6.5 against
// 3.3 µs in the project's measurement), so a subscription drains at about
// two thirds of a plain queue's rate, and a receive that reads the log takes
// one more round trip (BENCHMARKS.md, "Redis topics as one log").
//
// Kind patterns (fila.KindPattern) are kept in a hash beside the log
// (queue -> its patterns) and in one of the subscription queue's (topic ->
// its patterns, each with the log position from which it applies; none:
// every kind). A publish appends only the messages some subscription's
// patterns match, and counts the subscriptions that take one; a copy
// passes over the events the queue's patterns do not take, its cursor
// moving past them all the same, with a matcher in Lua that follows
// fila.KindMatch. A pattern added to a subscription applies to what is
// published after it was added, not to the older events it has not copied
// yet. QueueStats of a subscription with patterns counts as Ready the
// uncopied events they take among the first 1,000, and every one beyond.
//
// A Receive learns which topics its queue subscribes to with each claim, so
// one blocked since before a subscription made by another client notices it
// within fila_block. Messages with a dedup key, a delay or a run-at are
// copied into each subscription whose patterns match them when published,
// as plain enqueues (so a publish that mixes them with others is not atomic
// across subscriptions). Subscriptions are also written as the marks the
// portable layer, and earlier Fila versions, keep (queue
// fila.topic.<topic>, mark sub/<queue>, or sub/<queue>/<pattern> per
// pattern), so those versions keep copying to them; a subscription such a
// version made is adopted, with its patterns, the first time this one
// touches its topic. Every step touches one hash slot, so
// topics work on Redis Cluster. TopicRewind is not supported (the log keeps
// nothing that every subscription has read).
//
// # Priorities
//
// A message's level (fila.Message.Priority, 0 to fila.MaxPriority) picks
// its stream: level 0 stays in the queue's stream, {<prefix>:<queue>}:stream
// (so queues and data from before levels need no migration), and level l
// has {<prefix>:<queue>}:stream:<l>, with a consumer group of the same
// name, made when a message of that level arrives and deleted by the first
// claim that finds it empty. The level is also a field of the entry ("l"),
// so a retry, an expired lease, a due delayed message, a dead letter's
// replay and a topic copy (the log keeps the field) go back to the stream
// of their level, and deliveries and dead letters report it. A claim
// (receive script) reads the levels from the highest down, each level's
// expired leases then its new entries, until it has Max; receipts,
// Extend's consumers and the dedup index name an entry of level l as
// "l:<stream id>", as stream ids of two streams may be equal. Every level's
// stream shares the queue's hash tag, so this works on Redis Cluster.
// QueueStats counts the ready messages of each level (ReadyByPriority):
// each level's stream, and the level of each due delayed message, read
// from its record; it leaves them uncounted (nil) while more than 1,000
// delayed messages are due at once, or a subscription has topic events it
// has not copied yet.
//
// What it costs a queue that never uses levels: none of their keys exist,
// and a claim and each settle check them with one EXISTS of the three
// (about 2 µs, 8%, more per receive script call in the project's
// measurement; one more command per fast path batch). The fast path reads
// level 0 only, so it serves a queue only while its last claim saw no
// level stream; should its script find one (another client made it since),
// it gives back what it read (the group's last-delivered id set back,
// attempts untouched) and the receive script claims instead. A blocked
// Receive waits on the four streams with one XREAD. Queues with levels pay
// the receive script for every claim, and a probe of each level in use.
// Strict priority may starve the lower levels. A subscription copies its
// topic's log in publish order, ahead of need (see Topics): a message of a
// higher level still beyond that copy is not yet in the queue, so the
// copies already there are handed out first. Driver versions from before
// levels read level 0 only.
//
// # Recovery
//
// If a queue's stream or consumer group vanishes (FLUSHALL, a restart
// without persistence, a DEL), the driver recreates them instead of
// failing; messages that were leased then are delivered again at once. The
// periodic sweep (fila_sweep) hands out messages held by consumers Fila did
// not create, after Options.OrphanIdle (5 min), and re-adds messages whose
// pending entry was lost.
//
// # Message listing
//
// MessageList (fila.Client.MessageList) runs one read-only script: it
// claims nothing, counts no delivery and moves nothing (due delayed
// messages and expired leases are classified where they lie, on the
// server's clock, as QueueStats counts them). Ready messages are listed in
// the order Receive hands them out: level by level from the highest, each
// level's expired leases, then its never-delivered entries, then its due
// delayed messages by run-at (a ready entry is Due at its stream id's
// time); delayed ones by run-at; leased ones by lease deadline.
// WithoutBodies cuts each payload before its body on the server. A page
// costs about its size, but a search by id reads the queue's entries in
// order (there is no index by message id), at most 5,000 per call, so in a
// long queue it may return short or empty pages with a cursor to go on. A
// subscription's topic events not yet copied into its queue (QueueStats
// counts them as ready) are not listed: they lie in the topic's log until a
// claim copies them.
//
// # Features
//
// Everything but transactional enqueue (conformance.FeatureTxEnqueue):
// Redis has no transaction an application can share with the queue, since
// MULTI cannot hold the enqueue script's reads. Dedup keys, dead-letter
// management, stats (every column), atomic batches, moving queues, queue
// listing and deletion, marks with listing, message listing, topics (a log
// per topic) and priorities (a stream per level) are all there; rewinding a subscription
// (conformance.FeatureTopicRewind) is not.
//
// # Errors
//
// Failures a retry may cure wrap fila.ErrUnavailable: refused, lost or
// timed-out connections, an exhausted connection pool, and the LOADING,
// READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, NOREPLICAS, BUSY, OOM and
// max-clients replies (a MULTI/EXEC transaction refused with EXECABORT is
// classified by the command that was refused). Refused credentials
// (WRONGPASS, NOAUTH) and ACL refusals (NOPERM) wrap fila.ErrAccessDenied.
//
// How the driver works inside (keys, per-call leases, the scripts and the
// fast receive path, moving queues, marks, recovery) and what was measured
// are in docs/design.md in the repository.
package redis
