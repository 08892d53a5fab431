// Package rabbitmq is Fila's RabbitMQ driver (RabbitMQ 3.10 or later, AMQP
// 0-9-1 through github.com/rabbitmq/amqp091-go). Importing it registers the
// URL schemes amqp and amqps:
//
//	import _ "github.com/fila-go/fila/rabbitmq"
//	c, err := fila.Open(ctx, "amqp://guest:guest@localhost:5672/?fila_prefix=app")
//
// # URL
//
// Parameters starting with "fila_" configure the driver: fila_prefix (name
// prefix, default "fila"), fila_prefetch (consumer prefetch cap, default
// 250), fila_buffer_idle (default 1s), fila_reconnect_max (default 2s),
// fila_reconnect_wait (default 5s), fila_connection_name (default
// "fila") and fila_hosts (the other nodes of a cluster, host:port,...);
// see [Options]. amqp091-go's own
// parameters (heartbeat, connection_timeout, channel_max, auth_mechanism,
// certfile, keyfile, cacertfile, server_name_indication) are passed to it
// unchanged. Any other parameter is an ErrInvalid error.
//
// # Topology
//
// Each Fila queue Q becomes, with the prefix P:
//
//	P.Q            durable quorum queue holding ready messages
//	               (x-dead-letter-exchange P.Q:dead)
//	P.Q:dead       fanout exchange and durable classic queue bound to it:
//	               the dead-letter store
//	P.Q:delay:MS   durable classic queue with x-message-ttl MS whose
//	               messages dead-letter back to P.Q through the default
//	               exchange; x-expires MS+10min deletes it once unused
//	P.Q:mark:H     a mark (see Capabilities): an empty durable classic
//	               queue per mark, H a hash of the mark's name
//	P.Q:marks      the mark registries QueueDelete reads (one message
//	P.Q:marks:ttl  per mark created)
//
// Everything is declared idempotently on first use, once per connection. Fila
// queue names cannot contain ':', so no two queues' names collide. A queue
// whose longest derived name (P.Q:delay:2000000000) would pass RabbitMQ's
// 255-byte limit is refused with ErrInvalid; with the default prefix every
// valid Fila queue name fits.
//
// # Delays
//
// Per-message TTLs on one shared queue only expire at the head, so a long
// delay would hold up a short one behind it. Instead every delay length has
// its own queue with a queue-level TTL: a message waiting D goes to the
// queue of D rounded down to two significant digits in milliseconds (1234ms
// waits in P.Q:delay:1200) and carries its run-at in a header. When it
// reaches the main queue before its run-at (by the rounding, under 10% of
// the delay, or because delays over about 23 days hop through the largest
// queue repeatedly) the consumer that receives it sends it on to the delay
// queue of the time left instead of handing it out, so a delayed message is
// never early; delays under 100ms are exact. Delays of different lengths
// never block each other. A delayed message is late by the broker's TTL
// timer resolution plus a hop or two (typically milliseconds). Dead-lettering
// out of the classic delay queues is at-most-once in RabbitMQ: a broker crash
// at that moment can lose the message being moved.
//
// # Publishing
//
// Every publish is persistent and mandatory, on a channel in confirm mode:
// Enqueue returns when the broker confirmed every message of the batch (R1;
// for quorum queues, when a majority has it on disk). A nack or a
// basic.return (unroutable: the queue was deleted) fails the call. Batches
// are published all at once and then confirmed, and are not atomic: a failed
// batch may have stored part of itself. When RabbitMQ blocks the connection
// (connection.blocked, a memory or disk alarm) publishing calls fail at once
// with ErrBlocked instead of hanging.
//
// # Receiving and leases (client-side)
//
// RabbitMQ pushes messages to consumers and has no visibility timeout, so
// leases are kept by the driver. Each driver instance has, per queue, one
// channel and at most one consumer (manual acks). The consumer is started
// when a Receive finds nothing buffered, with a prefetch equal to what the
// waiting Receive calls asked for (capped by fila_prefetch), so the broker
// pushes only messages somebody asked for. A Receive that finds fewer
// messages than it asked for while more are arriving waits up to 2ms to
// fill its batch. Pushed messages wait in a client-side buffer and a
// message's lease starts when a Receive hands it out.
//
// When no Receive has waited for fila_buffer_idle, buffered messages are
// given back to the queue with basic.nack and requeue, after the consumer
// is cancelled, so an idle client does not hold messages that other
// consumers could take (visibility holds regardless: buffered messages are
// invisible to others, and a closed or crashed client's messages return to
// the queue). A consumer is only cancelled while it holds as many messages
// as its prefetch: a RabbitMQ 3.10 quorum queue can send a message it
// handed to a consumer after confirming the cancel, and amqp091 drops it,
// leaving it unacknowledged and unseen until the channel closes. A consumer
// with credit left keeps its buffered messages until a Receive takes them
// or the buffer fills its credit. A give-back is one frame per message, so
// a crash at any moment leaves each message in the broker exactly once. The
// price, on RabbitMQ before 4.3, is that the quorum queue counts the nack
// as a delivery: a message given back shows one more attempt per give-back
// when it is finally handed out, as it does when a client crashes or closes
// while holding it buffered. Give-backs are rare by design: the buffer only
// holds what a waiting Receive asked for, so it takes a Receive that gave
// up (its context ended) just as its messages arrived, a client that stops
// receiving for longer than fila_buffer_idle, or a Close. A settlement that
// would free credit on a full consumer no Receive has waited on for 50ms
// cancels the consumer first, so the broker does not refill it behind a
// client that stopped receiving (a loop that receives again sooner keeps
// its consumer). RabbitMQ 4.3 and later do not count a nack, so there the
// count is exact.
//
// A lease whose deadline passes unsettled is rejected with requeue
// (basic.reject, which every RabbitMQ version counts as a failed delivery)
// by the driver (checked every 50ms), so another consumer gets it; Extend
// moves the deadline. Receipts name the driver instance, the channel
// incarnation and the delivery tag: an operation on a delivery whose
// deadline has passed (even before the janitor gave it back), whose lease
// was given up, that was settled already, or whose channel died returns
// ErrLeaseLost. A client that dies or loses its connection leaves its
// leases to the broker, which requeues them at once (before their deadlines:
// the only way to hold a message in RabbitMQ is an open channel).
//
// Attempts are the quorum queue's x-delivery-count (failed deliveries:
// rejects with requeue and deliveries to a channel that closed, absent on a
// first delivery) plus one, plus the count carried in a header across the
// driver's own republishes (retries, dead letters, delay hops), since a
// republished copy starts a new count. Messages pushed to a client that
// gives them back, closes or crashes before handing them out count an
// attempt too, except give-backs on RabbitMQ 4.3 and later (see above).
// RabbitMQ 4.3 also changed what else it counts; this driver is tested on
// 3.10.
//
// Ack is basic.ack on the delivery's channel (one frame with multiple=true
// when the acked deliveries are the channel's oldest unsettled ones). AMQP
// does not answer an ack: nil means the frame was written to the
// connection, and if the connection breaks before the broker reads it the
// message is delivered again (at-least-once). An ack that could not be
// written returns an error. Retry publishes a copy (confirmed) carrying the
// attempt count and last error to the delay queue of its delay (or straight
// to the main queue) and then acks the original; Dead publishes a copy with
// reason, attempts and time to the dead-letter exchange (confirmed) and
// then acks. If the connection breaks between the two steps the message can
// exist twice (at-least-once); the same holds for a delay hop. A handed-out
// body is a copy, so a handler that changes it does not change what Retry
// or Dead publish.
//
// # Connections
//
// Open (and New) make the first connection before returning, within ctx: an
// unreachable broker or refused credentials fail there, an unreachable
// broker with an error matching fila.ErrUnavailable, refused credentials
// (ACCESS_REFUSED, a failed login or SASL negotiation, a vhost the user may
// not use) with fila.ErrAccessDenied, which a retry does not cure; a
// permission refused on a queue or exchange later is ErrAccessDenied too.
//
// The driver logs to Options.Logger (fila.WithLogger through fila.Open). An
// outage costs a bounded number of lines at Info and above, however long it
// lasts: a Warn when the connection is lost, the failed reconnection
// attempts at Debug with a Warn reminder once it has lasted 1, 2, 4, …
// minutes, and an Info with its length when the connection is back. The
// driver reconnects with exponential backoff (100ms up to
// fila_reconnect_max) and, on the new connection, redeclares topology and
// restarts consumers as Receive calls need them. Calls made while the
// connection is down wait up to fila_reconnect_wait and then fail with
// fila.ErrUnavailable; a blocked Receive waits until its context ends. Calls
// in flight when the connection breaks fail with fila.ErrUnavailable
// (retryable) or, for settlements, ErrLeaseLost. ErrBlocked, ErrNacked and
// ErrUnroutable are retryable too: errors.Is matches them with
// fila.ErrUnavailable as well as with themselves.
//
// # Clusters
//
// Name every node: the URL's host first, the others in fila_hosts
// (amqp://u:p@node1:5672/?fila_hosts=node2:5672,node3:5672). A connection
// goes to the first node that answers; after a lost connection the next one
// is tried first. Main queues are quorum queues, replicated on the
// cluster's nodes (up to five by RabbitMQ's default), so losing one node of
// three loses no confirmed message and stops nothing: the client
// reconnects to another node and the queue elects a new leader (measured
// here: enqueues and deliveries resume 0.2-0.4 s after a kill -9 of the
// leader's node). The dead-letter queue and the delay queues are classic
// queues, which live on one node: while that node is down, dead-lettering
// and enqueues with a delay into a delay queue it holds fail with
// fila.ErrUnavailable (retry), and the messages they hold wait for the node
// to come back.
//
// # Capabilities
//
// Dead-letter management (R12) works by reading the dead queue: a listing
// takes every dead letter with basic.get without acking and gives them all
// back at the end (one round trip each; while a listing runs, the letters it
// holds are invisible to other listings). Replay republishes the selected
// letters to the main queue with attempts reset (confirmed) and then acks
// them; purge acks them (or purges the queue). Stats (R13) come from passive
// declares plus this instance's own bookkeeping: Ready is the main queue's
// ready count plus this instance's buffered messages, Delayed counts the
// delay queues this instance published to, Leased is this instance's
// leases, Dead is the dead queue's count; they are exact on a quiescent
// queue used by one instance. With no Receive waiting, QueueStats cancels
// this instance's consumer of the queue first when that is safe (it holds
// as many messages as its prefetch), so no message is on its way to it
// (counted nowhere) while the counts are read; otherwise a synchronous
// round trip on its channel lets the deliveries already made arrive. The age of the oldest ready message and dead
// letters by kind are not reported.
//
// Moving a queue to another broker (backend.DelayedReceiver,
// backend.DeadImporter). ReceiveDelayed finds the queue's delay queues by
// declaring every possible delay queue name passively (about 740 names:
// two significant digits times each power of ten up to the largest bucket),
// 16 at a time on throwaway channels since a miss closes its channel; a
// probe costs some 1,500 round trips (about 150ms on a busy local broker).
// It first tries the delay queues this instance already knows (used or
// found before) and probes only when they hold fewer than p.Max messages,
// so a bulk move probes about once plus once at the end (taking delayed
// messages then runs at 0.7 to 0.95 times raw basic.get + ack; see
// BenchmarkReceiveDelayed), and an empty result always comes after a full
// probe. It takes messages with basic.get (no ack) on the puller's channel
// and leases them client-side like Receive: Ack acks them, Retry and
// Release send a copy that waits for the later of the message's run-at and
// the retry delay (a message taken early never becomes ready before its
// run-at), Dead dead-letters it, and an expired lease rejects it with
// requeue into its delay queue (which keeps its original expiry). Classic
// delay queues do not count deliveries, so an early take whose lease
// expired is not counted as an attempt; a taken message that was settled
// is. Messages that reached the main queue a moment before their run-at
// and are hopping to a shorter delay queue are not seen. If a delay queue
// disappears between the probe and the get (deleted, or expired), the get
// closes the puller's channel and its leases are lost (the broker requeues
// their messages).
//
// DeadImport publishes the letters (confirmed, persistent) to the
// dead-letter exchange in the format Dead uses, so listing, replay and
// purge treat them as native ones. It skips ids the dead queue already
// holds, which it learns by reading the whole dead queue as DeadList does:
// each call costs one round trip per dead letter already stored (O(dead
// letters)), and two imports running at once may both store a letter.
//
// Deleting a queue (backend.QueueDeleter). QueueDelete deletes every
// possible delay queue name of the queue (about 740, whoever created them;
// queue.delete of a missing queue succeeds, so they go out on one channel
// without waiting for each reply: a few milliseconds), then the main queue,
// the dead-letter queue and its exchange, with every message in them;
// deleting what does not exist is not an error. Every driver instance of
// the process on the same broker address, vhost and prefix then forgets the
// queue at once: its declarations (the next call declares the topology
// again, so the queue is usable at once), the delay queues its stats count,
// and its consumer channel for the queue, which is closed with its buffered
// messages and leases, so settling a delivery leased from the deleted queue
// returns ErrLeaseLost. Instances in other processes (or reaching the broker
// under another host name) learn of it when the broker cancels their
// consumer of the deleted queue (basic.cancel, a few milliseconds later) and
// drop that channel the same way; one holding leases with no consumer
// running (it was parked while idle, or the leases are of messages taken by
// ReceiveDelayed) is not told, and settling such a lease succeeds without
// effect. Queues cannot be listed (backend.QueueLister is
// not implemented): AMQP 0-9-1 has no such method and the driver does not
// use the management plugin.
//
// Marks (backend.Marker; not backend.MarkLister). A mark is a queue of its
// own, P.Q:mark:H with H a hash of the mark's name (base64url SHA-256, cut
// to fit RabbitMQ's 255 bytes: 43 characters with the default prefix,
// never fewer than 11), a durable classic queue that never holds a message.
// MarkSet with onlyNew declares it with an argument RabbitMQ compares and
// no other caller shares, so exactly one concurrent declarer, in any
// process, creates it and the others get 406 PRECONDITION_FAILED, which
// means a live mark. MarkSet without onlyNew deletes and declares it again.
// An expiry is the queue's x-expires, the milliseconds left until `until`
// when MarkSet runs: the broker deletes the queue once it was unused that
// long, typically within milliseconds of the expiry (measured on 3.10: 50ms
// late for 1.5s) but never before, and later while the node holding it is
// down or overloaded; until then MarkGet reports the mark and MarkSet with
// onlyNew refuses it. The expiry runs on the broker's timer from when the
// declare arrives, so the client's and broker's clocks need not agree.
// RabbitMQ restarts that timer on every passive declare and basic.get of the
// queue, so MarkGet never does either: it binds the mark's queue to
// amq.direct (keyed by the queue's own name), which fails with 404 for a
// missing queue and leaves the timer alone. The user therefore needs read
// permission on amq.direct. Marks are classic queues, so on a cluster a
// mark lives on one node: while it is down, the calls on that mark fail
// with fila.ErrUnavailable, and it does not expire until the node is back.
// AMQP cannot list queues, so MarkList is not provided, and QueueDelete
// finds a queue's marks in two registry queues, P.Q:marks and
// P.Q:marks:ttl, holding one message (the mark's queue name) per mark
// MarkSet created: it reads them (basic.get, one round trip per record),
// deletes every mark named there, then the registries. A record of an
// expiring mark expires a minute after its mark (per-message TTL); a
// classic queue drops expired messages only from its head, so P.Q:marks:ttl
// holds at most the records created during the longest expiry in use. The
// records of marks without expiry stay until QueueDelete, one per creation
// (MarkDelete does not remove them), so P.Q:marks grows with the number of
// times such marks were set. A MarkSet running during a QueueDelete, or one
// whose process died between creating the mark and recording it, can leave
// a mark QueueDelete does not delete.
//
// Dedup keys (R11) and transactional
// enqueue are not supported: RabbitMQ has neither a key check over a queue's
// messages nor transactions shared with other data.
//
// # Delivery semantics
//
// At least once. A single consumer without retries or delays gets messages
// in publish order, except messages given back from a buffer or requeued
// after an expired lease, which may come later. Wake-up (R18) is RabbitMQ's
// push: a Receive blocked on an empty queue returns as soon as a message is
// published (sub-millisecond on a local broker).
//
// # Known broker issue
//
// RabbitMQ 3.10 can crash a channel (and so close the connection with
// INTERNAL_ERROR) when basic.consume races with another connection's first
// declaration of the same quorum queue, and nacks publishes to it meanwhile.
// The driver waits 50ms after declaring a queue before its first consume on a
// connection, publishes nacked messages again, and reconnects if the crash
// happens anyway; leases held on that connection are then lost and their
// messages requeued.
package rabbitmq
