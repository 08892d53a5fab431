// Package mysql is Fila's MySQL and MariaDB driver: messages are rows of an
// InnoDB table, claimed in batches with SELECT … FOR UPDATE SKIP LOCKED at
// READ COMMITTED and settled by receipts. It needs MySQL 8.0.13 or newer
// (SKIP LOCKED came in 8.0.1, column defaults that are expressions in
// 8.0.13), or MariaDB 10.6 or newer (SKIP LOCKED), and is built on
// github.com/go-sql-driver/mysql through database/sql. Only MariaDB 10.11
// runs in this repository's CI; the tests run on MySQL 8.4 under
// testcontainers where a Docker engine answers.
//
// # Opening
//
// Import the package for its side effect, which registers the mysql:// URL
// scheme, and open a client:
//
//	import _ "github.com/fila-go/fila/mysql"
//
//	client, err := fila.Open(ctx, "mysql://app:secret@db:3306/app?fila_migrate=true")
//
// Or build a driver over a *sql.DB the application already has with [New]
// and wrap it with fila.New; Close then leaves the handle open. Give that
// handle's DSN maxAllowedPacket=0 so messages up to fila.MaxBodyBytes (15
// MiB) travel as long data under the server's packet limit.
//
// Fila's tables live in the URL's database, named with a prefix ("fila_" by
// default): fila_messages, fila_dead, fila_marks and fila_schema. They are
// created and upgraded by [Migrate] (or [MigrateURL]), by fila_migrate=true at
// open, or by the command "fila schema up"; any number of processes may
// migrate at once (a GET_LOCK serializes them). Without a migration, opening
// checks the tables' version and fails with [ErrNotMigrated] (an
// fila.ErrInvalid) saying what to run. The user needs SELECT, INSERT, UPDATE
// and DELETE on those tables, and CREATE, ALTER and INDEX to migrate.
//
// Open (and New) connect before they return: an unreachable server fails
// there with fila.ErrUnavailable, refused credentials with
// fila.ErrAccessDenied. Afterwards database/sql replaces broken connections
// by itself; calls fail with fila.ErrUnavailable while the server is down.
//
// # URL parameters
//
// Parameters starting with fila_ are Fila's; an unknown one fails with
// fila.ErrInvalid. Every other parameter goes to go-sql-driver/mysql as a DSN
// parameter (tls, timeout, readTimeout, charset, …); a name it does not know
// is set as a server variable at connection start (wait_timeout=600), and
// one the server does not know either fails Open with fila.ErrInvalid.
//
//	parameter           default  meaning
//	fila_prefix         fila_    start of the names of Fila's tables: lower-case
//	                             letters, digits and '_' (Options.Prefix)
//	fila_migrate        false    create or upgrade the tables at open (Options.Migrate)
//	fila_poll_interval  250ms    longest wait between checks of a blocked Receive: it
//	                             bounds the wake-up for another process's enqueue
//	                             (Options.PollInterval)
//	fila_max_conns      20       connections of the driver's pool (sql.DB.SetMaxOpenConns)
//	maxAllowedPacket    0        go-sql-driver's; 0, the server's limit, unless given
//	interpolateParams   true     go-sql-driver's; true, one round trip a statement,
//	                             unless given (a statement too large for a packet
//	                             is prepared instead, its large values sent as long data)
//	any other           -        go-sql-driver's DSN parameters, then server variables
//
// The connections of a driver opened from a URL start at READ COMMITTED
// (transaction_isolation, or tx_isolation on MariaDB before 11.1); a URL that
// sets either variable keeps its level, and the driver's transactions then
// ask for READ COMMITTED each, as they do over a *sql.DB given to New.
//
// # Durability
//
// When Enqueue returns nil the messages are committed, as durable as the
// server's innodb_flush_log_at_trx_commit (and, with replication,
// sync_binlog and semi-synchronous replication) make any commit. A batch is
// one transaction: all of it or nothing. The fault tests kill a private
// mariadbd mid-run and lose no enqueue that returned nil.
//
// # Transactional enqueue
//
// Client.EnqueueTx and PublishTx take a *sql.Tx (or any [Querier]) and store
// the messages inside the caller's transaction: they take effect when the
// caller commits and vanish on rollback, a transactional outbox that
// relay.Relay can forward to any other broker. A dedup key held by a
// message of another transaction that has not committed yet makes EnqueueTx
// wait for that transaction.
//
// # Wake-up and latency
//
// MySQL has no LISTEN/NOTIFY. A Receive blocked on an empty queue wakes at
// once for an enqueue, a replay or a retry made through the same driver
// (the same client), and polls again from 10ms after an EnqueueTx through
// it (the commit is the caller's: 2.1ms median, 12ms at most, measured as
// below); for another process's, it polls: it reads the queue's
// next due time, one index probe per level and no lock, first after 10ms,
// then doubling up to fila_poll_interval while the queue stays empty, and
// claims only when something is due. Measured here (BenchmarkWakeup: a
// receiver that has waited a second or more; 30 enqueues at random points
// of its poll period, on a shared 2-core machine): through its own driver a
// receive returned a median of 2.7ms after the enqueue (at most 8ms);
// through another driver, 128ms (at most 238ms) with the default 250ms
// poll interval and 34ms (at most 99ms) with 50ms: about half the interval
// on average, and the interval plus a claim at worst. Delayed, retried and expired messages are claimed
// at their time. An idle receiver costs the server one indexed read per
// poll interval. The binary log could wake receivers at once, but reading
// it needs the REPLICATION SLAVE privilege; the driver does not use it.
//
// # Claims and settlements
//
// A claim is one transaction: a locking read of up to Max claimable rows
// (ready, or leased past their deadline) in the order of the index
// messages_claim (queue, prank, visible_at, id), where prank is
// fila.MaxPriority minus the level, so the highest level comes first on
// every server (MariaDB before 10.8 ignores DESC in an index); SKIP LOCKED
// passes over rows another claim holds; then one UPDATE leases them under
// one fresh token. Because the index order is the ORDER BY, the scan stops
// after the rows it takes and locks nothing else (at READ COMMITTED,
// whatever the server's default, see above). Ack, Retry, Extend and Dead are fenced by (id, token): a
// settlement of a lease that was taken over or already settled gets
// fila.ErrLeaseLost and changes nothing. Several acks are one DELETE of
// every (id, token) in a transaction (when a lease is no longer current, it
// rolls back and a locking read tells which). Client.AckReceive (and so the
// worker) acks and claims in one transaction.
//
// Deadlocks and lock wait timeouts (error 1213, 1205) roll a transaction
// back; the driver runs its own transactions and single statements (marks:
// concurrency slots deadlock now and then when many clients take and free
// them) again, up to three times, and then returns fila.ErrUnavailable.
//
// # Priorities, dedup keys, dead letters, marks, topics
//
// Everything the PostgreSQL driver's default mode has: levels 0 to
// fila.MaxPriority; dedup keys by a unique index (queue, dedup_key);
// dead letters listed by keyset pages, replayed and purged in one
// transaction; stats with the oldest ready message's age and ready counts
// per level; marks (pause, cancel, periodic jobs, unique periods) and their
// listing; queue listing and deletion; topics kept by the portable layer
// as marks, a publish storing the copies for every subscription in one
// transaction (backend.MultiEnqueuer); moving queues with fila migrate,
// delayed messages and dead letters included. TopicRewind is the
// PostgreSQL log mode's alone.
//
// # MySQL and MariaDB
//
// The SQL is the same on both. Where they differ:
//
//   - Times are BIGINT microseconds since the Unix epoch from
//     TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)): no time
//     zone (session or system) takes part on either server.
//   - Names (queues, kinds, dedup keys, marks) are VARBINARY: compared and
//     sorted bytewise, whatever the collation, and a trailing space counts
//     (PAD SPACE collations would ignore it).
//   - MySQL 8.0 caps a BLOB written by one transaction at 10% of the redo log
//     (innodb_redo_log_capacity, 100 MiB by default): a 15 MiB message needs
//     a redo log of 150 MiB or more there. MariaDB has no such cap.
//   - MariaDB's default max_allowed_packet is 16 MiB, MySQL's 64 MiB; a
//     message of fila.MaxBodyBytes fits either, as long data.
//   - MariaDB's SIMULTANEOUS_ASSIGNMENT SQL mode changes how an UPDATE's
//     assignments see each other; the driver's UPDATEs give the same result
//     under both behaviours.
//   - The server's binlog_format must be ROW or MIXED (the default on both
//     since MySQL 5.7.7 and MariaDB 10.2.4): at READ COMMITTED, STATEMENT
//     refuses the dead-letter and replay statements.
//
// # Caveats
//
//   - A long transaction holds back InnoDB's purge of old row versions (the
//     history list), as it does PostgreSQL's vacuum; BENCHMARKS.md measures
//     an idle REPEATABLE READ transaction held for 10 minutes beside a
//     sustained load.
//   - ReceiveDelayed (moving a queue's delayed messages) sorts the queue's
//     delayed rows and locks them while it claims: it serves fila migrate,
//     not the hot path.
//   - Stats count a queue's rows: their cost grows with the queue.
package mysql
