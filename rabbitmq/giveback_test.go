package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// TestGiveBackPublishesNothing: messages pushed to a client that stopped
// receiving are given back without copies (a copy published before the
// original is acked leaves both when the process dies in between): the
// driver publishes nothing during the give-back, and afterwards the queue
// holds each message once.
func TestGiveBackPublishesNothing(t *testing.T) {
	f := newBufferFixture(t, "50ms", "giveback")
	d, ctx, queue, enq := f.d, f.ctx, f.queue, f.enq
	// Receive asks for 5 and gets the 2 there are: its consumer keeps 3
	// credits while nobody receives.
	enq(2)
	f.receiveTwoAskingFive()
	later := enq(3) // pushed into the buffer of the client that stopped receiving
	p := d.existingPuller(queue)
	published := d.currentSession(t).pub.seq.Load()
	// The buffer fills the consumer's credit; after fila_buffer_idle the
	// puller cancels the consumer and gives the three back.
	waitUntil(t, 10*time.Second, "the buffered messages to be given back", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cs != nil && p.cs.cons == nil && len(p.cs.buf) == 0 && len(p.cs.entries) == 2
	})
	if n := d.currentSession(t).pub.seq.Load() - published; n != 0 {
		t.Errorf("the give-back published %d messages; want none (copies are not crash-safe)", n)
	}
	// Each given-back message comes back once, and nothing else.
	got := map[string]int{}
	for len(got) < len(later) {
		ds, err := d.Receive(ctx, queue, backend.ReceiveParams{Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive after the give-back: %d of %d: %v", len(got), len(later), err)
		}
		for _, dl := range ds {
			got[dl.ID]++
			// RabbitMQ before 4.3 counts the nack of a give-back as a
			// delivery; the driver takes it off, as nobody received it.
			if dl.Attempt != 1 {
				t.Errorf("given-back message %s has attempt %d; want 1", dl.ID, dl.Attempt)
			}
		}
	}
	for _, id := range later {
		if got[id] != 1 {
			t.Errorf("message %s came back %d times, want once", id, got[id])
		}
	}
	if len(got) != len(later) {
		t.Errorf("after the give-back, %d distinct messages came back; want %d", len(got), len(later))
	}
}

// TestLostBufferKeepsAttempts: messages the broker pushed into a client's
// buffer go back to the queue when the connection dies, and a quorum queue
// counts that in x-delivery-count; nobody received them, so when they come
// back to the same client they show attempt 1. The ones that were handed
// out show attempt 2: they were delivered.
func TestLostBufferKeepsAttempts(t *testing.T) {
	f := newBufferFixture(t, "1m", "lostbuf") // no give-back: the buffer stays until the connection dies
	d, ctx, queue, enq := f.d, f.ctx, f.queue, f.enq
	handed := map[string]bool{}
	for _, id := range enq(2) {
		handed[id] = true
	}
	f.receiveTwoAskingFive()
	buffered := enq(3) // pushed into the buffer: the consumer has 3 credits left
	p := d.existingPuller(queue)
	waitUntil(t, 10*time.Second, "three messages in the buffer", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cs != nil && len(p.cs.buf) == 3
	})
	p.mu.Lock()
	old := p.cs
	p.mu.Unlock()
	_ = d.currentSession(t).conn.Close() // the connection dies: the broker requeues all five
	// Until the puller hears of it, a Receive would still hand out the dead
	// channel's buffer.
	waitUntil(t, 10*time.Second, "the puller to drop the dead channel", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cs != old
	})

	want := map[string]int{}
	for _, id := range buffered {
		want[id] = 1
	}
	for id := range handed {
		want[id] = 2
	}
	got := map[string]int{}
	for len(got) < len(want) {
		ds, err := d.Receive(ctx, queue, backend.ReceiveParams{Max: 10, Lease: time.Minute})
		if errors.Is(err, backend.ErrUnavailable) && ctx.Err() == nil {
			continue // reconnecting
		}
		if err != nil {
			t.Fatalf("Receive after the connection died: %d of %d: %v", len(got), len(want), err)
		}
		for _, dl := range ds {
			if _, dup := got[dl.ID]; dup {
				t.Errorf("message %s came back twice", dl.ID)
			}
			got[dl.ID] = dl.Attempt
		}
	}
	for id, a := range want {
		if got[id] != a {
			t.Errorf("message %s (handed out: %v) has attempt %d after the connection died; want %d", id, handed[id], got[id], a)
		}
	}
}

// bufferFixture is a driver opened with a given fila_buffer_idle and a
// fresh queue, both gone when the test ends.
type bufferFixture struct {
	t     *testing.T
	ctx   context.Context
	d     *Driver
	queue string
}

func newBufferFixture(t *testing.T, bufferIdle, prefix string) *bufferFixture {
	t.Helper()
	u, err := url.Parse(testenv.RabbitMQURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("fila_buffer_idle", bufferIdle)
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	drv, err := Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &bufferFixture{t: t, ctx: ctx, d: drv.(*Driver), queue: fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())}
	t.Cleanup(func() { _ = f.d.Close() })
	t.Cleanup(func() { _ = f.d.QueueDelete(context.Background(), f.queue) })
	return f
}

// enq enqueues n messages and returns their ids.
func (f *bufferFixture) enq(n int) []string {
	f.t.Helper()
	var ids []string
	var msgs []backend.Message
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d-%d", f.queue, i, time.Now().UnixNano())
		ids = append(ids, id)
		msgs = append(msgs, testMsg(id))
	}
	if _, err := f.d.Enqueue(f.ctx, f.queue, msgs); err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// receiveTwoAskingFive receives the queue's two messages with Receive calls
// asking for five, so that the consumer keeps three credits for messages
// enqueued next: they go to its buffer. (The broker may push the second
// after the first Receive returned, as a loaded machine showed; the next
// Receive takes it.)
func (f *bufferFixture) receiveTwoAskingFive() []backend.Delivery {
	f.t.Helper()
	var first []backend.Delivery
	for len(first) < 2 {
		ds, err := f.d.Receive(f.ctx, f.queue, backend.ReceiveParams{Max: 5 - len(first), Lease: time.Minute})
		if err != nil {
			f.t.Fatalf("Receive after %d of 2 deliveries: %v", len(first), err)
		}
		first = append(first, ds...)
	}
	if len(first) != 2 {
		f.t.Fatalf("Receive = %d deliveries; want 2", len(first))
	}
	return first
}

// currentSession returns the driver's live connection.
func (d *Driver) currentSession(t *testing.T) *session {
	t.Helper()
	s, err := d.session(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
