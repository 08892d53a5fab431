package fila_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

func ExampleClient_Receive() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-receive")
	defer c.Close()
	c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":42}`)})

	// Receive blocks until a message is ready or ctx ends. Each delivery is
	// invisible to other consumers for the lease.
	ds, err := c.Receive(ctx, "emails", fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Printf("%s %s attempt %d\n", d.Kind, d.Body, d.Attempt)
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// email.welcome {"user_id":42} attempt 1
}

func ExampleDelivery_Retry() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-retry")
	defer c.Close()
	c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome"})

	ds, _ := c.Receive(ctx, "emails", fila.ReceiveParams{})
	// The mail server timed out: try again in 10ms, keeping the reason.
	ds[0].Retry(ctx, 10*time.Millisecond, "smtp timeout")

	ds, _ = c.Receive(ctx, "emails", fila.ReceiveParams{})
	fmt.Println(ds[0].Attempt, ds[0].LastError)
	ds[0].Ack(ctx)
	// Output:
	// 2 smtp timeout
}

func ExampleDelivery_Dead() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-dead")
	defer c.Close()
	c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":-1}`)})

	ds, _ := c.Receive(ctx, "emails", fila.ReceiveParams{})
	// No retry can fix a bad id: dead-letter it with the reason.
	ds[0].Dead(ctx, "user -1 does not exist")

	page, _ := c.DeadList(ctx, "emails", fila.DeadListParams{})
	for _, l := range page.Letters {
		fmt.Printf("%s %s: %s (attempts %d)\n", l.Kind, l.Body, l.Reason, l.Attempts)
	}
	// Replay it once the bug is fixed.
	n, _ := c.DeadReplay(ctx, "emails", fila.DeadFilter{})
	fmt.Println("replayed", n)
	// Output:
	// email.welcome {"user_id":-1}: user -1 does not exist (attempts 1)
	// replayed 1
}

func ExampleDelivery_Ack_leaseLost() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-acked")
	defer c.Close()
	c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome"})

	ds, _ := c.Receive(ctx, "emails", fila.ReceiveParams{})
	fmt.Println(ds[0].Ack(ctx))
	// A second settlement is refused: the receipt is no longer current.
	fmt.Println(errors.Is(ds[0].Ack(ctx), fila.ErrLeaseLost))
	// Output:
	// <nil>
	// true
}

func ExampleClient_QueueStats() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-stats")
	defer c.Close()
	c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome"})
	c.Enqueue(ctx, "emails", fila.Message{Kind: "email.digest", Delay: time.Hour})

	st, _ := c.QueueStats(ctx, "emails")
	fmt.Printf("ready %d, delayed %d, leased %d, dead %d\n", st.Ready, st.Delayed, st.Leased, st.Dead)
	// Output:
	// ready 1, delayed 1, leased 0, dead 0
}

func ExampleOpen_unknownScheme() {
	_, err := fila.Open(context.Background(), "nats://localhost:4222")
	fmt.Println(errors.Is(err, fila.ErrInvalid))
	// Output:
	// true
}

func ExampleClient_AckReceive() {
	ctx := context.Background()
	c, _ := fila.Open(ctx, "mem://example-ack-receive")
	defer c.Close()
	for _, user := range []string{"1", "2", "3"} {
		c.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome", Body: []byte(user)})
	}

	// A consumer loop: ack what ran with the claim of what comes next, one
	// round trip on drivers that can (backend.AckReceiver). AckReceive
	// never waits, so when it hands out nothing, Receive waits instead.
	var done []*fila.Delivery
	for {
		ds, ackErr, err := c.AckReceive(ctx, done, "emails", fila.ReceiveParams{Max: 1})
		if err != nil || ackErr != nil {
			panic(errors.Join(err, ackErr))
		}
		if len(ds) == 0 {
			break // a real consumer would call Receive here
		}
		fmt.Printf("sending welcome to user %s\n", ds[0].Body)
		done = ds
	}
	// Output:
	// sending welcome to user 1
	// sending welcome to user 2
	// sending welcome to user 3
}
