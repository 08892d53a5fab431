package fila_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

func ExampleClient_QueueList() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-queue-list")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, _ = c.Enqueue(ctx, "reports", fila.Message{Kind: "report.daily"})
	_, _ = c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome"})
	queues, err := c.QueueList(ctx)
	fmt.Println(queues, err)
	// Output:
	// [emails reports] <nil>
}

func ExampleClient_QueueDelete() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-queue-delete")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, _ = c.Enqueue(ctx, "old-emails", fila.Message{Kind: "email.welcome"})

	// A queue that holds anything is refused without Force.
	err = c.QueueDelete(ctx, "old-emails", fila.QueueDeleteParams{})
	fmt.Println(errors.Is(err, fila.ErrQueueNotEmpty))

	err = c.QueueDelete(ctx, "old-emails", fila.QueueDeleteParams{Force: true})
	s, _ := c.QueueStats(ctx, "old-emails")
	fmt.Println(err, s.Ready)
	// Output:
	// true
	// <nil> 0
}
