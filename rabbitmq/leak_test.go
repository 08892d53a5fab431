package rabbitmq_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// TestCloseLeavesNoGoroutines: after a client that enqueued, received,
// retried, dead-lettered and held leases closes, the driver's goroutines are
// gone.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	tr := newTracker(t, testenv.RabbitMQURL(t))
	before := runtime.NumGoroutine()
	c, _ := newClient(t, tr, nil)
	q := uniqueQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Delay: time.Duration(i) * 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	var got []*fila.Delivery
	for len(got) < 5 {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 5, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ds...)
	}
	if err := got[0].Retry(ctx, 50*time.Millisecond, "again"); err != nil {
		t.Fatal(err)
	}
	if err := got[1].Dead(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	if err := got[2].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.QueueStats(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
