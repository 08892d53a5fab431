// Package memory is Fila's in-process driver: the reference implementation
// of the contract, and a test double for applications' unit tests.
//
// # Opening
//
// Import the package for its side effect, which registers the mem:// URL
// scheme, and open a client:
//
//	import _ "github.com/fila-go/fila/memory"
//
//	client, err := fila.Open(ctx, "mem://tests") // the broker named "tests"; mem:// is "default"
//
// Or make a [Broker] of your own with [NewBroker] (with a [FakeClock] to
// control time) and wrap each of its drivers with fila.New:
//
//	b := memory.NewBroker(memory.BrokerOptions{Clock: memory.NewFakeClock(start)})
//	client, err := fila.New(b.Open())
//
// Each [Broker.Open], like each fila.Open of the same mem:// URL, returns
// an independent driver instance over the same queues, as separate
// processes connected to one broker would be, so competing and crashing
// consumers can be played in one test. There is nothing to connect to:
// opening fails only for a bad URL.
//
// # URL parameters
//
// A mem:// URL takes no query parameters; any parameter fails with
// fila.ErrInvalid.
//
//	parameter     default   meaning
//	NAME          default   not a query parameter: the host of mem://NAME, naming the
//	                        process-wide broker to use (see Named)
//
// # Durability
//
// Nothing survives the process: a message is stored as long as the process
// runs (contract: durable-enqueue, at that level).
//
// # Transactional enqueue
//
// Client.EnqueueTx takes a [Tx] from [Broker.Begin]: its messages become
// visible when it commits and vanish when it rolls back, standing in for a
// database transaction in unit tests.
//
// # Time and wake-up
//
// All times come from the Broker's [Clock]. Tests that check leases and
// delays without sleeping use a [FakeClock] and move it with Advance; a
// Receive blocked on a delayed message or a lease wakes when the clock
// passes it. A Receive blocked on an empty queue wakes as soon as a
// message is enqueued, retried or released: a goroutine switch.
//
// # Features
//
// Every rule of the contract, optional ones included: dedup keys,
// dead-letter management, stats (every column), transactional enqueue,
// atomic batches, moving queues, queue listing and deletion, and marks with
// listing. Its conformance run declares no conformance.Feature missing.
// Bodies and headers are copied in and out, so a test cannot change a
// stored message by accident.
package memory
