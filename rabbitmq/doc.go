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
// itself, with backoff, and declares again what it needs.
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
// exclusive queue, while its dead letters are read. For a topic T:
// P.T:topic, a durable fanout exchange. The user needs configure, write
// and read permission on these names, and read permission on amq.direct
// (marks use it).
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
// way), closes or crashes count an attempt too; on RabbitMQ 4.3 and later
// a give-back no longer counts.
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
// The driver implements topics natively (backend.Topics). A topic T is the
// durable fanout exchange P.T:topic, declared by the first subscribe or
// publish; TopicSubscribe declares the subscription queue's topology as
// its first use would and binds its main queue to the exchange, and
// TopicUnsubscribe removes the binding (the portable layer then deletes
// the queue). Publishing is one persistent, mandatory publish per message
// to the exchange, confirmed as Enqueue's are: the broker makes the
// copies, and confirms once every subscription's quorum queue has its
// copy. A publish the broker returns unroutable (NO_ROUTE) found no
// subscription: nothing is stored, and PublishResult.Subscriptions is 0.
// Otherwise it is -1: RabbitMQ does not say how many queues a message went
// to. A nacked publish is published again, which may give the
// subscriptions that had stored it a second copy (at least once).
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
// A topic's subscriptions cannot be listed (TopicSubscriptions returns
// fila.ErrUnsupported): they are bindings, which AMQP 0-9-1 cannot list.
// Nothing deletes a topic's exchange; it is small, and deleting it by hand
// ends every subscription (the next subscribe or publish of this driver
// declares it again).
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
//   - queue listing (FeatureQueueList) and mark listing (FeatureMarkList),
//     hence MessageCancel: AMQP 0-9-1 cannot list queues and the driver
//     does not use the management plugin. Queue pause works.
//   - subscription listing (FeatureTopicList): AMQP 0-9-1 cannot list
//     bindings. Topics work.
//   - exact stats of delayed topic copies (FeatureTopicDelayCounts): a
//     delayed copy counts as Ready until a Receive of its subscription
//     moves it to a delay queue (see Topics).
//   - a subscription surviving QueueDelete (FeatureTopicQueueDelete): the
//     subscription is the queue's binding, which RabbitMQ deletes with the
//     queue, so QueueDelete of a subscription's queue ends the
//     subscription too; subscribe it again. Elsewhere it stays.
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
