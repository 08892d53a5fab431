package fila_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// Pausing a queue stops every receiver, in every process; enqueueing goes
// on.
func ExampleClient_QueuePause() {
	ctx := context.Background()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		panic(err)
	}
	defer client.Close()

	_ = client.QueuePause(ctx, "emails")
	_, _ = client.Enqueue(ctx, "emails", fila.Message{Kind: "email.send"})

	wait, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = client.Receive(wait, "emails", fila.ReceiveParams{})
	cancel()
	fmt.Println("while paused:", err)

	_ = client.QueueResume(ctx, "emails")
	ds, _ := client.Receive(ctx, "emails", fila.ReceiveParams{})
	fmt.Println("after resume:", ds[0].Kind)
	// Output:
	// while paused: context deadline exceeded
	// after resume: email.send
}

// A cancelled message is dead-lettered instead of handed out.
func ExampleClient_MessageCancel() {
	ctx := context.Background()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		panic(err)
	}
	defer client.Close()

	id, _ := client.Enqueue(ctx, "emails", fila.Message{Kind: "email.send", Delay: time.Hour})
	_ = client.MessageCancel(ctx, "emails", id)
	_, _ = client.Enqueue(ctx, "emails", fila.Message{Kind: "email.other"})

	ds, _ := client.Receive(ctx, "emails", fila.ReceiveParams{Max: 10})
	fmt.Println("received:", len(ds), ds[0].Kind)
	// Output:
	// received: 1 email.other
}

// A unique period keeps a dedup key held after its message completed.
func ExampleMessage_uniqueFor() {
	ctx := context.Background()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		panic(err)
	}
	defer client.Close()

	daily := fila.Message{Kind: "report", DedupKey: "report-2026-12-01", UniqueFor: 24 * time.Hour}
	_, _ = client.Enqueue(ctx, "reports", daily)
	ds, _ := client.Receive(ctx, "reports", fila.ReceiveParams{})
	_ = ds[0].Ack(ctx)

	_, err = client.Enqueue(ctx, "reports", daily)
	fmt.Println(errors.Is(err, fila.ErrDuplicate))
	// Output:
	// true
}
