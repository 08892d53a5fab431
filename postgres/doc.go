// Package postgres is Fila's PostgreSQL driver: messages are rows, claimed
// with FOR UPDATE SKIP LOCKED (or, in the log mode, read from append-only
// rotating tables), and receivers wake through LISTEN/NOTIFY. It needs
// PostgreSQL 13 or newer and is built on github.com/jackc/pgx/v5.
//
// # Opening
//
// Import the package for its side effect, which registers the postgres://
// and postgresql:// URL schemes, and open a client:
//
//	import _ "github.com/fila-go/fila/postgres"
//
//	client, err := fila.Open(ctx, "postgres://app@db:5432/app?sslmode=require&fila_migrate=true")
//
// Or build a driver over a pgxpool.Pool the application already has with
// [New] and wrap it with fila.New; Close then leaves the pool open.
//
// Fila's tables live in a schema of their own ("fila" by default) and are
// created and upgraded by [Migrate] (or [MigrateURL]), by fila_migrate=true
// at open, or by the command "fila schema up". Any number of processes may
// migrate at once. Without a migration, opening checks that the schema is current and
// fails with fila.ErrInvalid saying what to run.
//
// Open (and New) connect, and check the schema, before they return: an
// unreachable server fails there with fila.ErrUnavailable. Afterwards the
// pool replaces broken connections by itself.
//
// # URL parameters
//
// Parameters starting with fila_ are Fila's; an unknown one fails with
// fila.ErrInvalid. Every other parameter goes to pgx byte for byte (pgx
// decodes it as libpq does: %20 is a space, '+' a plus sign): its
// connection and pool settings, and, for names pgx does not know, server
// run-time settings (search_path, …). A name the server does not know
// either fails at open with fila.ErrInvalid.
//
//	parameter             default   meaning
//	fila_schema           fila      schema of Fila's tables: lower-case letters, digits
//	                                and '_' (Options.Schema)
//	fila_migrate          false     create or upgrade the tables at open (Options.Migrate)
//	fila_listen           true      wake receivers with LISTEN/NOTIFY; false makes them
//	                                poll, for poolers in transaction mode
//	                                (Options.DisableListen)
//	fila_poll_interval    30s       how often a blocked Receive checks its queue without a
//	                                notification; 1s by default with fila_listen=false
//	                                (Options.PollInterval)
//	fila_mode             skiplocked storage mode: skiplocked or log (see "The log
//	                                mode"; Options.Mode)
//	fila_rotate_interval  1m        log mode only: how long a generation of its tables
//	                                takes new rows before rotation (Options.RotateInterval)
//	fila_topic_retention  0         log mode only: how long a topic's events stay after
//	                                their publish, read or not, for TopicRewind
//	                                (Options.TopicRetention; 0 keeps an event only
//	                                until every subscription is done with it)
//	any other             pgx's     passed to pgx: sslmode, pool_max_conns,
//	                                application_name, default_query_exec_mode, …
//
// # Isolation level
//
// Every statement and function of the driver, in both modes, is written for
// READ COMMITTED. Under a REPEATABLE READ or SERIALIZABLE default (ALTER
// ROLE or ALTER DATABASE ... SET default_transaction_isolation) the log mode
// lost messages and settled leases twice, so the driver never runs at
// another level: Open sets default_transaction_isolation=read committed at
// connection start when the server's default for the role differs, and a
// URL that asks for another level fails with fila.ErrInvalid. A pooler that
// refuses the parameter at connection start (PgBouncer) makes Open fail
// with fila.ErrInvalid: set the level on the role the pooler connects as.
// New checks the pool it is given and fails with fila.ErrInvalid when its
// connections run at another level: set RuntimeParams
// ["default_transaction_isolation"] = "read committed" in the pool's
// config. Transactions of your own that EnqueueTx writes into may use any
// level.
//
// # Durability
//
// When Enqueue returns nil the messages are committed, as durable as the
// server's fsync and synchronous_commit settings make any commit (contract:
// durable-enqueue). A batch is one INSERT in one transaction: all of it or
// nothing.
//
// # Transactional enqueue
//
// Client.EnqueueTx takes a pgx.Tx (or any [Querier]) and stores the
// messages inside the caller's transaction: they, and the notification
// that wakes receivers, take effect when the caller commits and vanish on
// rollback. This makes a transactional outbox, which relay.Relay can forward
// to any other broker. A dedup key held by a message of another
// transaction that has not committed yet makes EnqueueTx wait for that
// transaction.
//
// # Wake-up and latency
//
// A Receive blocked on an empty queue wakes a few milliseconds after an
// enqueue commits (LISTEN/NOTIFY; each driver instance keeps one
// connection for LISTEN outside the pool). Enqueue sends the notification
// in a short transaction of its own right after its INSERT commits, in the
// same round trip, so its commit does not hold PostgreSQL's cluster-wide
// notification lock; notifications of concurrent enqueues of a queue are
// coalesced, and a publish notifies all of its topic's subscriptions in
// one such transaction. Delayed, retried and expired messages are claimed
// at their time. A receive that follows one that took less than it asked
// for, with no notification of the queue since and nothing due, waits
// without a claim statement. With fila_listen=false, receivers poll every
// fila_poll_interval, which bounds the wake-up latency.
//
// Client.AckReceive (and so the worker) sends the ack and the next claim
// in one round trip and one transaction (backend.AckReceiver): a consumer
// working through a backlog commits once per batch, not twice. It claims
// only while the queue's last claim took all it asked for; after one that
// took less it only acks, and the Receive that follows claims when told
// there is more.
//
// # Priorities
//
// In the skip-locked mode a message's level (fila.Message.Priority, 0 to
// fila.MaxPriority) is a column of its row (schema version 17), so a retry,
// an expired lease, a dead letter and its replay keep it, and deliveries
// and dead letters return it. The index the claim reads, messages_claim,
// is (queue, priority DESC, visible_at, id): a claim probes it level by
// level, highest first, each probe a range of that level's claimable rows
// that ends at its first row not yet due, and stops once it has what it
// asked for, so levels cost a few index probes per claim, not a walk over
// leased or delayed rows. A delayed message takes its level when due.
// Building that index is the upgrade's cost: the migration blocks the
// messages table while it reads it (see migrations/0017_priority.sql).
//
// In the log mode (schema versions 18 and 19) a level is a stream: a message of
// level 0 goes to its queue's own stream, as before, and one of level p
// above 0 to the stream '~p<p>:<queue>', read in batches by snapshot
// through a cursor of its own, so levels add no update and no dead tuple.
// A claim reads the level streams highest first, then the queue's own,
// then its subscribed topics'; it looks at the level streams' cursors only
// when one probe (an index scan per partition) finds a row in them, so a
// queue that uses level 0 only pays that probe, and (schema version 19)
// reads a level stream only when a probe finds a row its cursor has not
// passed, so a drained level costs a claim one statement. The row keeps its level
// (a column), so a retry is appended to its level's stream, and a timer (a
// delayed message, a retry with a delay), a redelivery after an expired
// lease, a dead letter and its replay keep it. What is not ordered by
// level: a claim first sweeps the due timers and expired leases, and
// hands them out, in due order whatever their level, before it reads the
// streams; the driver lists each claim's deliveries highest level first,
// but a due message of level 0 may take the place of a ready one of a
// higher level in the first claim after it came due (once: after that it
// is leased). QueueStats counts the level streams but reports no counts
// per level (ReadyByPriority is nil). A topic's events have no level in
// this mode: a publish of a level above 0 is refused with
// fila.ErrUnsupported (enqueue into the subscriptions' queues instead).
//
// # Listing messages
//
// Client.MessageList (backend.MessageLister) reads a queue's pending
// messages in one state without claiming or locking them: one plain read
// per page. In the skip-locked mode a listing follows the claim's order,
// highest level first, then by visible_at (for ready messages the order
// Receive hands them out; for leased ones the lease deadline; for delayed
// ones the run-at), then by id, and its cursor is the last row's (level,
// visible_at, id). A page probes messages_claim level by level from the
// cursor, as a claim does, and stops at the page's end: no sort of the
// queue. A page of ready messages reads about what it returns; one of
// leased messages also reads past the delayed rows that fall due before
// them, and one of delayed messages past each level's claimable rows too
// (a lease taken early by ReceiveDelayed that expired before its run-at is
// delayed, sorts among them, and has no index). A search by id probes the
// primary key once per id. The log mode lists nothing (fila.ErrUnsupported):
// it keeps no row per pending message, whose state it derives from its
// streams' read positions, leases, claims and timers.
//
// # Poolers (PgBouncer)
//
// LISTEN needs a session, so it does not work through a pooler in
// transaction mode. Open detects this (it notifies itself and waits up to
// 5 s) and fails with fila.ErrInvalid: set fila_listen=false there, or
// build the driver with New and give Options.ListenConfig a connection
// config that reaches the server directly or through a session-mode
// pooler. PgBouncer before 1.21 (or without max_prepared_statements) also
// needs default_query_exec_mode=exec, since pgx prepares statements.
//
// # The log mode
//
// With fila_mode=log the driver keeps its queues in other tables of the
// same schema, where no row is ever updated or deleted per message:
// enqueues, deliveries (leases), settlements, delayed messages and read
// positions are all inserted rows. The tables are partitioned into three
// generations; new rows go to the current one, and every
// fila_rotate_interval rotation copies the rows the oldest generation
// still needs (messages not yet read, live leases, pending delays, read
// positions) into the current one and empties the oldest with TRUNCATE.
// Rotation is skipped while nothing was written since the last one (an
// idle schema, or a backlog nobody reads or adds to, costs no writes and no
// catalog churn), and a generation that holds no row is made current
// without a TRUNCATE.
//
// Choose it when a long transaction (a report, a forgotten BEGIN, a
// replica with hot_standby_feedback) may hold back vacuum for minutes: the
// skip-locked table then fills with dead tuples that nothing can remove,
// and claims slow down as they walk them. The log mode creates no dead
// tuple per message, so its speed does not depend on vacuum. It costs:
//
//   - Throughput at high concurrency: the receives of one queue take turns
//     (an advisory lock per queue). A receive leases all it read with one
//     row and an ack of that whole batch settles it with one, but
//     deliveries acked one by one (a worker's jobs) still insert a row per
//     ack. Burn-down at 100 concurrent jobs measured ×0.65 of the
//     skip-locked mode; at 1 and 10, and for enqueues, the modes are
//     within 10% (BENCHMARKS.md).
//   - Space: every message's rows stay until rotation empties their
//     generation, two to three intervals later; tables stay flat under a
//     steady load instead of shrinking when a queue is drained.
//   - Dedup keys live in a small table, one row inserted and deleted per
//     message that has a key; QueueDelete, DeadReplay and DeadPurge delete
//     rows (rotation reclaims the space of those in the partitioned
//     tables).
//   - A receive commits without waiting for the WAL flush: a server crash
//     may forget the deliveries of its last moments, which then come again
//     with the same attempt number. Enqueues, acks, retries and dead
//     letters are durable as usual.
//
// Messages are read in batches bounded by transaction snapshots, as PgQ
// does: a message whose transaction took its id early and committed late
// is delivered in the first batch that sees it, never skipped.
//
// Topics in the log mode are one log. A publish appends one row per event to
// the topic's stream, whatever the number of subscriptions (in the
// skip-locked mode the portable layer writes a copy per subscription), and
// each subscription reads the stream through a read position of its own,
// starting where it subscribed. A batch of 16 or more events without dedup
// keys or delays is written by COPY (fewer WAL bytes per row), in one round
// trip and one transaction like a smaller batch (schema version 15). A
// single receiver of a subscription gets its events in publish order. A
// subscription is still a queue: the events it reads get their copy ids
// (fila.CopyID), its own leases, attempts, retries, dead letters and stats,
// and a retry is appended to the subscription alone. Rotation keeps an event
// while a subscription has not read it or holds it leased, so a subscription
// nobody consumes keeps the topic's rows from the moment it stops: its
// unread events count as ready in its QueueStats (its lag, which the metrics
// and the dashboard show), the driver logs a warning naming it once its
// oldest unread event is older than twice the rotation interval (at least a
// minute), and TopicUnsubscribe (or QueueDelete, which drops what it has not
// read) lets rotation reclaim them. Messages published with a dedup key are
// still copied into each subscription, where the key is held. Subscriptions
// are kept as the portable layer kept them (marks of the queue
// "fila.topic.<topic>"), so subscriptions made before this schema version
// keep working; such a subscription reads the topic's stream from its start,
// which holds only what was published since.
//
// Routing by kind (schema version 16). A subscription's kind patterns are
// kept beside its mark, with a regular expression the driver derives from
// them. Its claims read its batches as before but lease (or keep as timers)
// only the events whose kind matches; the read position moves past the
// others, which rotation then drops as read. Its QueueStats count only the
// unread events that match; a stalled subscription's lag warning counts
// them all. A publish writes the topic's rows only when a subscription takes
// a kind of the batch, and reports and wakes only those subscriptions.
//
// Rewind (schema version 10). With fila_topic_retention, rotation keeps a
// topic's events for that long after their publish even once every
// subscription has read them, and fila.Client.TopicRewind (fila topic
// rewind) moves one subscription's read position to a point in time: the
// events from the first one published at or after it, in the log's order,
// are delivered again as copies at attempt 1 (an event of a later
// transaction stamped a little earlier comes with them), the earlier ones
// not at all; a point after the newest event skips what the subscription
// has not read. The subscription's unsettled leases of the events
// delivered again end (their acks report fila.ErrLeaseLost), so each copy
// has one holder at a time; a copy waiting for a retry is delivered by the
// rewind and again by its retry; events published with a dedup key are
// copied into each subscription and are not delivered again. The rewind
// finds its point with one read of the topic's kept rows. The price of a
// retention: a kept event is copied at every rotation that empties its
// generation, about once per three rotation intervals of retention (a
// day's retention at the default interval copies each event some 480
// times), so keep the retention short or the interval long. The driver
// that rotates applies its own setting: give every client of a schema the
// same one. Without a retention, a rewind reaches only the events rotation
// has not dropped yet (those some subscription has not read).
//
// Rotation never waits long: its TRUNCATE takes the oldest generation's
// locks with a 50 ms lock_timeout and tries again every check (a quarter
// of the interval, at most 5 s). A transaction that holds one of those
// locks (a query reading the log tables, or an enqueue transaction still
// open in that generation) holds rotation back, not delivery: the tables
// grow until it ends, and the driver logs a warning when that lasts more
// than a minute.
//
// Do not VACUUM or ANALYZE the log mode's partitioned tables by hand (their
// autovacuum is off: they have nothing to vacuum). Statistics taken while a
// partition is nearly empty make the driver's cached plans scan it
// sequentially, which slows every call until rotation empties that
// partition again (at most three rotation intervals).
//
// Both modes can live in one schema, each with its own queues, dead
// letters and marks. Switching a queue is configuration: open a client
// with the other fila_mode and move the queue with "fila migrate" (or
// relay.Relay with IncludeDelayed and IncludeDead).
//
// # Caveats
//
//   - Lease deadlines and delays follow the server's clock. Mark expiries
//     (pause, cancel, unique periods) are computed by the client's clock
//     and compared by the server's, so a client whose clock is skewed sets
//     marks that end early or late by the skew.
//   - In the skip-locked mode every message is inserted, updated and
//     deleted, so the messages table depends on autovacuum; the migrations
//     give it aggressive settings. Watch for bloat under sustained high
//     load, or use the log mode.
//   - Ordering: a single receiver without retries or delays gets the
//     messages of a level in enqueue order, the higher levels first;
//     competing receivers get no ordering promise.
//
// # Features
//
// The driver keeps every rule of the contract, optional ones included:
// dedup keys, dead-letter management, stats (every column), transactional
// enqueue, acking and claiming in one round trip (backend.AckReceiver),
// moving queues (backend.DelayedReceiver, backend.DeadImporter), queue
// listing and deletion, marks with listing, and priorities
// (backend.Prioritizer), in both modes, in the log mode topic rewind
// (backend.TopicRewinder), and in the skip-locked mode message listing
// (backend.MessageLister). Its conformance runs declare no
// conformance.Feature missing, but for message listing in the log mode.
//
// # Errors
//
// Lost connections, a server shutting down, serialization failures and
// deadlocks wrap fila.ErrUnavailable; retry them. Refused credentials
// (SQLSTATE class 28: a wrong password, an unknown role, a pg_hba.conf
// reject) and missing privileges (42501) wrap fila.ErrAccessDenied. A
// call whose context ended returns the context's error; a message claimed
// meanwhile comes back when its lease expires.
//
// How the driver works inside (the claim statement, the tables and their
// indexes, notification coalescing, marks) and what was measured are in
// docs/design.md in the repository.
package postgres
