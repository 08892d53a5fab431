package fila_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// TestAckReceivePassesSlots: under a concurrency limit of one, AckReceive
// acks the delivery holding the only slot and claims the next message in
// the same call, the slot passing from one to the other.
func TestAckReceivePassesSlots(t *testing.T) {
	ctx := context.Background()
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.QueueLimitsSet(ctx, "q", fila.QueueLimits{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Max: 5})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive under a limit of one = %d deliveries, %v; want 1", len(ds), err)
	}
	next, ackErr, err := c.AckReceive(ctx, ds, "q", fila.ReceiveParams{Max: 5})
	if err != nil || ackErr != nil {
		t.Fatalf("AckReceive: %v, %v", ackErr, err)
	}
	if len(next) != 1 || next[0].ID == ds[0].ID {
		t.Fatalf("AckReceive claimed %d deliveries; want the other message", len(next))
	}
	if u, err := c.QueueLimitsUsage(ctx, "q"); err != nil || u.Held != 1 {
		t.Errorf("slots held = %d, %v; want 1, passed from the acked delivery", u.Held, err)
	}
	if err := next[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWaitingReceiveSeesRaise: a Receive waiting for a concurrency slot,
// on a client that holds no delivery, gets one when another client raises
// the limit, within a few control intervals rather than when the taken
// slot expires (the lease and twenty seconds).
func TestWaitingReceiveSeesRaise(t *testing.T) {
	const interval = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := memory.NewBroker(memory.BrokerOptions{})
	open := func() *fila.Client {
		c, err := fila.New(b.Open(), fila.WithControlInterval(interval))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	holder, waiter := open(), open()
	if err := holder.QueueLimitsSet(ctx, "q", fila.QueueLimits{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := holder.Enqueue(ctx, "q", fila.Message{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := holder.Receive(ctx, "q", fila.ReceiveParams{Max: 1, Lease: 30 * time.Second})
	if err != nil || len(held) != 1 {
		t.Fatalf("Receive = %d deliveries, %v; want the one the limit allows", len(held), err)
	}
	got := make(chan error, 1)
	go func() {
		ds, err := waiter.Receive(ctx, "q", fila.ReceiveParams{Max: 1, Lease: 30 * time.Second})
		if err == nil && len(ds) != 1 {
			err = fmt.Errorf("%d deliveries; want 1", len(ds))
		}
		got <- err
	}()
	for fila.FlowWaiting(waiter, "q") == 0 {
		select {
		case err := <-got:
			t.Fatalf("Receive returned (%v) while the only slot was held", err)
		case <-ctx.Done():
			t.Fatal("the second client's Receive never counted as waiting for room, which keeps its limits read")
		case <-time.After(time.Millisecond):
		}
	}
	if err := holder.QueueLimitsSet(ctx, "q", fila.QueueLimits{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	raised := time.Now()
	if err := <-got; err != nil {
		t.Fatalf("waiting Receive after the raise: %v", err)
	}
	if took := time.Since(raised); took > 10*time.Second {
		t.Errorf("the waiting Receive saw the raised limit after %v (control interval %v)", took, interval)
	}
	if th := waiter.QueueThrottled("q"); th.SlotWaits != 1 || th.RateWaits != 0 || th.Wait <= 0 {
		t.Errorf("the waiting client's throttled receives: %+v; want one wait for a slot, of some time", th)
	}
	if th := holder.QueueThrottled("q"); th != (fila.Throttled{}) {
		t.Errorf("the holding client, which never waited: %+v; want none", th)
	}
}

// TestThrottledRate: a Receive the rate limit makes wait is counted, with
// the time it waited, also when its context ends first.
func TestThrottledRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One delivery an hour: the second Receive waits for the next hour.
	if err := c.QueueLimitsSet(ctx, "q", fila.QueueLimits{Rate: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Max: 2}); err != nil || len(ds) != 1 {
		t.Fatalf("first Receive = %d deliveries, %v; want the one the rate allows", len(ds), err)
	}
	if th := c.QueueThrottled("q"); th != (fila.Throttled{}) {
		t.Errorf("throttled %+v after a Receive that did not wait; want none", th)
	}
	const wait = 100 * time.Millisecond
	short, cancelShort := context.WithTimeout(ctx, wait)
	ds, err := c.Receive(short, "q", fila.ReceiveParams{Max: 1})
	cancelShort()
	if len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Receive within the hour = %d deliveries, %v; want none and its deadline", len(ds), err)
	}
	if th := c.QueueThrottled("q"); th.RateWaits != 1 || th.SlotWaits != 0 || th.Wait < wait/2 || th.Wait > 10*time.Second {
		t.Errorf("throttled %+v after a Receive that waited out its %v context; want one rate wait of about that", th, wait)
	}
	if th := c.QueueThrottled("other"); th != (fila.Throttled{}) {
		t.Errorf("a queue never received from: %+v; want none", th)
	}
}

// TestRateChunksNewestFirst: under a rate limit far above the load, whose
// chunks hold many deliveries (100,000/s, burst 10,000: 1,000 a chunk, each
// usable for 100 ms from its start), a consumer claims about one chunk per
// 1,000 deliveries or per 100 ms, whichever comes first. It claimed the
// oldest usable chunk, which had 10 ms left, so it claimed one every 10 ms:
// the round trips that made a limit far above the load cost a tenth of a
// PostgreSQL worker's throughput.
func TestRateChunksNewestFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mem := memory.NewBroker(memory.BrokerOptions{}).Open()
	var sets atomic.Int64
	c, err := fila.New(probedMarks{Driver: mem, marks: mem, setPrefix: "flow/rate/", sets: &sets})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.QueueLimitsSet(ctx, "q", fila.QueueLimits{Rate: fila.MaxRateLimit, Burst: fila.MaxRateBurst}); err != nil {
		t.Fatal(err)
	}
	const n = 5_000
	msgs := make([]fila.Message, 1000)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k"}
	}
	for range n / len(msgs) {
		if _, err := c.EnqueueBatch(ctx, "q", msgs); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for got := 0; got < n; {
		ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Max: 10})
		if err != nil {
			t.Fatalf("Receive after %d: %v", got, err)
		}
		if errs := c.AckBatch(ctx, ds); errs != nil {
			t.Fatal(errs)
		}
		got += len(ds)
	}
	elapsed := time.Since(start)
	// A chunk a 1,000 deliveries, one more each time the current one is
	// no longer usable (at most every 100 ms, say every 50 ms), and two
	// for a chunk found taken or cut short at the start.
	bound := n/1000 + 2 + int64(elapsed/(50*time.Millisecond))
	if got := sets.Load(); got > bound {
		t.Errorf("%d rate chunks claimed for %d deliveries in %v; want at most %d (one per 1,000 deliveries or per 50-100 ms)",
			got, n, elapsed, bound)
	} else {
		t.Logf("%d rate chunks claimed for %d deliveries in %v (bound %d)", got, n, elapsed, bound)
	}
}
