package mongo

import (
	"context"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// TestCarriedAttempts: a message enqueued with Attempts (moved from another
// broker) is next delivered with attempt Attempts+1.
func TestCarriedAttempts(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("carried")
	enqueueOne(t, drv, q, backend.Message{Attempts: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := drv.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].Attempt != 4 {
		t.Fatalf("Receive = %+v, %v; want one delivery with attempt 4", ds, err)
	}
}

// TestReceiveDelayedNeverTwice: a ReceiveDelayed whose claims outlast the
// lease does not claim a message it took already again (its first lease
// expired meanwhile), and returns no delivery whose lease has ended.
func TestReceiveDelayedNeverTwice(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("twice")
	for i := 0; i < 3; i++ {
		enqueueOne(t, drv, q, backend.Message{RunAt: time.Now().Add(time.Hour)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The shortest lease ends before the next claim of the call.
	ds, err := drv.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Millisecond})
	returned := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.ID] {
			t.Errorf("ReceiveDelayed returned %s twice", d.ID)
		}
		seen[d.ID] = true
		if !d.Deadline.After(returned) {
			t.Errorf("ReceiveDelayed returned %s with a lease that ended %v before it returned", d.ID, returned.Sub(d.Deadline))
		}
	}
	// With a long lease every message comes, once.
	ds, err = drv.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 3 {
		t.Fatalf("ReceiveDelayed with a long lease = %d deliveries, %v; want 3", len(ds), err)
	}
}

// TestReceiveDelayed: delayed messages are taken early with their run-at,
// and one whose lease expires (even after an Extend to before the run-at)
// is not ready before its run-at.
func TestReceiveDelayed(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("delayed")
	// Wall-clock time, as the driver's due times are: with Go's monotonic
	// reading kept, the check below compared the two clocks, and failed
	// once in CI by 6.6 ms when the VM's wall clock ran ahead of its
	// monotonic one.
	runAt := time.Now().Add(3 * time.Second).Round(0)
	enqueueOne(t, drv, q, backend.Message{RunAt: runAt})
	enqueueOne(t, drv, q, backend.Message{}) // ready: not for ReceiveDelayed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := drv.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("ReceiveDelayed = %d deliveries, %v; want 1", len(ds), err)
	}
	if d := ds[0].RunAt.Sub(runAt); d < -time.Millisecond || d > time.Millisecond || ds[0].Attempt != 1 {
		t.Errorf("delivery run-at %v attempt %d, want %v attempt 1", ds[0].RunAt, ds[0].Attempt, runAt)
	}
	// An Extend to before the run-at does not make it claimable early.
	ref := backend.Ref{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}
	dl, err := drv.Extend(ctx, ref, time.Second)
	if err != nil || time.Until(dl) > 2*time.Second {
		t.Errorf("Extend = %v, %v; want a deadline about 1s away", dl, err)
	}
	asked := time.Now()
	again, err := drv.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(again) != 0 && asked.Before(dl) {
		t.Errorf("second ReceiveDelayed = %d deliveries, %v; want none (it is leased)", len(again), err)
	}
	if len(again) != 0 {
		t.Skipf("the machine took %v to ask again, past the extended lease; nothing more to check", asked.Sub(dl))
	}
	// The ready one comes first; the leased-early one not before its run-at.
	got, err := drv.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID == ds[0].ID {
		t.Fatalf("Receive = %+v, %v; want the ready message only", got, err)
	}
	got, err = drv.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != ds[0].ID {
		t.Fatalf("Receive = %+v, %v; want the delayed message", got, err)
	}
	if early := time.Until(runAt); early > 0 {
		t.Errorf("message taken early came back %v before its run-at", early)
	}
	if got[0].Attempt != 2 {
		t.Errorf("attempt %d, want 2", got[0].Attempt)
	}
}

// TestDeadImport: imported dead letters are listed with their reasons and
// attempts; importing them again changes nothing.
func TestDeadImport(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("import")
	deadAt := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	letters := []backend.DeadLetter{
		{Message: backend.Message{ID: "a", Kind: "k1", Body: []byte("x")}, Attempts: 5, Reason: "r1", DeadAt: deadAt},
		{Message: backend.Message{ID: "b", Kind: "k2"}, Attempts: 2, Reason: "r2", DeadAt: deadAt.Add(time.Second)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		if err := drv.DeadImport(ctx, q, letters); err != nil {
			t.Fatalf("DeadImport #%d: %v", i+1, err)
		}
	}
	page, err := drv.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil || len(page.Letters) != 2 {
		t.Fatalf("DeadList = %d letters, %v; want 2", len(page.Letters), err)
	}
	for i, l := range page.Letters {
		w := letters[i]
		if l.ID != w.ID || l.Reason != w.Reason || l.Attempts != w.Attempts || l.Queue != q || !l.DeadAt.Equal(w.DeadAt) {
			t.Errorf("letter %d = %+v, want %+v", i, l, w)
		}
	}
}
