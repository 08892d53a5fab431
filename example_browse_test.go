package fila_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fila-go/fila"
)

// MessageList shows what waits in a queue and what runs, without claiming
// anything: here a running job, a ready one at a higher level ahead of an
// older one, and one retried into the future with its error.
func ExampleClient_MessageList() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-message-list")
	defer c.Close()

	_, _ = c.Enqueue(ctx, "jobs", fila.Message{Kind: "resize"})
	running, _ := c.Receive(ctx, "jobs", fila.ReceiveParams{Lease: time.Minute})
	_, _ = c.Enqueue(ctx, "jobs", fila.Message{Kind: "email"})
	failing, _ := c.Receive(ctx, "jobs", fila.ReceiveParams{})
	_ = failing[0].Retry(ctx, time.Hour, "smtp: connection refused")
	_, _ = c.Enqueue(ctx, "jobs", fila.Message{Kind: "report"})
	_, _ = c.Enqueue(ctx, "jobs", fila.Message{Kind: "invoice", Priority: 2})

	for _, state := range []fila.MessageState{fila.StateReady, fila.StateDelayed, fila.StateLeased} {
		page, err := c.MessageList(ctx, "jobs", fila.MessageListParams{State: state, WithoutBodies: true})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s:", state)
		for _, m := range page.Messages {
			fmt.Printf(" %s (level %d, attempts %d", m.Kind, m.Priority, m.Attempts)
			if m.LastError != "" {
				fmt.Printf(", %q", m.LastError)
			}
			fmt.Print(")")
		}
		fmt.Println()
	}
	found, _ := c.MessageList(ctx, "jobs", fila.MessageListParams{IDs: []string{running[0].ID}})
	fmt.Println("by id:", found.Messages[0].Kind, found.Messages[0].State)
	// Output:
	// ready: invoice (level 2, attempts 0) report (level 0, attempts 0)
	// delayed: email (level 0, attempts 1, "smtp: connection refused")
	// leased: resize (level 0, attempts 1)
	// by id: resize leased
}
