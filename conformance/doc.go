// Package conformance is Fila's delivery contract as an executable test
// suite. Every driver — Fila's own and any user's — runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			Open: func(ctx context.Context) (backend.Driver, error) { return mydriver.Open(ctx, u, backend.OpenOptions{}) },
//			Missing: map[conformance.Feature]string{
//				conformance.FeatureDedup: "the broker has no atomic key check",
//			},
//		})
//	}
//
// The contract is stated once, in CONTRACT.md at the root of the
// repository (https://github.com/fila-go/fila/blob/main/CONTRACT.md): a
// list of named rules — durable-enqueue, visibility, lease-expiry, extend,
// fencing, lease-ends-at-deadline, ack-is-final, retry, dead-letters,
// max-attempts, error-history, delay, dedup-keys, dead-letter-management, stats, batches,
// cancellation, close, bad-input, portable-limits, byte-exact, isolation,
// wake-up, tx-enqueue, moving-queues, queue-admin, marks and job-control —
// each with the tests of this suite that check it. Comments across the
// repository cite a rule as "contract: name", and each test's comment
// names the rules it checks.
//
// The tests talk to the driver through the portable fila.Client, so they
// check what applications see. They run in parallel on fresh, random queue
// names with 1 s leases; a whole run takes seconds.
//
// A driver that cannot keep a promise declares the Feature missing with a
// reason and the tests that need it skip with that reason; everything else
// must pass. Declaring a feature present that the driver does not implement
// is itself a failure.
//
// The suite relies on the contract's delivery semantics: at least once, no
// ordering across competing consumers, attempts counting every delivery.
package conformance
