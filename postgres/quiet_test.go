package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// quietModes runs f against a fresh schema in each mode.
func quietModes(t *testing.T, f func(t *testing.T, mode string, open func() *postgres.Driver)) {
	for _, mode := range []string{postgres.ModeSkipLocked, postgres.ModeLog} {
		t.Run(mode, func(t *testing.T) {
			pool := testPool(t)
			schema := migratedSchema(t, pool)
			f(t, mode, func() *postgres.Driver {
				d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: mode})
				// Long enough that a loaded machine does not end a quiet
				// mark before these tests look at the skipped claims
				// (TestQuietMarkExpires checks the default bound).
				postgres.SetQuietFor(d, time.Hour)
				return d
			})
		})
	}
}

// settleQuiet returns once a receive of q by d waits without claiming: the
// notifications of earlier enqueues, which may arrive after the claim that
// took their messages began, have been seen. Its receives take nothing
// (they find q empty, or wait without claiming).
func settleQuiet(t *testing.T, d *postgres.Driver, q string, p backend.ReceiveParams) {
	t.Helper()
	skipped := postgres.Skipped(d)
	waitFor(t, 10*time.Second, "a receive that waits without claiming", func() bool {
		if ds, _ := d.Receive(ctxT(t, 30*time.Millisecond), q, p); len(ds) > 0 {
			t.Fatalf("a receive took %d messages; want none", len(ds))
		}
		return postgres.Skipped(d) > skipped
	})
}

// waitListening returns once d's LISTEN connection is up, receiving from
// a queue of its own meanwhile (a receive starts the listener).
func waitListening(t *testing.T, d *postgres.Driver) {
	t.Helper()
	waitFor(t, 10*time.Second, "the LISTEN connection", func() bool {
		_, _ = d.Receive(ctxT(t, 10*time.Millisecond), "warm-up", backend.ReceiveParams{Max: 1, Lease: time.Minute})
		return postgres.ListenerUp(d)
	})
}

// enqueueRaw enqueues n messages to q through d.
func enqueueRaw(t *testing.T, d *postgres.Driver, q string, n int) {
	t.Helper()
	msgs := make([]backend.Message, n)
	for i := range msgs {
		msgs[i] = backend.Message{ID: uuidString(), Kind: "k", Body: []byte(fmt.Sprint(i)), MaxAttempts: 5}
	}
	if _, err := d.Enqueue(ctxT(t, 10*time.Second), q, msgs); err != nil {
		t.Fatal(err)
	}
}

// TestReceiveQuietSkipsClaim: after a claim that took less than it could,
// a receive of the queue waits without claiming, and a message enqueued by
// another driver (another process) still reaches it, through the
// notification.
func TestReceiveQuietSkipsClaim(t *testing.T) {
	quietModes(t, func(t *testing.T, mode string, open func() *postgres.Driver) {
		d, other := open(), open()
		p := backend.ReceiveParams{Max: 10, Lease: time.Minute}
		enqueueRaw(t, d, "q", 3)
		// The listener is up before the first claim marks the queue.
		waitListening(t, d)
		ds, err := d.Receive(ctxT(t, 10*time.Second), "q", p)
		if err != nil || len(ds) != 3 {
			t.Fatalf("Receive: %d, %v; want 3", len(ds), err)
		}
		settleQuiet(t, d, "q", p)
		claims, skipped := postgres.Claims(d), postgres.Skipped(d)
		type result struct {
			ds  []backend.Delivery
			err error
		}
		done := make(chan result, 1)
		go func() {
			ds, err := d.Receive(ctxT(t, 20*time.Second), "q", p)
			done <- result{ds, err}
		}()
		waitFor(t, 10*time.Second, "the receive to wait", func() bool { return postgres.Sleeping(d) == 1 })
		if n := postgres.Claims(d) - claims; n != 0 || postgres.Skipped(d) != skipped+1 {
			t.Errorf("a receive after a claim that took 3 of 10 ran %d claims and skipped %d; want none run, one skipped",
				n, postgres.Skipped(d)-skipped)
		}
		enqueueRaw(t, other, "q", 1)
		r := <-done
		if r.err != nil || len(r.ds) != 1 {
			t.Fatalf("Receive after an enqueue elsewhere: %d, %v; want the message", len(r.ds), r.err)
		}
	})
}

// TestReceiveQuietLeaseExpiry: a receive that waits without claiming still
// wakes when the leases the previous claim took expire, and delivers them
// again (not at the 30 s safety poll).
func TestReceiveQuietLeaseExpiry(t *testing.T) {
	quietModes(t, func(t *testing.T, mode string, open func() *postgres.Driver) {
		d := open()
		p := backend.ReceiveParams{Max: 10, Lease: time.Minute}
		waitListening(t, d)
		enqueueRaw(t, d, "exp", 2)
		ds, err := d.Receive(ctxT(t, 10*time.Second), "exp", backend.ReceiveParams{Max: 10, Lease: 2 * time.Second})
		if err != nil || len(ds) != 2 {
			t.Fatalf("Receive: %d, %v; want 2", len(ds), err)
		}
		settleQuiet(t, d, "exp", p)
		skipped := postgres.Skipped(d)
		// Well under the safety poll (30 s): only the due time wakes it.
		again, err := d.Receive(ctxT(t, 15*time.Second), "exp", p)
		if err != nil || len(again) != 2 {
			t.Fatalf("Receive after the leases expired: %d, %v; want both again", len(again), err)
		}
		for _, d := range again {
			if d.Attempt != 2 {
				t.Errorf("redelivery of %s at attempt %d, want 2", d.ID, d.Attempt)
			}
		}
		if postgres.Skipped(d) != skipped+1 {
			t.Errorf("skipped %d claims; want the receive to have waited for the leases without one", postgres.Skipped(d)-skipped)
		}
	})
}

// TestReceiveQuietDelayedRead: a delayed message that a claim reads as a
// timer sets the queue's next due time, so a receive that waits without
// claiming wakes at its run-at and delivers it (not at the 30 s safety
// poll). In the log mode the claim computes that time from what it wrote
// itself when nothing was swept.
func TestReceiveQuietDelayedRead(t *testing.T) {
	quietModes(t, func(t *testing.T, mode string, open func() *postgres.Driver) {
		d := open()
		p := backend.ReceiveParams{Max: 10, Lease: time.Minute}
		waitListening(t, d)
		id := uuidString()
		msg := backend.Message{ID: id, Kind: "k", Body: []byte("later"), MaxAttempts: 5, Delay: 2 * time.Second}
		if _, err := d.Enqueue(ctxT(t, 10*time.Second), "later", []backend.Message{msg}); err != nil {
			t.Fatal(err)
		}
		settleQuiet(t, d, "later", p)
		skipped := postgres.Skipped(d)
		ds, err := d.Receive(ctxT(t, 15*time.Second), "later", p)
		if err != nil || len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("Receive after the run-at: %d, %v; want the delayed message", len(ds), err)
		}
		if postgres.Skipped(d) != skipped+1 {
			t.Errorf("skipped %d claims; want the receive to have waited for the run-at without one", postgres.Skipped(d)-skipped)
		}
	})
}
