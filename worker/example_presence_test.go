package worker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// Which workers run on a queue, as any client of the broker sees them (the
// dashboard's queue page and `fila queue workers` show the same).
func ExamplePresenceList() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open()) // or fila.Open(ctx, url)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	w, err := worker.New(client, worker.Config{
		Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 8}},
		Logger: quiet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	// The worker writes its record as it starts.
	var ps []worker.Presence
	for deadline := time.Now().Add(5 * time.Second); len(ps) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ps, err = worker.PresenceList(ctx, client, "emails"); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, p := range ps {
		fmt.Printf("a worker runs up to %d jobs of emails\n", p.Concurrency)
	}

	stop()
	<-done
	ps, _ = worker.PresenceList(context.Background(), client, "emails")
	fmt.Println("after it stopped:", len(ps))
	// Output:
	// a worker runs up to 8 jobs of emails
	// after it stopped: 0
}
