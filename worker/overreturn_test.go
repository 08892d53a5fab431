package worker_test

import (
	"context"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// overDriver claims two more messages than it is asked for, as the
// PostgreSQL log mode once did after a late commit.
type overDriver struct{ backend.Driver }

func (d overDriver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	p.Max += 2
	return d.Driver.Receive(ctx, queue, p)
}

// TestDriverOverReturning: a worker over a driver that returns more
// deliveries than asked runs every job and stops when its context ends.
// Its receive loop asks for as many messages as it has free slots and
// counts on getting no more; with the driver's extra deliveries it once
// blocked on its full slots forever, running no job and ignoring its
// context (issue 38).
func TestDriverOverReturning(t *testing.T) {
	c := clientOver(t, overDriver{memory.NewBroker(memory.BrokerOptions{}).Open()})
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
