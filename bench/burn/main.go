// Command burn drains a preloaded PostgreSQL queue with a fila worker of
// no-op jobs and prints the jobs acked per second. It uses only API that
// every commit since November 2026 has (Open, EnqueueBatch, worker.New,
// OnJobEnd), so scripts/burn-at can build it against older commits and
// compare them with today's in interleaved pairs (issue 34: where did the
// skip-locked mode's throughput go).
//
//	go run ./burn -url 'postgres://…?fila_migrate=true&fila_schema=burn' -c 10 -n 3000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/postgres"
	"github.com/fila-go/fila/worker"
)

func main() {
	url := flag.String("url", "", "the broker's URL, with its schema and fila_migrate=true")
	conc := flag.Int("c", 1, "the worker's concurrency")
	n := flag.Int("n", 3000, "messages preloaded and drained, a multiple of 100")
	flag.Parse()
	if *conc < 1 || *n < 100 || *n%100 != 0 {
		fmt.Fprintln(os.Stderr, "burn: -c must be at least 1 and -n a positive multiple of 100")
		os.Exit(2)
	}
	if err := run(*url, *conc, *n); err != nil {
		fmt.Fprintln(os.Stderr, "burn:", err)
		os.Exit(1)
	}
}

func run(url string, conc, n int) error {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	c, err := fila.Open(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close()
	q := fmt.Sprintf("burn%d", rand.Uint64())
	msgs := make([]fila.Message, 100)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "burn", Body: []byte("x")}
	}
	for i := 0; i < n; i += len(msgs) {
		if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	w, err := worker.New(c, worker.Config{
		Queues: map[string]worker.QueueConfig{q: {Concurrency: conc}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnJobEnd: func(ev worker.JobEvent) {
			if ev.Outcome == worker.OutcomeAck && done.Add(1) == int64(n) {
				cancel()
			}
		},
	})
	if err != nil {
		return err
	}
	w.HandleFunc("burn", func(context.Context, *fila.Delivery) error { return nil })
	start := time.Now()
	if err := w.Run(wctx); err != nil {
		return err
	}
	if got := done.Load(); got < int64(n) {
		return fmt.Errorf("drained %d of %d before the deadline", got, n)
	}
	fmt.Printf("%.0f\n", float64(n)/time.Since(start).Seconds())
	return nil
}
