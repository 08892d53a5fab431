package fila_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// A concurrency limit stored in the broker holds across every client: with
// two messages leased under a limit of two, a third Receive waits until one
// of them is settled.
func ExampleClient_QueueLimitsSet() {
	ctx := context.Background()
	broker := memory.NewBroker(memory.BrokerOptions{})
	admin, _ := fila.New(broker.Open())
	worker, _ := fila.New(broker.Open()) // another process, say
	defer admin.Close()
	defer worker.Close()

	if err := admin.QueueLimitsSet(ctx, "payments", fila.QueueLimits{Concurrency: 2}); err != nil {
		panic(err)
	}
	for range 3 {
		if _, err := admin.Enqueue(ctx, "payments", fila.Message{Kind: "charge"}); err != nil {
			panic(err)
		}
	}
	limits, _ := worker.QueueLimits(ctx, "payments")
	fmt.Println("limits:", limits)

	held, _ := worker.Receive(ctx, "payments", fila.ReceiveParams{Max: 10})
	fmt.Println("received:", len(held))

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := worker.Receive(short, "payments", fila.ReceiveParams{})
	fmt.Println("third while two run:", errors.Is(err, context.DeadlineExceeded))

	_ = held[0].Ack(ctx)
	third, _ := worker.Receive(ctx, "payments", fila.ReceiveParams{})
	fmt.Println("third after an ack:", len(third))

	// Output:
	// limits: concurrency 2
	// received: 2
	// third while two run: true
	// third after an ack: 1
}

// QueueThrottled tells how often this client's receives waited for room,
// per limit: here one Receive waited for the only concurrency slot until
// its context ended.
func ExampleClient_QueueThrottled() {
	ctx := context.Background()
	c, _ := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	defer c.Close()

	_ = c.QueueLimitsSet(ctx, "payments", fila.QueueLimits{Concurrency: 1})
	for range 2 {
		_, _ = c.Enqueue(ctx, "payments", fila.Message{Kind: "charge"})
	}
	held, _ := c.Receive(ctx, "payments", fila.ReceiveParams{})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _ = c.Receive(short, "payments", fila.ReceiveParams{}) // waits for the slot held above
	_ = held[0].Ack(ctx)

	th := c.QueueThrottled("payments")
	fmt.Println("waited for a slot:", th.SlotWaits)
	fmt.Println("waited for the rate:", th.RateWaits)
	fmt.Println("waited some time:", th.Wait > 0)

	// Output:
	// waited for a slot: 1
	// waited for the rate: 0
	// waited some time: true
}
