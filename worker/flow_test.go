package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// testQueueLimit: four workers of twenty slots each, on four clients as
// four processes would be, never run more of a queue's jobs at once than
// its concurrency limit, measured by the handlers themselves, and run
// them all.
func testQueueLimit(t *testing.T, open func(t *testing.T) *fila.Client) {
	const (
		workers = 4
		slots   = 20
		limit   = 5
	)
	admin := open(t)
	// 2,000 jobs on memory; fewer on the servers, where the suite runs on
	// eight harnesses and CI has a time budget.
	jobs := 1000
	switch admin.DriverName() {
	case "memory":
		jobs = 2000
	case "mongo":
		jobs = 200 // FerretDB, standing in for MongoDB, writes a mark in tens of milliseconds
	}
	q := newQueue(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := admin.QueueLimitsSet(ctx, q, fila.QueueLimits{Concurrency: limit}); errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the driver cannot keep queue limits: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	enqueueJobs(t, admin, q, jobs)
	var (
		inFlight, peak atomic.Int64
		mu             sync.Mutex
		done           = map[string]bool{}
	)
	var runs []*running
	for range workers {
		cfg := worker.Config{Queues: map[string]worker.QueueConfig{q: {Concurrency: slots}}}
		runs = append(runs, start(t, open(t), cfg, func(w *worker.Worker) {
			w.HandleFunc("job", func(_ context.Context, d *fila.Delivery) error {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(2 * time.Millisecond) // the job's work
				mu.Lock()
				done[d.ID] = true
				mu.Unlock()
				return nil
			})
		}))
	}
	began := time.Now()
	for {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n == jobs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d jobs ran within the test's deadline", n, jobs)
		}
		time.Sleep(10 * time.Millisecond) // polling the count
	}
	t.Logf("%d jobs in %v", jobs, time.Since(began))
	for _, r := range runs {
		r.cancel()
	}
	for _, r := range runs {
		if err := r.wait(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	if p := peak.Load(); p > limit {
		t.Errorf("%d jobs ran at once under a concurrency limit of %d", p, limit)
	} else if p < 2 {
		t.Errorf("at most %d job ran at once with %d slots and a limit of %d", p, workers*slots, limit)
	}
}
