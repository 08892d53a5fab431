package fila_test

import (
	"context"
	"fmt"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

func ExampleMessage_priority() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-priority")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// A backlog of newsletters, then one password reset at the highest level.
	for range 3 {
		_, _ = c.Enqueue(ctx, "emails", fila.Message{Kind: "newsletter"})
	}
	_, _ = c.Enqueue(ctx, "emails", fila.Message{Kind: "password.reset", Priority: fila.MaxPriority})

	st, _ := c.QueueStats(ctx, "emails")
	fmt.Println("ready by level:", st.ReadyByPriority)

	// The reset is handed out first.
	for range 2 {
		ds, err := c.Receive(ctx, "emails", fila.ReceiveParams{})
		if err != nil {
			panic(err)
		}
		fmt.Println(ds[0].Kind, ds[0].Priority)
		_ = ds[0].Ack(ctx)
	}
	// Output:
	// ready by level: [3 0 0 1]
	// password.reset 3
	// newsletter 0
}
