package rabbitmq

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// expiryBound is how long after its lease's deadline a message may reach a
// Receive waiting on another client. The janitor ticks every 50 ms and the
// hand-over is a cancel, a marker publish and get, and a reject, about
// 10 ms on an idle machine (TestExpiredLeaseReachesOtherClient logs it);
// the bound leaves room for a loaded CI machine.
const expiryBound = 2 * time.Second

// TestExpiredLeaseReachesOtherClient: a message whose lease expired while
// its holder's client stays open and idle goes to a Receive already waiting
// on another client soon after the deadline (contract: lease-expiry), also
// when the holder's consumer has credit left (it asked for more than it
// got): the expired message must not be pushed back into the idle
// holder's buffer.
func TestExpiredLeaseReachesOtherClient(t *testing.T) {
	for _, max := range []int{1, 10} {
		t.Run(fmt.Sprintf("HolderMax%d", max), func(t *testing.T) {
			a := openTest(t)
			b := openTest(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			q := fmt.Sprintf("expiry-%d-%d", max, time.Now().UnixNano())
			t.Cleanup(func() { _ = a.QueueDelete(context.Background(), q) })
			if _, err := a.Enqueue(ctx, q, []backend.Message{testMsg(q + "-m")}); err != nil {
				t.Fatal(err)
			}
			ds, err := a.Receive(ctx, q, backend.ReceiveParams{Max: max, Lease: time.Second})
			if err != nil || len(ds) != 1 {
				t.Fatalf("A's Receive = %d deliveries, %v; want 1", len(ds), err)
			}
			deadline := ds[0].Deadline
			type result struct {
				ds  []backend.Delivery
				err error
				at  time.Time
			}
			got := make(chan result, 1)
			go func() {
				ds, err := b.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
				got <- result{ds, err, time.Now()}
			}()
			// B is blocked in Receive with a consumer before the deadline
			// (on an overloaded machine maybe after it: the lateness still
			// counts from the deadline).
			waitUntil(t, 10*time.Second, "B's Receive to wait with a consumer", func() bool {
				p := b.existingPuller(q)
				if p == nil {
					return false
				}
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.waiters > 0 && p.cs != nil && p.cs.cons != nil
			})
			var r result
			select {
			case r = <-got:
			case <-time.After(time.Until(deadline) + expiryBound):
				t.Fatalf("B got nothing within %v of the lease's deadline", expiryBound)
			}
			if r.err != nil || len(r.ds) != 1 {
				t.Fatalf("B's Receive = %d deliveries, %v; want 1", len(r.ds), r.err)
			}
			late := r.at.Sub(deadline)
			t.Logf("B received the expired message %v after the deadline (attempt %d)", late, r.ds[0].Attempt)
			if late < 0 {
				t.Errorf("B received the message %v before the lease's deadline", -late)
			}
			if r.ds[0].ID != ds[0].ID || r.ds[0].Attempt != 2 {
				t.Errorf("B got %s attempt %d; want %s attempt 2", r.ds[0].ID, r.ds[0].Attempt, ds[0].ID)
			}
			// A's receipt is no longer current.
			errs, err := a.Ack(ctx, []backend.Ref{{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}})
			if err != nil || len(errs) != 1 || errs[0] != backend.ErrLeaseLost {
				t.Errorf("A's Ack after the deadline = %v, %v; want ErrLeaseLost", errs, err)
			}
		})
	}
}

// TestSweepGivesBackDroppedDeliveries: a delivery the broker sent on a
// puller's channel that the driver never saw (amqp091 drops one that
// arrives for a consumer already cancelled, which RabbitMQ 3.10's quorum
// queues can send) is given back when the idle puller's consumer is
// cancelled, instead of staying unacknowledged until the channel closes.
// The lost delivery is made with a basic.get behind the driver's back.
func TestSweepGivesBackDroppedDeliveries(t *testing.T) {
	u, err := url.Parse(testenv.RabbitMQURL(t))
	if err != nil {
		t.Fatal(err)
	}
	qs := u.Query()
	qs.Set("fila_buffer_idle", "100ms")
	u.RawQuery = qs.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := drv.(*Driver)
	t.Cleanup(func() { _ = a.Close() })
	b := openTest(t)
	q := fmt.Sprintf("sweep-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = b.QueueDelete(context.Background(), q) })
	if _, err := a.Enqueue(ctx, q, []backend.Message{testMsg(q + "-1")}); err != nil {
		t.Fatal(err)
	}
	// A's consumer asks for 10 and gets the one there is.
	ds, err := a.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d deliveries, %v; want 1", len(ds), err)
	}
	p := a.existingPuller(q)
	p.mu.Lock()
	cs := p.cs
	p.mu.Unlock()
	// Park the consumer first so that the next message is not pushed to it.
	waitUntil(t, 10*time.Second, "A's idle consumer to be cancelled", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cs == cs && cs.cons == nil && !p.parking
	})
	if _, err := a.Enqueue(ctx, q, []backend.Message{testMsg(q + "-2")}); err != nil {
		t.Fatal(err)
	}
	var lost amqp.Delivery
	waitUntil(t, 10*time.Second, "the second message to be taken behind the driver's back", func() bool {
		var ok bool
		err := cs.call(func() error {
			var err error
			lost, ok, err = cs.ch.Get(p.n.main, false)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	// A receives again, which starts a consumer, and gives up; the idle
	// consumer is cancelled after fila_buffer_idle and the sweep finds the
	// delivery it never saw.
	rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if ds, err := a.Receive(rctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute}); len(ds) != 0 {
		t.Fatalf("Receive = %d deliveries, %v; want none", len(ds), err)
	}
	rcancel()
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	got, err := b.Receive(bctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != lost.MessageId {
		t.Fatalf("B's Receive = %v, %v; want the lost delivery %s", got, err, lost.MessageId)
	}
	p.mu.Lock()
	holes := len(cs.holes)
	p.mu.Unlock()
	if holes != 0 {
		t.Errorf("after the sweep A's channel has %d tags not received; want none", holes)
	}
}
