package rabbitmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// crashSetup enqueues one message into a fresh queue, receives it on a
// driver of its own (the one that "crashes") and returns both.
func crashSetup(t *testing.T, ctx context.Context) (a *Driver, q string, dl backend.Delivery) {
	t.Helper()
	a = openTest(t)
	q = fmt.Sprintf("crash-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		d := openTest(t)
		_ = d.QueueDelete(context.Background(), q)
	})
	if _, err := a.Enqueue(ctx, q, []backend.Message{testMsg(q + "-m")}); err != nil {
		t.Fatal(err)
	}
	ds, err := a.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d deliveries, %v; want 1", len(ds), err)
	}
	return a, q, ds[0]
}

// drain receives from q on b until count reports the main queue empty and
// returns the deliveries, each acked; the caller's client is gone, so
// nothing is leased elsewhere.
func drain(t *testing.T, ctx context.Context, b *Driver, q string) []backend.Delivery {
	t.Helper()
	n, err := b.names(q)
	if err != nil {
		t.Fatal(err)
	}
	var out []backend.Delivery
	for {
		c, err := b.currentSession(t).count(ctx, n.main)
		if err != nil {
			t.Fatal(err)
		}
		if c == 0 {
			return out
		}
		ds, err := b.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive after the crash: %v", err)
		}
		for _, dl := range ds {
			errs, err := b.Ack(ctx, []backend.Ref{{Queue: q, ID: dl.ID, Receipt: dl.Receipt}})
			if err != nil || errs[0] != nil {
				t.Fatalf("Ack of %s: %v %v", dl.ID, errs, err)
			}
		}
		out = append(out, ds...)
	}
}

// TestReleaseSurvivesCrash: Retry without delay nor reason (Release, and
// the portable layer's give-backs) publishes no copy: a client that dies
// right after it leaves the message in the queue exactly once, at the next
// attempt. It used to publish a copy and then ack the original, and a
// crash in between left the message twice.
func TestReleaseSurvivesCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, q, dl := crashSetup(t, ctx)
	s := a.currentSession(t)
	published := s.pub.seq.Load()
	// A crash at the worst moment: after a copy, before the ack (the way
	// Retry used to work); the fixed Retry has no such moment.
	a.afterRepublish = func() { _ = s.conn.Close() }
	if err := a.Retry(ctx, backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt}, 0, ""); err != nil {
		t.Fatal(err)
	}
	if n := s.pub.seq.Load() - published; n != 0 {
		t.Errorf("Retry(0, \"\") published %d messages; want none", n)
	}
	_ = s.conn.Close() // the client dies: whatever it still held goes back
	b := openTest(t)
	got := drain(t, ctx, b, q)
	if len(got) != 1 || got[0].ID != dl.ID || got[0].Attempt != 2 {
		t.Fatalf("after the crash the queue held %d deliveries (%+v); want %s once, at attempt 2", len(got), got, dl.ID)
	}
}

// TestRetryCrashWindow: Retry with a reason (and Dead) publishes a copy and
// then acks the original. A client that dies between the two leaves the
// message twice, both at the next attempt: the bound doc.go states. The
// window holds no round trip (nothing runs between the confirm and the
// ack's write but bookkeeping); the test opens it with a hook.
func TestRetryCrashWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, q, dl := crashSetup(t, ctx)
	s := a.currentSession(t)
	hooked := 0
	a.afterRepublish = func() {
		hooked++
		_ = s.conn.Close()
	}
	err := a.Retry(ctx, backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt}, 0, "boom")
	if hooked != 1 {
		t.Fatalf("the hook between publish and ack ran %d times", hooked)
	}
	t.Logf("Retry with the connection closed before its ack: %v", err)
	b := openTest(t)
	got := drain(t, ctx, b, q)
	if len(got) != 2 {
		t.Fatalf("after a crash between copy and ack the queue held %d deliveries (%+v); doc.go says 2", len(got), got)
	}
	reasons := map[string]bool{}
	for _, g := range got {
		if g.ID != dl.ID || g.Attempt != 2 {
			t.Errorf("delivery %s at attempt %d; want %s at attempt 2", g.ID, g.Attempt, dl.ID)
		}
		reasons[g.LastError] = true
	}
	if !reasons["boom"] || !reasons[""] {
		t.Errorf("last errors %v; want the copy's \"boom\" and the original's none", reasons)
	}
}
