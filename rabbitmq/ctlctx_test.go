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

// TestUnansweredControlCallEndsWithContext: a control call the broker does
// not answer (the test's proxy holds every reply for a minute) returns when
// its context ends, and so does one waiting for its turn on the same
// channel meanwhile. amqp091's synchronous methods take no context; a
// wedged three-node cluster once left every queue.declare unanswered, and a
// whole conformance suite waited on them for ten minutes.
func TestUnansweredControlCallEndsWithContext(t *testing.T) {
	t.Parallel()
	raw := testenv.RabbitMQURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	u.Host = proxy.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*Driver)
	defer func() {
		proxy.Break() // the stalled connection ends: the calls left running on it return
		_ = d.Close()
	}()
	queue := fmt.Sprintf("ctlctx-%d", time.Now().UnixNano())
	t.Cleanup(func() { // on a connection of its own: the proxied one is stalled
		u, _ := url.Parse(raw)
		other, err := Open(context.Background(), u, backend.OpenOptions{})
		if err != nil {
			t.Errorf("open a driver to delete the queue: %v", err)
			return
		}
		defer other.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = other.(*Driver).QueueDelete(ctx, queue)
	})
	// A first probe declares the queue's topology and opens the probe
	// channel, so that the stalled calls below wait only for their reply.
	if _, err := d.MarkGet(ctx, queue, "warm-up"); err != nil {
		t.Fatalf("MarkGet before the stall: %v", err)
	}

	proxy.StallNext(time.Minute)
	const wait = 500 * time.Millisecond
	type result struct {
		err  error
		took time.Duration
	}
	res := make(chan result, 2)
	for i := range 2 { // one sends its probe, the other waits for its turn
		go func() {
			cctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			start := time.Now()
			_, err := d.MarkGet(cctx, queue, fmt.Sprint("probe-", i))
			res <- result{err, time.Since(start)}
		}()
	}
	for range 2 {
		select {
		case r := <-res:
			if !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("MarkGet with no reply = %v after %v; want its context's deadline", r.err, r.took)
			}
		case <-time.After(20 * time.Second): // far past the 500 ms deadline, far before the stall's minute
			t.Fatal("MarkGet with no reply did not return 20 s after its context ended")
		}
	}
}
