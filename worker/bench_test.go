package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// BenchmarkWorker measures the worker's overhead: the time to run and ack
// b.N no-op jobs fed by a producer, against a raw-client baseline (the same
// number of goroutines, each receiving one message and acking it, fed by the
// same producer) in the same run. Compare worker/cN with raw/cN, and
// idle-limits/cN (limits far above the load) with worker/cN; real drivers run when their
// FILA_TEST_* variables are set.
func BenchmarkWorker(b *testing.B) {
	drivers := []struct {
		name string
		open func(b *testing.B) *fila.Client
	}{
		{"memory", func(b *testing.B) *fila.Client {
			c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return c
		}},
		{"postgres", benchOpener(testenv.PostgresEnv, map[string]string{"fila_migrate": "true"})},
		{"redis", benchOpener(testenv.RedisEnv, nil)},
		{"rabbitmq", benchOpener(testenv.RabbitMQEnv, nil)},
		{"mongo", benchOpener(testenv.MongoEnv, nil)},
	}
	for _, drv := range drivers {
		for _, conc := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/raw/c%d", drv.name, conc), func(b *testing.B) {
				c := drv.open(b)
				b.ResetTimer()
				rawLoop(b, c, "bench-"+randomSuffix(), conc)
			})
			b.Run(fmt.Sprintf("%s/worker/c%d", drv.name, conc), func(b *testing.B) {
				c := drv.open(b)
				b.ResetTimer()
				workerLoop(b, c, "bench-"+randomSuffix(), conc)
			})
			// The cost of limits far above the load (fila.QueueLimits):
			// compare with worker/cN.
			b.Run(fmt.Sprintf("%s/idle-limits/c%d", drv.name, conc), func(b *testing.B) {
				c := drv.open(b)
				q := "bench-" + randomSuffix()
				err := c.QueueLimitsSet(context.Background(), q, fila.QueueLimits{Concurrency: fila.MaxConcurrencyLimit, Rate: fila.MaxRateLimit, Burst: fila.MaxRateBurst})
				if errors.Is(err, fila.ErrUnsupported) {
					b.Skipf("no limits on %s: %v", drv.name, err)
				} else if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				workerLoop(b, c, q, conc)
			})
		}
	}
}

func benchOpener(env string, params map[string]string) func(b *testing.B) *fila.Client {
	return func(b *testing.B) *fila.Client {
		raw := os.Getenv(env)
		if raw == "" {
			b.Skipf("%s is not set", env)
		}
		c, err := openURL(raw, params)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
}

// backlog bounds the messages waiting in a benchmark queue, so the
// drivers' per-claim cost (the memory driver scans its queue) does not grow
// with b.N.
const backlog = 200

// feeder enqueues b.N no-op jobs into q, 100 at a time, keeping at most
// backlog of them unacked. Consumers call done once per acked job.
type feeder struct {
	tokens chan struct{}
	errc   chan error
}

func startFeeder(b *testing.B, c *fila.Client, q string) *feeder {
	f := &feeder{tokens: make(chan struct{}, backlog), errc: make(chan error, 1)}
	go func() {
		ctx := context.Background()
		for left := b.N; left > 0; {
			n := min(left, 100)
			msgs := make([]fila.Message, n)
			for i := range msgs {
				f.tokens <- struct{}{}
				msgs[i] = fila.Message{Kind: "noop"}
			}
			if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
				f.errc <- err
				return
			}
			left -= n
		}
		f.errc <- nil
	}()
	return f
}

func (f *feeder) done() { <-f.tokens }

func (f *feeder) wait(b *testing.B) {
	if err := <-f.errc; err != nil {
		b.Fatal(err)
	}
}

func rawLoop(b *testing.B, c *fila.Client, q string, conc int) {
	f := startFeeder(b, c, q)
	var left, lost atomic.Int64
	left.Store(int64(b.N))
	ctx := context.Background()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1})
				if err != nil {
					b.Error(err)
					return
				}
				for _, d := range ds {
					// A server without atomic claims (FerretDB) may hand one
					// message to two competing consumers: count, not fail.
					if err := d.Ack(ctx); errors.Is(err, fila.ErrLeaseLost) {
						lost.Add(1)
					} else if err != nil {
						b.Error(err)
					}
					f.done()
				}
			}
		}()
	}
	wg.Wait()
	f.wait(b)
	if n := lost.Load(); n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "lost/op")
	}
}

func workerLoop(b *testing.B, c *fila.Client, q string, conc int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := startFeeder(b, c, q)
	var acked, lost atomic.Int64
	w, err := worker.New(c, worker.Config{
		Queues: map[string]worker.QueueConfig{q: {Concurrency: conc}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnJobEnd: func(ev worker.JobEvent) {
			if ev.Outcome == worker.OutcomeLeaseLost {
				lost.Add(1)
			} else if ev.Outcome != worker.OutcomeAck {
				b.Errorf("outcome %s: %v", ev.Outcome, ev.Err)
			}
			f.done()
			if acked.Add(1) == int64(b.N) {
				cancel()
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	w.HandleFunc("noop", func(context.Context, *fila.Delivery) error { return nil })
	if err := w.Run(ctx); err != nil {
		b.Fatal(err)
	}
	f.wait(b)
	if n := lost.Load(); n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "lost/op")
	}
}
