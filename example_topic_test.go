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
	fmt.Println(len(subs), err)

	id, err := c.Publish(ctx, "orders", fila.Message{Kind: "order.created", Body: []byte(`{"order_id":7}`)})
	if err != nil {
		panic(err)
	}

	// Every subscription receives a copy of its own, with an id of its own.
	for _, s := range subs {
		q := s.Queue
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
		if err != nil {
			panic(err)
		}
		d := ds[0]
		fmt.Println(q, d.Kind, string(d.Body), d.ID == fila.CopyID(id, q), d.ID != id)
		_ = d.Ack(ctx)
	}
	// Output:
	// 2 <nil>
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

func ExampleKindPattern() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-kind-pattern")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// Refunds of any country go to one queue; everything about Brazil to
	// another; the audit queue takes every kind.
	_ = c.TopicSubscribe(ctx, "orders", "orders.refunds", fila.KindPattern("order.*.refunded"))
	_ = c.TopicSubscribe(ctx, "orders", "orders.brazil", fila.KindPattern("*.brazil.#"))
	_ = c.TopicSubscribe(ctx, "orders", "orders.audit")

	for _, kind := range []string{"order.brazil.refunded", "order.chile.refunded", "order.brazil.created.late"} {
		res, err := c.PublishBatch(ctx, "orders", []fila.Message{{Kind: kind}})
		fmt.Println(kind, res.Subscriptions, err)
	}
	subs, _ := c.TopicSubscriptions(ctx, "orders")
	for _, s := range subs {
		st, _ := c.QueueStats(ctx, s.Queue)
		fmt.Println(s.Queue, s.Patterns, st.Ready)
	}
	// Output:
	// order.brazil.refunded 3 <nil>
	// order.chile.refunded 2 <nil>
	// order.brazil.created.late 2 <nil>
	// orders.audit [] 3
	// orders.brazil [*.brazil.#] 2
	// orders.refunds [order.*.refunded] 2
}
