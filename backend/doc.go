// Package backend is the contract between Fila's portable layer (package fila)
// and a broker driver. Application code does not use it; driver authors do.
//
// # Who implements what
//
// A driver implements [Driver]. It may also implement optional interfaces;
// the portable layer finds them with a type assertion, and without one it
// falls back as listed:
//
//   - [Deduper]: dedup keys. Without it (or with DedupKeys false), an
//     Enqueue with a dedup key returns ErrUnsupported, and so does
//     Message.UniqueFor.
//   - [DeadLetterer]: listing, replaying and purging dead letters. Without
//     it those calls return ErrUnsupported (Driver.Dead still keeps dead
//     letters), as do a relay and fila migrate moving dead letters out of
//     the driver.
//   - [StatsReader]: queue counts. Without it Client.QueueStats returns
//     ErrUnsupported, and so does QueueDelete without Force (which needs
//     the counts).
//   - [TxEnqueuer]: enqueue inside the caller's transaction. Without it
//     Client.EnqueueTx returns ErrUnsupported.
//   - [DelayedReceiver]: taking delayed messages before their run-at.
//     Without it a relay or fila migrate moving delayed messages out of
//     the driver returns ErrUnsupported.
//   - [DeadImporter]: storing dead letters from another broker. Without it
//     a relay or fila migrate moving dead letters into the driver returns
//     ErrUnsupported.
//   - [QueueLister]: naming the queues. Without it Client.QueueList returns
//     ErrUnsupported.
//   - [QueueDeleter]: deleting a queue. Without it Client.QueueDelete
//     returns ErrUnsupported.
//   - [Marker]: named marks per queue. Without it queue pause, unique
//     periods (Message.UniqueFor), message cancel and periodic jobs return
//     ErrUnsupported.
//   - [MarkLister]: listing a Marker's marks. Without it Client.MessageCancel
//     returns ErrUnsupported; the other mark features still work.
//   - [AckReceiver]: acking and claiming in one round trip. Without it
//     Client.AckReceive only acks (Ack) and claims nothing, and the worker
//     acks on its own beside its receives.
//   - [Pinger]: checking that the broker answers. Without it Client.Ping
//     returns nil. (An [Opener] checks the broker itself before it returns.)
//   - [Namer]: a short name ("postgres") for errors, logs and metrics.
//     Without it the client calls the driver "unnamed".
//
// Each optional contract rule and the conformance Feature a driver declares
// missing for it are listed in CONTRACT.md at the root of the repository.
//
// Policy lives once, in package fila: it validates queue names, kinds, bodies,
// headers, delays and leases, assigns message ids, enforces max attempts,
// detects double settlement of a delivery and returns ErrClosed after Close.
// A driver therefore receives only valid input and only translates it into
// broker operations.
//
// A driver registers an [Opener] for its URL schemes with fila.Register. The
// Opener connects and checks the broker before returning; fila.Open passes it
// the client's logger in [OpenOptions], and the driver sends every log line
// there (reporting an outage with a bounded number of lines at Info and
// above) and keeps the URL's credentials out of its errors and logs
// ([RedactError]).
//
// # Delivery semantics every driver keeps
//
// The rules are CONTRACT.md's; this is what they ask of a driver. Delivery
// is at least once. Every method must be safe for concurrent use.
//
//   - Enqueue stores every message or returns an error; when it returns nil
//     the messages are durable at the broker's durability level (contract:
//     durable-enqueue).
//   - Receive blocks until at least one message is available or ctx ends,
//     and hands each message out under a lease whose deadline is recorded
//     per delivery. While the lease is current no other Receive returns the
//     message (contract: visibility). A message whose lease passes without
//     settlement becomes receivable again with its attempt incremented
//     (contract: lease-expiry); a Receive blocked on an empty queue must
//     notice that, and new enqueues, within a bounded time (contract:
//     wake-up). Attempts count every delivery, crashed ones included.
//     Receive hands out messages whose attempt exceeds their max attempts:
//     the portable layer dead-letters them (contract: max-attempts).
//   - Ack, Retry, Dead and Extend are fenced by the receipt: if the receipt
//     is not the current lease of the message they return ErrLeaseLost and
//     change nothing. A lease stops being current at its deadline, whether
//     or not the message was claimed again since; a second settlement of
//     the same receipt is ErrLeaseLost too (contract: fencing,
//     lease-ends-at-deadline).
//   - What was enqueued is what every delivery and dead letter carries, byte
//     for byte: a driver that keeps a message in memory stores and hands out
//     copies, never the caller's slices (contract: byte-exact).
//   - Context errors are returned unwrapped (errors.Is(err,
//     context.Canceled)). A claim sent to the broker is completed even when
//     ctx ends meanwhile, and what it claimed is returned: the portable
//     layer hands it out (or gives it back after Close), so it is neither
//     lost nor held for a lease (contract: cancellation). Receive never returns more than
//     p.Max deliveries.
//   - Close releases resources. It never acks. Leased messages are released
//     or left to expire (contract: close).
package backend
