package fila_test

import (
	"context"
	"fmt"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

func ExampleClient_Publish() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-publish")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// Each subscription of a topic is a queue.
	_ = c.TopicSubscribe(ctx, "orders", "orders.email")
	_ = c.TopicSubscribe(ctx, "orders", "orders.audit")
	subs, err := c.TopicSubscriptions(ctx, "orders")
	fmt.Println(subs, err)

	id, err := c.Publish(ctx, "orders", fila.Message{Kind: "order.created", Body: []byte(`{"order_id":7}`)})
	if err != nil {
		panic(err)
	}

	// Every subscription receives a copy of its own, with an id of its own.
	for _, q := range subs {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
		if err != nil {
			panic(err)
		}
		d := ds[0]
		fmt.Println(q, d.Kind, string(d.Body), d.ID == fila.CopyID(id, q), d.ID != id)
		_ = d.Ack(ctx)
	}
	// Output:
	// [orders.audit orders.email] <nil>
	// orders.audit order.created {"order_id":7} true true
	// orders.email order.created {"order_id":7} true true
}

func ExampleClient_PublishBatch() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-publish-batch")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// A topic without subscriptions stores nothing, and that is no error.
	res, err := c.PublishBatch(ctx, "invoices", []fila.Message{{Kind: "invoice.sent"}})
	fmt.Println(len(res.IDs), res.Subscriptions, err)

	_ = c.TopicSubscribe(ctx, "invoices", "invoices.ledger")
	res, err = c.PublishBatch(ctx, "invoices", []fila.Message{{Kind: "invoice.sent"}, {Kind: "invoice.paid"}})
	fmt.Println(len(res.IDs), res.Subscriptions, err)

	// Unsubscribing deletes the queue with the copies it still holds.
	before, _ := c.QueueStats(ctx, "invoices.ledger")
	_ = c.TopicUnsubscribe(ctx, "invoices", "invoices.ledger")
	after, _ := c.QueueStats(ctx, "invoices.ledger")
	fmt.Println(before.Ready, after.Ready)
	// Output:
	// 1 0 <nil>
	// 2 1 <nil>
	// 2 0
}
