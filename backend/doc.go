// Package backend is the contract between Fila's portable layer (package fila)
// and a broker driver. Application code does not use it; driver authors do.
//
// # Who implements what
//
// A driver implements [Driver]. It may also implement the optional capability
// interfaces [Deduper], [DeadLetterer], [StatsReader], [TxEnqueuer],
// [DelayedReceiver] and [DeadImporter]; the
// portable layer checks for them with a type assertion and returns
// ErrUnsupported to the caller when one is missing (the documented fallback).
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
// Delivery is at least once. Every method must be safe for concurrent use.
//
//   - Enqueue stores every message or returns an error; when it returns nil the
//     messages are durable at the broker's durability level (R1).
//   - Receive blocks until at least one message is available or ctx ends, and
//     hands each message out under a lease whose deadline is recorded per
//     delivery. While the lease is current no other Receive returns the message
//     (R2). A message whose lease passes without settlement becomes receivable
//     again with its attempt incremented (R3); a Receive blocked on an empty
//     queue must notice that, and new enqueues, within a bounded time (R18).
//     Attempts count every delivery, crashed ones included. Receive hands out
//     messages whose attempt exceeds their max attempts: the portable layer
//     dead-letters them.
//   - Ack, Retry, Dead and Extend are fenced by the receipt: if the receipt is
//     not the current lease of the message they return ErrLeaseLost and change
//     nothing. A lease stops being current at its deadline, whether or not the
//     message was claimed again since; a second settlement of the same receipt
//     is ErrLeaseLost too.
//   - What was enqueued is what every delivery and dead letter carries, byte
//     for byte: a driver that keeps a message in memory stores and hands out
//     copies, never the caller's slices.
//   - Context errors are returned unwrapped (errors.Is(err, context.Canceled)).
//     A message claimed while ctx was being cancelled is not lost: its lease
//     expires.
//   - Close releases resources. It never acks. Leased messages are released or
//     left to expire.
package backend
