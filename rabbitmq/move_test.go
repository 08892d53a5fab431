package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// TestReceiveDelayedLeasesStartOnReturn: a ReceiveDelayed whose probe of the
// delay queues outlasts the lease must not let the leases of the messages
// it already took expire (and take them again): every message comes back
// once, with a lease that starts when the call returns.
func TestReceiveDelayedLeasesStartOnReturn(t *testing.T) {
	tr := newTracker(t, testenv.RabbitMQURL(t))
	c, d := newClient(t, tr, nil)
	q := uniqueQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runAt := time.Now().Add(time.Hour)
	want := map[string]bool{}
	for i := 0; i < 3; i++ {
		id, err := c.Enqueue(ctx, q, fila.Message{Kind: "later", RunAt: runAt})
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		want[id] = true
	}
	// Max above what the known delay queue holds makes the call probe every
	// delay queue name (hundreds of round trips, several janitor ticks)
	// after taking the three; the lease is the shortest there is.
	start := time.Now()
	ds, err := d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Millisecond})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("ReceiveDelayed: %v", err)
	}
	got := map[string]int{}
	for _, dl := range ds {
		got[dl.ID]++
		if dl.Deadline.Before(start.Add(took)) {
			t.Errorf("delivery %s has its lease deadline %v before the call returned (%v after it began)", dl.ID, dl.Deadline.Sub(start), took)
		}
	}
	for id, n := range got {
		if n != 1 || !want[id] {
			t.Errorf("ReceiveDelayed returned %s %d times (enqueued: %v)", id, n, want[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("ReceiveDelayed returned %d distinct messages, want %d (the call took %v)", len(got), len(want), took)
	}
}
