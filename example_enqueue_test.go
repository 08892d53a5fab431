package fila_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

func ExampleClient_Enqueue() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-enqueue")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// Put ids in the body, not objects: the handler reads fresh data.
	id, err := c.Enqueue(ctx, "emails", fila.Message{
		Kind:    "email.welcome",
		Body:    []byte(`{"user_id":42}`),
		Headers: map[string]string{"tenant": "acme"},
		Delay:   0,
	})
	fmt.Println(err == nil, len(id))

	_, err = c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome", Delay: -time.Second})
	fmt.Println(errors.Is(err, fila.ErrInvalid))
	// Output:
	// true 36
	// true
}

func ExampleClient_Enqueue_dedupKey() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-dedup")
	defer c.Close()

	first, _ := c.Enqueue(ctx, "payments", fila.Message{Kind: "charge", DedupKey: "order-7"})
	_, err := c.Enqueue(ctx, "payments", fila.Message{Kind: "charge", DedupKey: "order-7"})
	var dup *fila.DuplicateError
	if errors.As(err, &dup) {
		fmt.Println("duplicate of the pending message:", dup.ID == first)
	}
	// Output:
	// duplicate of the pending message: true
}

func ExampleClient_EnqueueBatch() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-batch")
	defer c.Close()

	ids, err := c.EnqueueBatch(ctx, "reports", []fila.Message{
		{Kind: "report.build", Body: []byte("1")},
		{Kind: "report.build", Body: []byte("2")},
	})
	fmt.Println(len(ids), err)

	// One invalid message fails the whole batch; nothing is stored.
	_, err = c.EnqueueBatch(ctx, "reports", []fila.Message{{Kind: "report.build"}, {Kind: ""}})
	fmt.Println(err)
	// Output:
	// 2 <nil>
	// message 1 of the batch: fila: invalid argument: message kind is empty; a kind names the handler (for example "email.send")
}
