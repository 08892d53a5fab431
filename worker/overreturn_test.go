package worker_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// overDriver claims two more messages than it is asked for, as the
// PostgreSQL log mode once did after a late commit, in its first
// overReturns receives. The extra deliveries are given back, and each
// counts as an attempt (contract: attempts count every delivery): a driver
// that over-returned at every receive could, as scheduling falls, give one
// message back until its attempts ran out, and it was dead-lettered
// instead of run. Four receives give back at most eight deliveries, under
// the default 10 attempts.
type overDriver struct {
	backend.Driver
	left *atomic.Int32
}

const overReturns = 4

func (d overDriver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if d.left.Add(-1) >= 0 {
		p.Max += 2
	}
	return d.Driver.Receive(ctx, queue, p)
}

// TestDriverOverReturning: a worker over a driver that returns more
// deliveries than asked runs every job and stops when its context ends.
// Its receive loop asks for as many messages as it has free slots and
// counts on getting no more; with the driver's extra deliveries it once
// blocked on its full slots forever, running no job and ignoring its
// context (issue 38).
func TestDriverOverReturning(t *testing.T) {
	left := new(atomic.Int32)
	left.Store(overReturns)
	c := clientOver(t, overDriver{memory.NewBroker(memory.BrokerOptions{}).Open(), left})
	q := newQueue(t, c)
	const n = 60
	enqueueJobs(t, c, q, n)
	var rec recorder
	cfg := fastConfig(q, 3)
	rec.hook(&cfg)
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(ctx context.Context, d *fila.Delivery) error { return nil })
	})
	seen := map[string]bool{}
	for _, ev := range rec.waitEnds(t, n) {
		if ev.Outcome != worker.OutcomeAck {
			t.Errorf("end of %s = %+v; want acked", ev.ID, ev)
		}
		seen[ev.ID] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct jobs ended, want %d", len(seen), n)
	}
	if err := r.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}
