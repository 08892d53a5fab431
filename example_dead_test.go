package fila_test

import (
	"context"
	"fmt"

	"github.com/fila-go/fila"
)

// deadLetters dead-letters one message of each kind, with a reason, for the
// dead-letter examples.
func deadLetters(ctx context.Context, c *fila.Client, queue string, kinds ...string) {
	for _, k := range kinds {
		_, _ = c.Enqueue(ctx, queue, fila.Message{Kind: k, Body: []byte(k)})
		ds, _ := c.Receive(ctx, queue, fila.ReceiveParams{})
		_ = ds[0].Dead(ctx, "no handler for "+k)
	}
}

// DeadList pages through a queue's dead letters, oldest first; Kind keeps
// one kind only.
func ExampleClient_DeadList() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-dead-list")
	defer c.Close()
	deadLetters(ctx, c, "jobs", "a", "b", "a", "c")

	p := fila.DeadListParams{Limit: 2}
	for {
		page, err := c.DeadList(ctx, "jobs", p)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print("page:")
		for _, l := range page.Letters {
			fmt.Printf(" %s (%s)", l.Kind, l.Reason)
		}
		fmt.Println()
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	only, _ := c.DeadList(ctx, "jobs", fila.DeadListParams{Kind: "a"})
	fmt.Println("kind a:", len(only.Letters))
	// Output:
	// page: a (no handler for a) b (no handler for b)
	// page: a (no handler for a) c (no handler for c)
	// kind a: 2
}

// DeadReplay moves selected dead letters back to ready, with attempts
// reset; DeadPurge deletes them.
func ExampleClient_DeadReplay() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-dead-replay")
	defer c.Close()
	deadLetters(ctx, c, "jobs", "a", "b", "c")

	page, _ := c.DeadList(ctx, "jobs", fila.DeadListParams{})
	first := page.Letters[0].ID
	n, _ := c.DeadReplay(ctx, "jobs", fila.DeadFilter{IDs: []string{first}})
	fmt.Println("replayed by id:", n)
	ds, _ := c.Receive(ctx, "jobs", fila.ReceiveParams{})
	fmt.Println("received", ds[0].Kind, "attempt", ds[0].Attempt, "same id:", ds[0].ID == first)
	_ = ds[0].Ack(ctx)

	n, _ = c.DeadReplay(ctx, "jobs", fila.DeadFilter{Kind: "b"})
	fmt.Println("replayed kind b:", n)
	n, _ = c.DeadPurge(ctx, "jobs", fila.DeadFilter{})
	fmt.Println("purged:", n)
	// Output:
	// replayed by id: 1
	// received a attempt 1 same id: true
	// replayed kind b: 1
	// purged: 1
}
