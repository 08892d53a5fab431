// Package mongo is Fila's MongoDB driver: messages are documents claimed
// with findOneAndUpdate, and receivers wake through change streams where
// the server has them. It is written for MongoDB 5.0 or later and built on
// go.mongodb.org/mongo-driver/v2. Replica sets (and sharded clusters
// through mongos) get every feature; a standalone server works without
// transactions and change streams.
//
// # Opening
//
// Import the package for its side effect, which registers the mongodb://
// and mongodb+srv:// URL schemes, and open a client:
//
//	import _ "github.com/fila-go/fila/mongo"
//
//	client, err := fila.Open(ctx, "mongodb://db1,db2,db3/?replicaSet=rs0&fila_database=jobs")
//
// Or build a driver over a connected *mongo.Client the application owns
// with [New] and wrap it with fila.New; Close then leaves the client
// connected.
//
// Open (and New) talk to the server before they return (they detect what it
// supports and create Fila's indexes), within ctx and the connection
// string's serverSelectionTimeoutMS (30 s by default): an unreachable
// server fails there with fila.ErrUnavailable, and so does a mongodb+srv
// host whose SRV record cannot be looked up (that lookup, by the MongoDB
// driver, does not follow ctx). The MongoDB driver reconnects by itself
// afterwards.
//
// # URL parameters
//
// Parameters starting with fila_ are Fila's; an unknown one fails with
// fila.ErrInvalid. Every other parameter goes to the MongoDB driver, which
// validates it; one it does not know either (the MongoDB driver would
// ignore it) fails with fila.ErrInvalid naming it.
//
//	parameter              default     meaning
//	fila_database          URL path,   database of Fila's collections (Options.Database)
//	                       else fila
//	fila_prefix            fila_       start of the collection names: fila_messages, fila_dead,
//	                                   fila_marks; letters, digits, '_', '-' and '.'
//	                                   (Options.Prefix)
//	fila_poll_interval     500ms       longest wait between checks of a blocked Receive that polls
//	                                   (no change streams); bounds its wake-up latency
//	                                   (Options.PollInterval)
//	fila_change_streams    true        false makes receivers poll even on a replica set
//	                                   (Options.DisableChangeStreams)
//	fila_atomic_batches    true        false stores a batch without a transaction
//	                                   (Options.DisableAtomicBatches)
//	w, journal,            majority    write concern of every write Fila makes; replaces Fila's
//	wtimeoutMS                         majority default (Options.WriteConcern)
//	readConcernLevel       majority    read concern of stats, message and dead-letter listings;
//	                                   majority on a replica set, local otherwise
//	                                   (Options.ReadConcern)
//	any other              MongoDB's   passed to the MongoDB driver: replicaSet, tls, authSource,
//	                                   maxPoolSize, serverSelectionTimeoutMS, …
//
// # Durability
//
// Every write uses write concern majority by default (journaled as the
// server's writeConcernMajorityJournalDefault says): when Enqueue returns
// nil, the message survives the loss of the primary (contract:
// durable-enqueue). With w=1 writes are faster, but a failover can roll
// back acknowledged writes: enqueued messages lost, acks undone (the
// message is delivered again), claims undone (delivered twice). Stats,
// message and dead-letter listings read at majority on a replica set, so
// they never count writes that could roll back.
//
// # Transactions
//
// On a replica set or through mongos, Client.EnqueueTx enqueues inside the
// caller's transaction: pass the *mongo.Session running it, or the context
// given to the callback of Session.WithTransaction. Enqueue of a batch
// also runs in a transaction there, so a batch is stored whole or not at
// all (unless fila_atomic_batches=false). A standalone server has no
// transactions: EnqueueTx returns fila.ErrUnsupported and a batch that
// fails midway keeps what it stored.
//
// # Wake-up and latency
//
// On a replica set a blocked Receive is woken by a change stream on the
// messages collection, typically within milliseconds. Without change
// streams (a standalone server, FerretDB, fila_change_streams=false)
// receivers poll: the wait starts at 20 ms and doubles while the queue
// stays empty, up to fila_poll_interval; enqueues from the same driver
// instance wake its receivers at once. Either way, delayed, retried and
// expired messages are claimed within milliseconds of their time.
//
// # Caveats
//
//   - Lease deadlines, delays and mark expiries follow the clock of the
//     process calling the driver, stored to the millisecond (rounded up, so
//     never early). Keep producers' and consumers' clocks synchronised
//     (NTP): a skewed clock shortens or lengthens leases and delays by the
//     skew. Where the server has TTL indexes it also deletes expired marks
//     by its own clock, so a server clock ahead of the clients' ends marks
//     early by the difference.
//   - Without transactions, Dead writes the dead letter and then deletes the
//     message: a crash in between can leave a message both dead and pending
//     (delivered again, listed twice), never lost. QueueDelete then deletes
//     the messages before the dead letters, and a DeadReplay racing it can
//     leave replayed messages behind.
//   - With transactions, QueueDelete of a very large queue can pass the
//     server's transactionLifetimeLimitSeconds and fail whole.
//   - Ordering: one consumer sees messages in due-time order within a
//     priority level (FIFO without delays or retries), the higher levels
//     first; competing consumers get no ordering promise.
//   - Priorities: a message's level is a field (absent at level 0), and
//     the claim sorts on it before the due time, by the index fila_claim_p
//     (queue, level descending, due, id), which the driver creates at open
//     beside fila_claim (queue, due, id), still used for the next wake-up
//     and ReceiveDelayed. The second index costs every write a little; on
//     a large existing collection the first open builds it. A level whose
//     messages are all leased or delayed is still walked by each claim
//     before the next level, so thousands of leased messages at a high
//     level slow every claim of the queue.
//
// # Message listing
//
// Client.MessageList is one find, with the read concern of stats, that
// claims, locks and writes nothing; its states are those QueueStats
// counts. Ready messages (and messages found by id alone) come in the
// claim order, highest level first, then by due time, then by id: the
// order Receive hands them out. Delayed and leased messages come soonest
// due first (by run-at, by lease deadline), whatever their level. A page
// continues after the previous one's last message by a keyset filter on
// that order, so a page is a range of an index (fila_claim_p for ready
// messages, fila_claim for the others), however deep it is, with no sort
// in memory: Limit+1 entries for ready messages; delayed and leased ones
// share fila_claim's due range, so listing either also passes over the
// other's messages due in between. WithoutBodies leaves the bodies
// unread. On FerretDB v1, which sorts in its own process, a page costs a
// read of the queue's messages in the state, as its claims do.
//
// # FerretDB and other compatible servers
//
// The driver picks its fallbacks by detecting capabilities, not brands.
// FerretDB v1 works, with these limits: no transactions (as a standalone
// server, above); no change streams (receivers poll); findOneAndUpdate is
// not atomic under concurrency, so two consumers can claim one message at
// once (the first one's settlement then gets ErrLeaseLost) and two callers
// can take over one expired mark. So a dedup key's unique period
// (fila.Message.UniqueFor) is only held once per period for producers
// that do not race: concurrent producers of one key can each start the
// next period when the last one has expired, and all store their message
// (four producers on one key with 5 s periods stored five messages where
// three periods passed). The very first period of a key, and every period
// on MongoDB, is atomic: there the mark is taken by one conditional
// upsert, refused as a duplicate _id while the mark lives. Use one
// consumer per queue, and one producer per unique key, there, or real
// MongoDB. It has no TTL indexes, so expired marks are deleted only when
// listed, and it sorts in its own process, so claims slow down as a queue
// grows. FerretDB v1.24 on SQLite can leave a pooled connection broken
// ("interrupted (9)" for every client of that database until the database
// is dropped or FerretDB restarts) when a find or findAndModify hits a
// context deadline: Fila's own receive reads carry no deadline for that
// reason, and such errors wrap ErrUnavailable; prefer cancellation to short
// deadlines there, and give each application its own database.
//
// # Features
//
// On a replica set the driver keeps every rule of the contract, optional
// ones included: dedup keys, priorities, dead-letter management, stats (every
// column), transactional enqueue, atomic batches, moving queues, queue
// listing and deletion, message listing, and marks with listing. Without
// transactions it lacks conformance.FeatureTxEnqueue and
// FeatureAtomicBatch; on FerretDB v1 also FeatureConcurrentClaims (see
// above). See CONTRACT.md in the repository.
//
// # Errors
//
// A call whose context ended returns the context's error, whatever the
// server said, with one exception: a Receive whose claim (findAndModify,
// or the updateMany of a batch) was already sent waits for it, up to 10 s
// after the context ended, and returns what it claimed, which
// fila.Client.Receive hands out (or gives back after Close; contract:
// cancellation); a cancelled claim would still run on the server and
// leave the messages leased to nobody for a whole lease. While the
// context lasts, a claim is waited for however long the server takes. Failures a retry may cure wrap fila.ErrUnavailable: network
// errors, no reachable primary, a server shutting down or stepping down,
// an operation the server interrupted or timed out while the caller still
// waited. Refused credentials or permissions (AuthenticationFailed,
// Unauthorized, a failed authentication handshake) wrap
// fila.ErrAccessDenied.
//
// How the driver works inside (documents and indexes, the claim, dead
// letters and dedup keys, marks, change streams and polling) is in
// docs/design.md in the repository.
package mongo
