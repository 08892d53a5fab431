// Package memory is Fila's in-process driver: the reference implementation
// of the driver contract and a test double for applications' unit tests.
//
// A [Broker] holds the queues; each [Broker.Open] returns an independent
// driver instance, like a separate process connected to the same broker, so
// competing consumers and crashed consumers can be played in one test. The
// URL form is mem:// (the process-wide default broker) or mem://NAME (a named
// one); importing this package registers the "mem" scheme. There is nothing
// to connect to, so opening mem:// fails only for a bad URL.
//
// # Delivery semantics
//
// Exactly those of the contract (see package backend): at least once; a
// received message is invisible until its lease deadline; an unsettled lease
// expires and the message is delivered again with its attempt incremented;
// Ack, Retry, Dead and Extend are fenced by the lease's receipt and refused
// once its deadline passed; bodies and headers are copied in and out; dead letters
// are kept per queue with reason and attempts and can be listed, replayed and
// purged; dedup keys are enforced over pending messages; enqueue inside a
// [Tx] becomes visible only when the Tx commits. Nothing survives the
// process: durability (R1) is the process's lifetime.
//
// # Time
//
// All times come from the Broker's [Clock]. Tests that check leases and
// delays without sleeping use a [FakeClock] and move it with Advance; a
// Receive blocked on a delayed message or a lease wakes when the clock
// passes it.
//
// A Receive blocked on an empty queue wakes as soon as a message is
// enqueued, retried or released (wake-up latency: a goroutine switch).
package memory
