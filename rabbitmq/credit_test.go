package rabbitmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// creditQueue returns a fresh queue holding n ready messages, deleted at
// the end of the test.
func creditQueue(t *testing.T, ctx context.Context, d *Driver, n int) string {
	t.Helper()
	q := fmt.Sprintf("credit-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.QueueDelete(ctx, q)
	})
	msgs := make([]backend.Message, n)
	for i := range msgs {
		msgs[i] = testMsg(fmt.Sprintf("m%d", i))
	}
	if _, err := d.Enqueue(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	return q
}

// consumerTag returns the tag of q's active consumer, "" when none.
func consumerTag(d *Driver, q string) string {
	p := d.existingPuller(q)
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs == nil || p.cs.cons == nil {
		return ""
	}
	return p.cs.cons.tag
}

// waitWaiters waits until q's puller has n Receive calls waiting.
func waitWaiters(t *testing.T, d *Driver, q string, n int) {
	t.Helper()
	p := d.existingPuller(q)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		w := p.waiters
		p.mu.Unlock()
		if w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Receive calls waiting, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type received struct {
	ds  []backend.Delivery
	err error
}

func receiveAsync(ctx context.Context, d *Driver, q string) <-chan received {
	ch := make(chan received, 1)
	go func() {
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		ch <- received{ds, err}
	}()
	return ch
}

func ref(q string, dv backend.Delivery) backend.Ref {
	return backend.Ref{Queue: q, ID: dv.ID, Receipt: dv.Receipt}
}

// TestSettlementGivesCreditBack: a Receive that finds its consumer's credit
// used up by a lease (a worker's loop asks for more just before it acks)
// gets the next message from the same consumer once the lease is acked: the
// consumer is not replaced.
func TestSettlementGivesCreditBack(t *testing.T) {
	d := openTest(t)
	d.creditGrace = time.Minute // the ack below comes well within it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := creditQueue(t, ctx, d, 3)
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %v, %d deliveries", err, len(ds))
	}
	tag := consumerTag(d, q)
	if tag == "" {
		t.Fatal("no consumer after a Receive")
	}
	for range 2 {
		next := receiveAsync(ctx, d, q)
		waitWaiters(t, d, q, 1)
		if errs, err := d.Ack(ctx, []backend.Ref{ref(q, ds[0])}); err != nil || errs[0] != nil {
			t.Fatalf("Ack: %v %v", err, errs)
		}
		r := <-next
		if r.err != nil || len(r.ds) != 1 {
			t.Fatalf("Receive after the ack: %v, %d deliveries", r.err, len(r.ds))
		}
		if got := consumerTag(d, q); got != tag {
			t.Fatalf("the consumer was replaced (%s, was %s): the ack's credit was not waited for", got, tag)
		}
		ds = r.ds
	}
}

// TestHeldLeaseStillGetsMore: a caller that holds its lease and receives
// again gets the next message after at most creditGrace, from a new
// consumer; after graceMissesMax such waits in vain in a row, Receive
// replaces the consumer without waiting.
func TestHeldLeaseStillGetsMore(t *testing.T) {
	d := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = graceMissesMax + 2
	q := creditQueue(t, ctx, d, n)
	var held []backend.Delivery
	tags := map[string]bool{}
	p := d.existingPuller(q) // nil before the first Receive
	for i := range n {
		var missedAt time.Time
		var missesBefore int
		if p != nil {
			p.mu.Lock()
			missedAt, missesBefore = p.graceMissed, p.graceMisses
			p.mu.Unlock()
		}
		start := time.Now()
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive %d: %v, %d deliveries", i, err, len(ds))
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Receive %d while holding %d leases took %v", i, len(held), took)
		}
		held = append(held, ds...)
		tags[consumerTag(d, q)] = true
		p = d.existingPuller(q)
		p.mu.Lock()
		misses := p.graceMisses
		p.mu.Unlock()
		switch {
		case i <= graceMissesMax: // the first Receive has no consumer to wait on
			if misses != i {
				t.Errorf("after Receive %d: %d waits in vain in a row, want %d", i, misses, i)
			}
		case start.Sub(missedAt) < graceHold: // held: no wait
			if misses != missesBefore {
				t.Errorf("Receive %d waited for credit %v after %d waits in vain", i, start.Sub(missedAt), missesBefore)
			}
		}
	}
	if len(tags) != n {
		t.Errorf("%d consumers for %d Receive calls holding their leases, want one each", len(tags), n)
	}
	refs := make([]backend.Ref, len(held))
	for i, dv := range held {
		refs[i] = ref(q, dv)
	}
	if errs, err := d.Ack(ctx, refs); err != nil {
		t.Fatalf("Ack: %v", err)
	} else {
		for i, e := range errs {
			if e != nil {
				t.Errorf("Ack of %s: %v", held[i].ID, e)
			}
		}
	}
}
