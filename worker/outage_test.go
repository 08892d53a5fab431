package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// downDriver fails every Receive with ErrUnavailable while down is set,
// like a broker that cannot be reached.
type downDriver struct {
	backend.Driver
	down     atomic.Bool
	failures atomic.Int32
}

func (d *downDriver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if d.down.Load() {
		d.failures.Add(1)
		return nil, fmt.Errorf("%w: injected outage", backend.ErrUnavailable)
	}
	return d.Driver.Receive(ctx, queue, p)
}

// TestReceiveOutageLogsBoundedLines: a worker whose receives fail for a
// while logs one Warn when they start failing and one Info when they work
// again, the retries in between at Debug, and then runs the job.
func TestReceiveOutageLogsBoundedLines(t *testing.T) {
	t.Parallel()
	drv := &downDriver{Driver: memory.NewBroker(memory.BrokerOptions{}).Open()}
	drv.down.Store(true)
	c := clientOver(t, drv)
	q := queueName(t) // an in-memory broker of its own: nothing to delete
	rec := testenv.NewLogRecorder()
	cfg := fastConfig(q, 1)
	cfg.Logger = rec.Logger()
	done := make(chan struct{})
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(context.Context, *fila.Delivery) error {
			close(done)
			return nil
		})
	})
	deadline := time.Now().Add(30 * time.Second)
	for drv.failures.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d receive failures in 30s", drv.failures.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	drv.down.Store(false)
	enqueue(t, c, q, fila.Message{Kind: "job"})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not run after the outage")
	}
	var warn, info, debug int
	for _, r := range rec.Records() {
		if !strings.Contains(r.Message, "receiv") {
			continue
		}
		switch {
		case r.Level >= slog.LevelWarn:
			warn++
		case r.Level >= slog.LevelInfo:
			info++
		default:
			debug++
		}
	}
	if warn != 1 || info != 1 || debug < 4 {
		t.Errorf("receive lines: %d Warn, %d Info, %d Debug for %d failures; want 1 Warn, 1 Info and the rest at Debug:\n%s",
			warn, info, debug, drv.failures.Load(), rec)
	}
}
