package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// refsOf returns the refs that ack ds.
func refsOf(ds []backend.Delivery) []backend.Ref {
	refs := make([]backend.Ref, len(ds))
	for i, d := range ds {
		refs[i] = backend.Ref{ID: d.ID, Receipt: d.Receipt}
	}
	return refs
}

// wantAckErrs reports each of errs that is not want (errors.Is; nil: no
// error).
func wantAckErrs(t *testing.T, what string, errs []error, want error) {
	t.Helper()
	for i, e := range errs {
		if !errors.Is(e, want) {
			t.Errorf("%s %d: %v; want %v", what, i, e, want)
		}
	}
}

// TestAckReceiveOneTransaction: AckReceive's ack and claim commit
// together. While another session holds the queue's claim lock (the log
// mode's advisory lock), the claim waits, and the ack sent before it in the
// same round trip is not visible yet; once the lock goes, both are done.
// Sent as two transactions, the ack would be committed while the claim
// waits.
func TestAckReceiveOneTransaction(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	ctx := ctxT(t, 30*time.Second)
	enqueueRaw(t, d, "q", 1)
	first, err := d.Receive(ctx, "q", backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(first) != 1 {
		t.Fatalf("Receive: %d, %v; want 1", len(first), err)
	}
	enqueueRaw(t, d, "q", 1)

	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(ctx) }()
	// The claim's lock: the migrations name the schema quoted.
	lockKey := "fila.log." + pgx.Identifier{schema}.Sanitize()
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, lockKey, "q"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		errs []error
		ds   []backend.Delivery
		err  error
	}
	done := make(chan result, 1)
	go func() {
		errs, ds, err := d.AckReceive(ctx, refsOf(first), "q", backend.ReceiveParams{Max: 10, Lease: time.Minute})
		done <- result{errs, ds, err}
	}()
	waitFor(t, 10*time.Second, "the claim to wait for the queue's lock", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = (hashtext($1)::int8 & 4294967295)::text::oid
			AND objid = (hashtext($2)::int8 & 4294967295)::text::oid`, lockKey, "q").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	settles := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.log_settles WHERE queue = 'q'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := settles(); n != 0 {
		t.Errorf("%d settlements committed while the claim of the same AckReceive waits; want none before it commits", n)
	}
	if err := locker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.errs) != 1 || r.errs[0] != nil {
		t.Fatalf("AckReceive: ack %v, claim %v", r.errs, r.err)
	}
	if len(r.ds) != 1 || r.ds[0].ID == first[0].ID {
		t.Fatalf("AckReceive claimed %d (%v); want the second message", len(r.ds), r.ds)
	}
	if n := settles(); n != 1 {
		t.Errorf("%d settlements after AckReceive; want the ack's one", n)
	}
}

// TestAckReceiveClaimsOnlyBacklogs: after a claim that took less than it
// could, AckReceive acks without a claim, even once a message enqueued
// elsewhere has been notified (the receive that follows claims it, with
// whatever else came meanwhile); after a claim that took all it asked
// for, AckReceive claims the rest in the same call.
func TestAckReceiveClaimsOnlyBacklogs(t *testing.T) {
	quietModes(t, func(t *testing.T, mode string, open func() *postgres.Driver) {
		d, other := open(), open()
		ctx := ctxT(t, 30*time.Second)
		p := backend.ReceiveParams{Max: 10, Lease: time.Minute}
		waitListening(t, d)
		enqueueRaw(t, d, "q", 3)
		ds, err := d.Receive(ctx, "q", p)
		if err != nil || len(ds) != 3 {
			t.Fatalf("Receive: %d, %v; want 3", len(ds), err)
		}
		enqueueRaw(t, other, "q", 12)
		claims := postgres.Claims(d)
		errs, got, err := d.AckReceive(ctx, refsOf(ds), "q", p)
		if err != nil || len(got) != 0 {
			t.Fatalf("AckReceive after a claim of 3 of 10: %d deliveries, %v; want the acks alone", len(got), err)
		}
		wantAckErrs(t, "ack", errs, nil)
		if n := postgres.Claims(d) - claims; n != 0 {
			t.Errorf("AckReceive after a claim of 3 of 10 ran %d claims; want none", n)
		}
		// The acks held: acking again finds the leases gone.
		again, err := d.Ack(ctx, refsOf(ds))
		if err != nil {
			t.Fatal(err)
		}
		wantAckErrs(t, "second ack", again, backend.ErrLeaseLost)
		full, err := d.Receive(ctx, "q", p)
		if err != nil || len(full) != 10 {
			t.Fatalf("Receive: %d, %v; want 10 of the 12 enqueued elsewhere", len(full), err)
		}
		claims = postgres.Claims(d)
		errs, rest, err := d.AckReceive(ctx, refsOf(full), "q", p)
		if err != nil || len(rest) != 2 {
			t.Fatalf("AckReceive after a full claim: %d deliveries, %v; want the other 2", len(rest), err)
		}
		wantAckErrs(t, "ack", errs, nil)
		if n := postgres.Claims(d) - claims; n != 1 {
			t.Errorf("AckReceive after a full claim ran %d claims; want 1", n)
		}
	})
}
