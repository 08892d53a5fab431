// Package mongo is Fila's MongoDB driver, built on
// go.mongodb.org/mongo-driver/v2. Import it for its side effect to open
// mongodb:// and mongodb+srv:// URLs with fila.Open, or build a driver over
// your own client with New:
//
//	import _ "github.com/fila-go/fila/mongo"
//	c, err := fila.Open(ctx, "mongodb://db1,db2,db3/?replicaSet=rs0&fila_database=jobs")
//
// It is written for MongoDB 5.0 or later. Replica sets (and sharded
// clusters through mongos) get every feature; a standalone server works
// without transactions and change streams (see below).
//
// Open (and New) talk to the server before returning (hello, buildInfo,
// index creation), within ctx and the connection string's
// serverSelectionTimeoutMS (30s by default): an unreachable server fails
// there with an error matching fila.ErrUnavailable (and ctx's error when
// ctx ended first). The mongo driver reconnects by itself afterwards.
//
// # Storage
//
// Pending messages of all queues (ready, delayed and leased) live in one
// collection, <prefix>messages (default fila_messages, in database "fila"
// or the one the URL names). Each document has a due time: its run-at while
// it waits, its lease deadline while leased. The claim is one
// findOneAndUpdate matching {queue, due <= now}, sorted by due time and id,
// that sets a fresh receipt and deadline and increments the attempt count,
// served by the index {q, due, _id} (fila_claim). A Receive of several
// messages claims them in two round trips: read the first claimable
// messages, then one updateMany naming each by id and attempt count that
// re-checks per document that it is still claimable (a third round trip
// reads back what was claimed when competing consumers took some). Ack,
// Retry, Dead and Extend match
// {_id, queue, receipt} and a lease deadline after now (by this client's
// clock), so a stale or expired receipt changes nothing and gets
// ErrLeaseLost; an Ack of many is one deleteMany.
//
// Dead letters live in <prefix>dead. Where the server has transactions,
// Dead deletes the message and inserts the letter in one transaction.
// Without them it writes the letter first and then deletes the message,
// both fenced by the receipt (undoing the letter if the lease turned out
// lost), so a crash in between can leave a message both dead and pending
// (delivered again, listed twice) but never loses it.
//
// Dedup keys (queue + key) sit in a field with a unique sparse index. The
// messages collection only holds pending messages (an ack deletes, Dead
// moves), so a key is free again once its holder is acked or dead, with no
// partial index, which some compatible servers lack.
//
// # Listing and deleting queues
//
// Queues are not declared anywhere: a queue exists while a message or a
// dead letter names it. QueueList reads the distinct queue names of the
// messages and dead-letter collections (an aggregation sorting on and
// grouping by the queue field, since FerretDB v1 refuses the distinct
// command with a deadline), merged and sorted. QueueDelete is a deleteMany
// of the queue's documents in each collection (dedup keys live in the
// messages and go with them), in one transaction where the server has
// them; a very large queue can then exceed the server's transaction time
// limit (transactionLifetimeLimitSeconds), and the delete fails whole.
// Without transactions the messages go first, then the dead letters, so a
// Dead racing the deletion finds its lease lost; a DeadReplay racing it can
// leave replayed messages behind. Deliveries leased from a deleted queue
// get ErrLeaseLost when settled; the queue can be used again at once.
//
// # Marks
//
// The driver implements backend.Marker and backend.MarkLister. Marks live
// in <prefix>marks, one document per mark: _id is the queue name, a NUL and
// the mark's name, with the queue (q), the name (n) and the expiry (u, a
// date rounded up to the millisecond, or null for never). Expiry is decided
// by the clock of the process calling the driver (time.Now()), like lease
// deadlines: a mark whose expiry has passed by that clock is absent to
// every call, whenever it is deleted. MarkSet is one upsert by _id; with
// onlyNew its filter also requires the stored mark to have expired, so a
// live mark makes the upsert collide with its _id, which the server
// refuses (duplicate key: the mark exists). Creating a new mark is thus
// decided by the unique _id, atomic on any server; taking over an expired
// one is a conditional single-document update, atomic on MongoDB but not
// on FerretDB v1 (see below), where two concurrent callers can both take
// over the same expired mark. MarkList reads the queue's marks whose name
// starts with the prefix (an anchored regular expression of the quoted
// prefix, served by the index {q, n}, fila_marks), sorts the names in Go
// (bytewise) and deletes the expired ones it passed. Where the server has
// TTL indexes, one on u (fila_marks_expiry) also makes it delete expired
// marks by itself, by its own clock, within a minute or so; a server clock
// ahead of the clients' makes marks vanish early by the skew. QueueDelete
// deletes the queue's marks with its messages and dead letters.
//
// # Delivery semantics
//
// At least once. A message whose lease passes without settlement is
// claimable again with its attempt incremented; a consumer with a short
// lease cannot take a message leased for longer, since the claim matches
// on the stored deadline. One consumer sees messages in due-time order
// (FIFO for messages without delays or retries); competing consumers get no
// ordering promise. A claim that was already sent when the caller's context
// ended is allowed to finish (for up to two seconds) and its deliveries are
// returned, so cancellation does not leave messages leased unseen.
//
// Times are taken from the clock of the process calling the driver and
// stored with millisecond precision (run-at and deadlines rounded up, so
// never early). Keep the clocks of producers and consumers synchronised
// (NTP): a skewed clock shortens or lengthens leases and delays by the
// skew.
//
// Moving queues between brokers is supported: a message's carried attempt
// count (backend.Message.Attempts) is stored as its starting count,
// ReceiveDelayed takes delayed messages early (one taken early whose lease
// expires, or that is released, stays unclaimable by Receive until its
// run-at; ReceiveDelayed takes it again), and DeadImport stores dead
// letters from elsewhere, skipping ids already stored.
//
// # Errors
//
// A call whose context ended returns ctx.Err() (whatever the server said).
// Failures a retry may cure wrap backend.ErrUnavailable (fila.ErrUnavailable):
// network errors, no reachable primary, a server shutting down or stepping
// down, an operation the server interrupted or timed out while the caller
// still waited. Refused credentials or permissions (AuthenticationFailed,
// Unauthorized, the mongo driver's authentication failing in the connection
// handshake) wrap fila.ErrAccessDenied, which a retry does not cure. Other
// server errors are wrapped with the operation's name.
//
// # Wake-up
//
// On a replica set a blocked Receive is woken by a change stream on the
// messages collection (one per driver instance, opened when a Receive
// first blocks), filtered on the server to inserts and lease-ending
// updates; latency is the change stream's, typically milliseconds. An
// insert wakes the receivers of its queue; a retry names no queue in its
// event and wakes every receiver of the instance, which re-check (a
// claim and a read each). While the stream is healthy receivers also
// re-check every 5s; while it is down they poll as below. Without
// change streams (a standalone server, FerretDB, or fila_change_streams=
// false) receivers poll: the wait starts at 20ms and doubles while the
// queue stays empty up to fila_poll_interval (default 500ms), which bounds
// the wake-up latency for messages from other processes; enqueues made by
// the same driver instance wake its receivers at once. An idle poll is one
// indexed read of the queue's next due time; it claims only when a message
// is due. Either way, after an empty claim a receiver also computes the
// queue's next due time (a delay ending, a lease expiring) and wakes then,
// so delayed, retried and expired messages are claimed within milliseconds
// of their time, not at the next poll.
//
// # Durability: write and read concern
//
// Every write uses write concern majority by default (journaled per the
// server's writeConcernMajorityJournalDefault): when Enqueue returns nil the
// message survives the loss of the primary. Setting w=1 (the URL's w
// parameter or Options.WriteConcern) is faster but a failover can roll back
// acknowledged writes: enqueued messages can be lost, acks undone (the
// message is delivered again), claims undone (delivered twice). Stats and
// dead-letter listings read with read concern majority on a replica set by
// default (readConcernLevel or Options.ReadConcern change it), so they never
// count writes that could roll back; the claim path always works on the
// primary's current data.
//
// # Transactions
//
// EnqueueTx enqueues inside the caller's transaction: pass the
// *mongo.Session running it, or the context handed to the callback of
// Session.WithTransaction. On a replica set, Enqueue of a batch also runs
// in a transaction so a batch is stored whole or not at all
// (fila_atomic_batches=false turns that off).
//
// # FerretDB and other compatible servers
//
// The driver uses plain MongoDB operations and picks its fallbacks by
// detecting capabilities (hello, buildInfo), not server brands. FerretDB v1
// works with these caveats: it has no transactions (EnqueueTx returns
// ErrUnsupported; Dead uses the ordered fallback; a failed batch may be
// stored in part) and no change streams (receivers poll), and its
// findOneAndUpdate is not atomic under concurrency: two consumers can claim
// the same message at once, the second claim replacing the first's
// receipt (the first consumer's settlement then gets ErrLeaseLost). Use a
// single consumer per queue there, or real MongoDB. The same goes for
// MarkSet with onlyNew taking over an expired mark (creating a new one is
// decided by the unique _id and stays exact). It has no TTL indexes, so
// expired marks are deleted only when MarkList passes them. FerretDB also
// sorts in its own process, so claims slow down as a queue grows.
//
// FerretDB v1.24 on SQLite (modernc.org/sqlite v1.32) enforces a find's or
// findAndModify's maxTimeMS, which the mongo driver derives from a context
// deadline, by interrupting the SQLite connection; when that happens as
// SQLite returns the first row, the statement is left open and the pooled
// connection stays interrupted: every later statement on it fails with
// InternalError "interrupted (9)", for every client of that database, until
// the database is dropped or FerretDB restarts. The reads and claims a
// Receive makes carry no deadline for that reason (a Receive routinely ends
// at its deadline; its own cancellation stays client-side), and such errors
// wrap ErrUnavailable. Other calls whose context deadline expires while the
// server works can still trigger it: against FerretDB, prefer cancellation
// to short deadlines, and give each application its own database.
package mongo
