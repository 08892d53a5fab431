package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// With a FakeClock, leases and delays are tested without sleeping.
func TestFakeClockDrivesLeasesAndDelays(t *testing.T) {
	clk := memory.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.NewBroker(memory.BrokerOptions{Clock: clk})
	c, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []*fila.Delivery, 1)
	go func() {
		ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Lease: time.Minute})
		if err != nil {
			t.Error(err)
		}
		got <- ds
	}()
	waitFor(t, func() bool { return clk.Waiters() > 0 }) // the receiver is blocked on the delay
	clk.Advance(59 * time.Minute)
	select {
	case <-got:
		t.Fatal("received a message before its run-at")
	default:
	}
	clk.Advance(time.Minute)
	ds := <-got
	if len(ds) != 1 || ds[0].Attempt != 1 {
		t.Fatalf("after the delay: %d deliveries", len(ds))
	}
	if want := clk.Now().Add(time.Minute); !ds[0].Deadline().Equal(want) {
		t.Errorf("deadline %v, want %v", ds[0].Deadline(), want)
	}

	// The lease expires when the clock passes the deadline.
	clk.Advance(time.Minute)
	again, err := c.Receive(ctx, "q", fila.ReceiveParams{Lease: time.Minute})
	if err != nil || len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("after the lease: %v %v", again, err)
	}
	if err := ds[0].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("stale Ack = %v, want ErrLeaseLost", err)
	}
	if err := again[0].Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNamedBrokersAreShared(t *testing.T) {
	ctx := context.Background()
	a, err := fila.Open(ctx, "mem://shared-test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := fila.Open(ctx, "mem://shared-test")
	defer b.Close()
	other, _ := fila.Open(ctx, "mem://other-test")
	defer other.Close()

	id, _ := a.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := other.Receive(short, "q", fila.ReceiveParams{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("another named broker saw the message: %v", err)
	}
	ds, err := b.Receive(ctx, "q", fila.ReceiveParams{})
	if err != nil || ds[0].ID != id {
		t.Fatalf("same named broker: %v %v", ds, err)
	}
}
