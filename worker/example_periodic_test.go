package worker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// A periodic job: every process running this worker takes part in the
// schedule, and each tick is enqueued once among them. The same worker runs
// the jobs, though any worker serving the queue could.
func Example_periodic() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open()) // or fila.Open(ctx, url)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	w, err := worker.New(client, worker.Config{
		Queues: map[string]worker.QueueConfig{"reports": {}},
		Periodic: []worker.Periodic{{
			Name:    "report.refresh",
			Queue:   "reports",
			Every:   time.Second, // or Cron: "0 6 * * 1-5", Location: time.LoadLocation("Europe/Paris")
			Message: fila.Message{Kind: "report.refresh"},
		}},
		Logger: quiet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	w.HandleFunc("report.refresh", func(ctx context.Context, d *fila.Delivery) error {
		tick, err := time.Parse(time.RFC3339Nano, d.Headers[worker.HeaderScheduledAt])
		fmt.Println("refreshing the report of the tick on a whole second:", err == nil && tick.Nanosecond() == 0)
		stop() // the demo ends after the first run
		return nil
	})
	if err := w.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: refreshing the report of the tick on a whole second: true
}
