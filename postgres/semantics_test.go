package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

func msg(id, kind string) backend.Message {
	return backend.Message{ID: id, Kind: kind, Body: []byte{}, EnqueuedAt: time.Now()}
}

// TestSettlementFencing pins the fencing details: an expired lease nobody
// claimed again is refused like any other lost lease (Ack, Retry, Extend);
// garbage receipts are ErrLeaseLost; a repeated ref in one Ack is a second
// settlement.
func TestSettlementFencing(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	q := "sem-" + randHex(4)
	ids := []string{uuidString(), uuidString(), uuidString()}
	slices.Sort(ids) // a batch is claimed in id order (time-ordered ids in real use)
	if _, err := d.Enqueue(ctx, q, []backend.Message{msg(ids[0], "a"), msg(ids[1], "b")}); err != nil {
		t.Fatal(err)
	}
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 2, Lease: 50 * time.Millisecond})
	if err != nil || len(ds) != 2 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	if ds[0].ID != ids[0] || ds[1].ID != ids[1] {
		t.Errorf("claim order %s, %s; want enqueue order", ds[0].ID, ds[1].ID)
	}
	waitFor(t, 10*time.Second, "the leases to expire", func() bool {
		st, err := d.QueueStats(ctx, q)
		return err == nil && st.Ready == 2 // expired leases count as ready
	})
	ref := func(d backend.Delivery) backend.Ref { return backend.Ref{Queue: q, ID: d.ID, Receipt: d.Receipt} }
	if _, err := d.Extend(ctx, ref(ds[0]), time.Minute); !errors.Is(err, backend.ErrLeaseLost) {
		t.Errorf("Extend of an expired lease: want ErrLeaseLost, got %v", err)
	}
	if errs, err := d.Ack(ctx, []backend.Ref{ref(ds[0])}); err != nil || !errors.Is(errs[0], backend.ErrLeaseLost) {
		t.Errorf("Ack of an expired, unclaimed lease: %v, %v; want ErrLeaseLost", errs, err)
	}
	if err := d.Retry(ctx, ref(ds[1]), time.Hour, "later"); !errors.Is(err, backend.ErrLeaseLost) {
		t.Errorf("Retry of an expired, unclaimed lease: want ErrLeaseLost, got %v", err)
	}
	if st, err := d.QueueStats(ctx, q); err != nil || st.Ready != 2 || st.Delayed != 0 {
		t.Errorf("stats %+v, %v; want both messages ready (nothing settled)", st, err)
	}

	// A current lease, acked twice in one call and with a garbage receipt.
	ds, err = d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	bad := backend.Ref{Queue: q, ID: ds[0].ID, Receipt: "not-a-uuid"}
	errs, err := d.Ack(ctx, []backend.Ref{ref(ds[0]), ref(ds[0]), bad})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], backend.ErrLeaseLost) || !errors.Is(errs[2], backend.ErrLeaseLost) {
		t.Errorf("Ack errors %v; want [nil, ErrLeaseLost, ErrLeaseLost]", errs)
	}
}

// TestCloseEndsBlockedReceive: Close of the driver itself (not through a
// Client) ends a blocked Receive with ErrClosed and stops the listener.
func TestCloseEndsBlockedReceive(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d, err := postgres.New(ctxT(t, 10*time.Second), pool, postgres.Options{Schema: schema, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := d.Receive(context.Background(), "close-"+randHex(4), backend.ReceiveParams{Max: 1, Lease: time.Second})
		got <- err
	}()
	waitFor(t, 10*time.Second, "the receive to block", func() bool { return postgres.Sleeping(d) == 1 })
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, backend.ErrClosed) {
			t.Errorf("blocked Receive after Close: want ErrClosed, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked Receive did not end after Close")
	}
	if postgres.ListenerUp(d) {
		t.Error("LISTEN connection still up after Close")
	}
	if _, err := d.Enqueue(context.Background(), "x", []backend.Message{msg(uuidString(), "k")}); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Enqueue after Close: want ErrClosed, got %v", err)
	}
	// The caller's pool stays open.
	if err := pool.Ping(context.Background()); err != nil {
		t.Errorf("caller's pool after Close: %v", err)
	}
}

// TestNULCharacters: header values may hold U+0000 (stored as json, not
// jsonb); reasons with it are stored with U+FFFD instead; a dedup key with
// it is refused with ErrInvalid.
func TestNULCharacters(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ctx := ctxT(t, 30*time.Second)
	q := "nul-" + randHex(4)
	m := msg(uuidString(), "k")
	m.Headers = map[string]string{"v": "a\x00b"}
	if _, err := d.Enqueue(ctx, q, []backend.Message{m}); err != nil {
		t.Fatalf("Enqueue with NUL in a header value: %v", err)
	}
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Headers["v"] != "a\x00b" {
		t.Errorf("header value %q, want %q", ds[0].Headers["v"], "a\x00b")
	}
	ref := backend.Ref{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}
	if err := d.Retry(ctx, ref, 0, "bad\x00reason"); err != nil {
		t.Fatalf("Retry with NUL in the reason: %v", err)
	}
	ds, err = d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].LastError != "bad\uFFFDreason" {
		t.Errorf("last error %q", ds[0].LastError)
	}
	ref = backend.Ref{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}
	if err := d.Dead(ctx, ref, "dead\x00", 2); err != nil {
		t.Fatalf("Dead with NUL in the reason: %v", err)
	}
	k := msg(uuidString(), "k")
	k.DedupKey = "x\x00"
	if _, err := d.Enqueue(ctx, q, []backend.Message{k}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Enqueue with NUL in the dedup key: want ErrInvalid, got %v", err)
	}
}

// TestNextWaitWakesAtDueTime: a blocked receive sleeps until its queue's
// next due time however near (a 10 ms floor made delayed messages up to
// 10 ms late), sleeps the short retry interval when something is due but
// was skipped (locked by a concurrent claim), and polls otherwise.
func TestNextWaitWakesAtDueTime(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, DisableListen: true, PollInterval: time.Minute})
	us := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		us   *int64
		want time.Duration
	}{
		{"due in 2ms", us(2000), 3 * time.Millisecond},
		{"due in 5s", us(5_000_000), 5*time.Second + time.Millisecond},
		{"due already, skipped", us(-300), 10 * time.Millisecond},
		{"nothing pending", nil, time.Minute},
		{"due after the poll", us(int64(2 * time.Minute / time.Microsecond)), time.Minute},
	} {
		if got := postgres.NextWait(d, c.us); got != c.want {
			t.Errorf("%s: wait %v; want %v", c.name, got, c.want)
		}
	}
}
