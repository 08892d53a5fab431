// Package rabbitmq is Fila's RabbitMQ driver: quorum queues, dead-letter
// exchanges, delay queues and publisher confirms, with leases kept by the
// client. It needs RabbitMQ 3.10 or later (it is tested on 3.10) and speaks
// AMQP 0-9-1 through github.com/rabbitmq/amqp091-go.
//
// # Opening
//
// Import the package for its side effect, which registers the amqp:// and
// amqps:// URL schemes, and open a client:
//
//	import _ "github.com/fila-go/fila/rabbitmq"
//
//	client, err := fila.Open(ctx, "amqp://guest:guest@localhost:5672/?fila_prefix=app")
//
// Or build a driver from [Options] with [New] and wrap it with fila.New
// (Options.TLS takes a tls.Config for amqps).
//
// Open (and New) make the first connection before they return: an
// unreachable broker fails there with fila.ErrUnavailable, refused
// credentials (ACCESS_REFUSED, a failed login, a vhost the user may not
// use) with fila.ErrAccessDenied. Afterwards the driver reconnects by
// itself, with backoff, and declares again what it needs. Declares,
// deletes, binds and mark probes return when their call's context ends even
// if the broker answers heartbeats but not them (an overloaded cluster can
// leave a quorum queue's declare unanswered): give calls a deadline. A
// dead-letter scan's or a level queue's basic.get, and a consumer's start,
// still wait for the broker's answer or the connection's end.
//
// # URL parameters
//
// Parameters starting with fila_ are Fila's. amqp091-go's own parameters
// pass through to it; any other parameter fails with fila.ErrInvalid.
//
//	parameter               default   meaning
//	fila_prefix             fila      start of every queue and exchange name: the Fila queue
//	                                  "orders" is the RabbitMQ queue "fila.orders"; at most
//	                                  109 bytes (Options.Prefix)
//	fila_prefetch           250       cap on a consumer's prefetch, at most 65535; the prefetch
//	                                  follows what waiting Receive calls ask for
//	                                  (Options.MaxPrefetch)
//	fila_buffer_idle        1s        how long pushed messages wait in the client with no
//	                                  Receive waiting before they are given back to the queue,
//	                                  and an idle consumer keeps credit it was not pushed
//	                                  messages for (Options.BufferIdle)
//	fila_reconnect_max      2s        longest backoff between reconnection attempts
//	                                  (Options.ReconnectMax)
//	fila_reconnect_wait     5s        how long a call waits for a lost connection to come back
//	                                  before failing with fila.ErrUnavailable
//	                                  (Options.ReconnectWait)
//	fila_connection_name    fila      the connection name RabbitMQ shows
//	                                  (Options.ConnectionName)
//	fila_hosts              —         the other nodes of a cluster, host:port,host:port
//	                                  (Options.Hosts)
//	fila_management_url     —         the management plugin's HTTP API, http(s)://host:15672,
//	                                  without credentials (the amqp URL's are used): with it
//	                                  QueueList and TopicSubscriptions answer
//	                                  (Options.ManagementURL)
//	heartbeat,              amqp091   passed to amqp091-go
//	connection_timeout,
//	channel_max,
//	auth_mechanism
//	certfile, keyfile,      —         TLS files for amqps, passed to amqp091-go
//	cacertfile,
//	server_name_indication
//
// # What it creates
//
// For a Fila queue Q and prefix P the driver declares, on first use: P.Q, a
// durable quorum queue of ready messages; P.Q:dead, an exchange and
// durable classic queue holding its dead letters; P.Q:delay:MS, classic
// queues that hold delayed messages and expire after 10 minutes unused;
// P.Q:mark:H, P.Q:marks and P.Q:marks:ttl for marks; P.Q:dead:scan, an
// exclusive queue, while its dead letters are read. For a priority level
// L (1 to 3) that Q uses: P.Q:pL, a durable quorum queue, with its delay
// queues P.Q:pL:MS; with the first of them or Q's first subscription,
// P.Q:levels, a durable headers exchange, and P.Q:levels:0, a durable
// fanout exchange (see Priorities). For a topic T: P.T:topic, a durable
// fanout exchange, and P.T:route, a durable topic exchange bound to it;
// for a subscription of Q to T with kind patterns: P.Q:sub:H, a durable
// auto-delete exchange (see Topics). The user needs configure, write and
// read permission on these names, and read permission on amq.direct
// (marks use it). Exchange-to-exchange bindings take the same permissions
// as binding a queue: binding P.T:route to P.T:topic needs write on
// P.T:route and read on P.T:topic, binding P.Q:sub:H to P.T:route write on
// P.Q:sub:H and read on P.T:route, binding P.Q:levels to P.T:topic or to
// P.Q:sub:H write on P.Q:levels and read on the other.
//
// # Durability
//
// Every publish is persistent and mandatory, on a channel in confirm mode:
// Enqueue returns once the broker confirmed every message, which for a
// quorum queue means a majority of its nodes have it on disk (contract:
// durable-enqueue). A nack, or a return because the queue is gone, fails
// the call. A batch is not atomic: a failed batch may have stored part of
// itself. Moving a delayed message from its delay queue to the main queue
// is at most once in RabbitMQ: a broker crash at that moment can lose it.
//
// # Leases, attempts and duplicates
//
// RabbitMQ has no visibility timeout, so the driver keeps leases: a lease
// whose deadline passes is rejected back to the queue (checked every
// 50 ms), and a settlement of it gets ErrLeaseLost. When no Receive waits
// on the holder's client, its consumer is cancelled first, so the message
// goes to a Receive waiting on another client (10 to 60 ms after the
// deadline on an idle machine) rather than back into the idle holder's
// buffer. A client that crashes
// or loses its connection gives up its leases at once: the broker requeues
// those messages before their deadlines, since only an open channel can
// hold a message.
//
// Attempts come from the quorum queue's delivery count plus a count carried
// across the driver's own republishes. Messages pushed to a client that
// gives them back unused (fila_buffer_idle, a Receive whose context ended
// as they arrived, Close, a Retry, Release or Dead while no Receive waits
// on the client, which cancels its consumer and gives back what was on its
// way), or that loses its connection with them buffered, are counted by
// the broker (a give-back only before RabbitMQ 4.3). The client remembers
// them (up to 4,096 per queue): when one comes back to it with exactly the
// count those returns explain, it shows the attempt it would have had. A
// message that another client, or a process started again, receives next
// shows the extra attempt, as does one a crashed client held buffered.
//
// AMQP does not answer an ack: nil means the ack was written, and if the
// connection breaks before the broker reads it the message is delivered
// again. Release (a Retry without delay nor reason, which the portable
// layer also uses to give back what it will not hand out) is one
// basic.reject with requeue: a crash at any moment leaves the message in
// the queue once. Retry with a delay or a reason and Dead change the
// message, which AMQP cannot do in place: they publish a copy (confirmed)
// and then ack the original. The window between the broker's confirm and
// the ack's write holds no round trip, but a process killed or a
// connection lost inside it leaves the message twice, both at the next
// attempt: the copy (with its reason, after its delay, or as a dead
// letter) and the original, back at once with its previous last error
// (TestRetryCrashWindow). Closing it would take AMQP transactions on the
// consumer's channel, a round trip for every ack on it.
//
// # Delays
//
// Each delay length has its own queue, rounded down to two significant
// digits of milliseconds, so delays never block each other; a message that
// reaches the main queue early waits again for the time left, so it is
// never early. A delayed message is late by the broker's TTL timer plus a
// hop or two, typically milliseconds. The first delayed enqueue of a delay
// length declares its queue (a round trip); the message is not late by
// it, since the queue is picked again for the time left when the
// declaration took long.
//
// # Topics
//
// The driver implements topics natively (backend.Topics). A topic T is two
// durable exchanges, declared by the first subscribe or publish of each
// connection:
//
//   - P.T:topic, a fanout exchange, the entry point: a publish is one
//     persistent, mandatory publish per message to it, with the message's
//     kind as routing key. A subscription without a kind pattern binds
//     its queue's router, P.Q:levels, to it.
//   - P.T:route, a topic exchange bound to P.T:topic (an
//     exchange-to-exchange binding), which routes every publish by its
//     key, the kind, in the AMQP topic syntax fila.KindMatch describes. A
//     subscription of Q with kind patterns is an exchange of its own,
//     P.Q:sub:H (H a hash of T's name), bound to P.T:route once per
//     pattern and bound to Q's router.
//
// The router sends each copy to the queue of its level (see Priorities).
//
// TopicSubscribe declares the subscription queue's topology as its first
// use would and makes those bindings; subscribing again adds a binding,
// and binding twice is not an error. The broker makes the copies, one per
// queue however many of its bindings match a message, and confirms once
// every subscription's quorum queue has its copy. TopicUnsubscribe
// deletes P.Q:sub:H, which removes every pattern binding, and the binding
// to P.T:topic, so it ends the subscription even without the queue's
// deletion that the portable layer does next; P.Q:sub:H also goes by
// itself (auto-delete) when QueueDelete deletes the router. A publish the broker
// returns unroutable (NO_ROUTE) found no subscription that takes its
// kind: nothing is stored, and PublishResult.Subscriptions is 0 when that
// is so for every message. Otherwise it is -1: RabbitMQ does not say how
// many queues a message went to. A nacked publish is published again,
// which may give the subscriptions that had stored it a second copy (at
// least once).
//
// Drivers before routing by kind made P.T:topic alone, bound subscriptions
// to it and published with an empty routing key. Deployments need no
// migration: an exchange's type cannot change, which is why P.T:topic
// stays the entry point. Existing subscriptions keep getting every
// message; P.T:route is declared by the first subscribe or publish of an
// upgraded client. Older clients' publishes still reach every
// subscription without a pattern, and reach the pattern subscriptions
// through P.T:route too, but with an empty routing key instead of the
// kind, which only patterns of "#" words match: upgrade publishers
// before subscribing with patterns. Topic exchanges and exchange-to-exchange
// bindings exist in every RabbitMQ version the driver supports (3.10 and
// later). A user whose permissions cover P.T:topic but not P.T:route gets
// fila.ErrAccessDenied from publishes and subscribes once upgraded.
//
// Those subscriptions bound the main queue itself to P.T:topic: they keep
// getting every copy there, a copy of a level too (delivered with its
// level, but behind level 0's backlog). Subscribing again routes through
// the router: TopicSubscribe binds P.Q:levels and removes the main queue's
// binding (a copy published between the two can reach the queue twice).
//
// The broker's copies are identical, so a topic publish carries the header
// x-fila-topic, and the driver gives each copy its id,
// fila.CopyID(published id, subscription queue), when it reads the
// delivery (Receive, ReceiveDelayed, the dead-letter listing), and drops
// the header there: from then on the copy is an ordinary message of its
// queue, and its receipts, retries, dead letters and delay hops carry the
// copy's id. The message's own headers are untouched.
//
// A delayed message reaches every subscription's main queue at once,
// carrying its run-at, and the subscription's consumer moves its copy to
// the subscription's delay queue, as for any message that arrives before
// its run-at (see Delays): it is never early, a subscription made during
// the delay does not get it, and each copy costs its subscription one
// republish. Until a Receive on the subscription moves it, a waiting copy
// counts as Ready in QueueStats, and ReceiveDelayed does not see it.
//
// A topic's subscriptions are bindings, which AMQP 0-9-1 cannot list:
// TopicSubscriptions reads them from the management API
// (fila_management_url) and returns fila.ErrUnsupported without it.
// Nothing deletes a topic's exchanges; they are small. Deleting P.T:topic
// by hand ends the subscriptions without a pattern (the next subscribe or
// publish of this driver declares it again, with its binding to
// P.T:route); deleting P.T:route ends those with patterns, and the
// publishes of a connection that had declared it do not notice.
//
// # Priorities
//
// The driver honours Message.Priority (backend.Prioritizer). Quorum queues
// of RabbitMQ 3.x have no message priorities, so each level of a queue
// has a quorum queue of its own: level 0 is P.Q, as always (existing
// deployments need no migration), and level L (1 to 3) is P.Q:pL,
// declared by the first enqueue, retry, replay or subscription copy of
// that level, with its own delay queues P.Q:pL:MS that expire into it, and
// the router P.Q:levels (see below); a level's first use on a connection
// costs those declarations. A queue that never uses a level has none of
// this, and its calls are those of a driver without priorities, but for
// one thing: a process receiving from it looks for level queues other
// processes made, at most once a second (QueueStats, ReceiveDelayed and
// QueueDelete look too), with a passive declare of P.Q:levels, which
// exists before any level queue does (or for a subscription), and only
// when it exists, of the level queues it does not know. So a process
// learns of a level another one started within a second; until then, that
// level's messages wait in their queue.
//
// The levels above 0 have no consumer. A Receive on a queue with levels
// first asks each level queue, highest first, for its ready count (a
// passive declare, about 0.1 ms on a local broker) and takes what it holds
// with basic.get (a Raft command: about a millisecond each on a local
// broker, more on a cluster), then hands out level 0 from the consumer's
// buffer. Counts and gets are ordered after every confirmed enqueue, so a
// message of a higher level enqueued while level 0 has a backlog, or has
// messages already pushed to this client, is in the next Receive; a
// consumer on a level queue could not promise that, as a message pushed to
// it may still be on its way. The price: every Receive on a queue with
// levels pays a passive declare per level in use, and a backlog of a level
// above 0 drains one basic.get at a time. A Receive waiting on an empty
// queue with levels is woken at once by level-0 messages and by this
// process's publishes to a level, and finds other processes' level
// messages within 100 ms (one look per client and queue, shared by its
// waiting calls).
//
// A message keeps its level in the fila-pri header: retries and hops go to
// its level's queue or delay queues, a lease that expires returns it to
// its level's queue, dead letters carry it and DeadReplay restores it,
// DeadImport and ReceiveDelayed keep it. Within a level the order is that
// of a quorum queue. Stats add up the levels; ReadyByPriority gives each.
//
// A topic copy takes its level through the subscription's router
// P.Q:levels, a headers exchange: a copy whose fila-pri is L goes to
// P.Q:pL when Q has that queue, everything else through the alternate
// exchange P.Q:levels:0 to P.Q. A copy of a level the subscription has no
// queue for yet lands in P.Q, behind its backlog; it is delivered with its
// level, and the subscription's consumer then declares the level's queue,
// so later copies of that level are prioritized.
//
// RabbitMQ versions: classic queues have had native priorities
// (x-max-priority) since 3.5.0, but a classic queue lives on one node
// (mirroring is deprecated in 3.x and removed in 4.0), which would give up
// the quorum queues' replication (contract: durable-enqueue). Quorum
// queues have message priorities from RabbitMQ 4.0 on, with two levels
// only (priorities 0 to 4 are normal, above 4 high) and not strict: the
// 4.0 documentation says high messages are favoured 2:1 over normal ones,
// so normal ones keep moving. Neither carries four strict levels; RabbitMQ's
// own advice for more is a queue per level, which is what this driver
// does, and does on every version it supports.
//
// # Wake-up and latency
//
// A Receive blocked on an empty queue returns as soon as a message is
// published (RabbitMQ pushes it; sub-millisecond on a local broker).
//
// # Clusters
//
// Name every node: the URL's host first, the others in fila_hosts
// (amqp://u:p@node1:5672/?fila_hosts=node2:5672,node3:5672). A connection
// goes to the first node that answers, and after a lost connection the
// next one is tried first. Main queues are quorum queues: losing one node
// of three loses no confirmed message, and work resumes on another node
// (0.2 to 0.4 s after a kill -9 of the leader's node in the project's
// test). Dead-letter, delay and mark queues are classic queues on one
// node: while it is down, dead-lettering, delayed enqueues and mark calls
// that need it fail with fila.ErrUnavailable.
//
// # Caveats
//
//   - Stats: Ready and Dead come from the broker; Delayed and Leased count
//     only what this driver instance published or holds. The oldest ready
//     age and dead letters per kind are not reported.
//   - Listing dead letters reads the whole dead queue, one round trip per
//     letter, holding the letters until it is done. Listings, replays,
//     purges and DeadImport of one queue therefore take turns, across
//     processes (an exclusive queue, P.Q:dead:scan, is the lock; it goes
//     with the connection of a process that dies holding it), so none sees
//     part of the letters; the Dead count of QueueStats misses the letters
//     a listing holds while it runs.
//   - ReceiveDelayed (moving delayed messages to another broker) probes
//     some 740 possible delay queue names, about 150 ms on a busy local
//     broker, and misses messages hopping between delay queues at that
//     moment.
//   - QueueDelete tells driver instances in other processes through the
//     broker's consumer cancel; one of them holding leases without a
//     running consumer is not told, and settling those leases succeeds
//     without effect.
//   - Mark expiries run on the broker's timer, never early; a mark whose
//     node is down does not expire until it is back. Marks set without an
//     expiry leave a record in P.Q:marks per creation until QueueDelete.
//   - Ordering: a single consumer without retries or delays gets publish
//     order, except for messages given back or requeued after an expired
//     lease.
//   - When RabbitMQ blocks publishing (a memory or disk alarm), publishing
//     calls fail at once with ErrBlocked instead of hanging.
//   - RabbitMQ 3.10 can crash a channel when a consume races another
//     connection's first declaration of the same quorum queue; the driver
//     works around it and reconnects when it happens, losing that
//     connection's leases (their messages are requeued).
//
// # Features it lacks
//
// Declared missing in its conformance run (see conformance.Feature and
// CONTRACT.md in the repository):
//
//   - dedup keys (FeatureDedup): RabbitMQ cannot check a key over a
//     queue's pending messages. So Message.DedupKey and UniqueFor return
//     fila.ErrUnsupported, and a relay into RabbitMQ may duplicate.
//   - transactional enqueue (FeatureTxEnqueue) and atomic batches
//     (FeatureAtomicBatch).
//   - the oldest ready age and dead letters per kind in stats
//     (FeatureOldestReady, FeatureDeadByKind).
//   - queue listing (FeatureQueueList) and subscription listing
//     (FeatureTopicList) without fila_management_url: AMQP 0-9-1 cannot
//     list queues or bindings (with it, both pass; the single-node run
//     uses it, the cluster run does not).
//   - mark listing (FeatureMarkList), hence MessageCancel: a mark's queue
//     is named by a hash of the mark, so even the management API's list
//     of queues cannot give its name back. Queue pause works.
//   - exact stats of delayed topic copies (FeatureTopicDelayCounts): a
//     delayed copy counts as Ready until a Receive of its subscription
//     moves it to a delay queue (see Topics).
//   - a subscription surviving QueueDelete (FeatureTopicQueueDelete): the
//     subscription is the queue's bindings, which RabbitMQ deletes with the
//     queue (and P.Q:sub:H with them), so QueueDelete of a subscription's
//     queue ends the subscription too; subscribe it again. Elsewhere it
//     stays.
//
// # Errors
//
// Calls made while the connection is down wait up to fila_reconnect_wait,
// then fail with fila.ErrUnavailable; a blocked Receive waits until its
// context ends. Calls in flight when the connection breaks fail with
// fila.ErrUnavailable, or ErrLeaseLost for settlements. ErrBlocked,
// ErrNacked and ErrUnroutable match fila.ErrUnavailable too. A permission
// refused on a queue or exchange is fila.ErrAccessDenied. An outage is
// logged with a bounded number of lines: a Warn when it starts, reminders
// at 1, 2, 4, … minutes, an Info when it ends.
//
// How the driver works inside (topology, delay buckets, consumers and
// buffers, receipts, marks as queues, moving and deleting queues) and what
// was measured are in docs/design.md in the repository.
package rabbitmq
