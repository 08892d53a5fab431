package worker_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// testWeights: two queues with backlogs share Config.Concurrency's slots by
// weight, 3 to 1, measured by the order the jobs start in, and never run
// more jobs at once than the shared slots.
func testWeights(t *testing.T, c *fila.Client) {
	heavy, light := newQueue(t, c), newQueue(t, c)
	enqueueJobs(t, c, heavy, 150)
	enqueueJobs(t, c, light, 150)
	const slots, counted = 4, 120
	cfg := fastConfig(heavy, 0)
	cfg.Lease = 30 * time.Second
	cfg.Queues = map[string]worker.QueueConfig{heavy: {Weight: 3}, light: {Weight: 1}}
	cfg.Concurrency = slots
	var (
		mu      sync.Mutex
		order   []string
		running atomic.Int32
		most    atomic.Int32
	)
	job := 50 * time.Millisecond
	if c.DriverName() == "mongo" {
		job = 250 * time.Millisecond // FerretDB's receives take tens of milliseconds
	}
	enough := make(chan struct{})
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(ctx context.Context, d *fila.Delivery) error {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock()
			order = append(order, d.Queue)
			if len(order) == counted {
				close(enough)
			}
			mu.Unlock()
			// The weights share slots, and a slot assigned to a queue waits
			// for its loop to come round from a receive: jobs long next to
			// a receive keep the share of starts near the share of slots.
			select {
			case <-time.After(job):
			case <-ctx.Done():
			}
			return nil
		})
	})
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d jobs started within 60 s", len(order))
	}
	mu.Lock()
	first := append([]string(nil), order[:counted]...)
	mu.Unlock()
	n := 0
	for _, q := range first {
		if q == heavy {
			n++
		}
	}
	t.Logf("the queue of weight 3 started %d of the first %d jobs", n, counted)
	// Weights 3 and 1: three quarters of the starts are the heavy queue's.
	if share := float64(n) / counted; share < 0.65 || share > 0.85 {
		t.Errorf("the queue of weight 3 got %d of the first %d jobs (%.2f); want about three quarters: %s",
			n, counted, share, strings.Join(abbreviate(first, heavy), ""))
	}
	if m := most.Load(); m > slots {
		t.Errorf("%d jobs ran at once over Config.Concurrency %d", m, slots)
	}
}

// abbreviate writes each start as H (queue heavy) or l.
func abbreviate(order []string, heavy string) []string {
	out := make([]string, len(order))
	for i, q := range order {
		out[i] = map[bool]string{true: "H", false: "l"}[q == heavy]
	}
	return out
}

func TestWeightsConfig(t *testing.T) {
	c := memClient(t)
	for _, tc := range []struct {
		cfg  worker.Config
		want string
	}{
		{worker.Config{Queues: map[string]worker.QueueConfig{"a": {Weight: 2}}}, "Config.Concurrency is zero"},
		{worker.Config{Concurrency: 2, Queues: map[string]worker.QueueConfig{"a": {Weight: -1}}}, "weight -1 is negative"},
		{worker.Config{Concurrency: -1, Queues: map[string]worker.QueueConfig{"a": {}}}, "concurrency -1 is negative"},
		{worker.Config{Concurrency: 1, Queues: map[string]worker.QueueConfig{"a": {}, "b": {}}}, "below the number of queues (2)"},
	} {
		if _, err := worker.New(c, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := worker.New(c, worker.Config{Concurrency: 2, Queues: map[string]worker.QueueConfig{"a": {Weight: 5}, "b": {}}}); err != nil {
		t.Errorf("New with shared slots and weights: %v", err)
	}
}
