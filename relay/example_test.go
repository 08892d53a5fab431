package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/relay"
)

// A relay moves a queue from one broker to another: here between two
// in-memory brokers, until the source has stayed empty for a moment. The
// moved message keeps its kind and body and carries its source id in a
// header.
func Example() {
	ctx := context.Background()
	from, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open()) // the outbox, e.g. PostgreSQL
	if err != nil {
		panic(err)
	}
	defer from.Close()
	to, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open()) // e.g. RabbitMQ
	if err != nil {
		panic(err)
	}
	defer to.Close()

	id, _ := from.Enqueue(ctx, "orders", fila.Message{Kind: "order.created", Body: []byte(`{"order":7}`)})

	r := &relay.Relay{From: from, FromQueue: "orders", To: to, StopWhenIdle: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)}
	st, err := r.Run(ctx)
	fmt.Println("moved:", st.Moved, "error:", err)

	ds, _ := to.Receive(ctx, "orders", fila.ReceiveParams{})
	fmt.Println(ds[0].Kind, string(ds[0].Body), ds[0].Headers[relay.HeaderSourceID] == id)
	// Output:
	// moved: 1 error: <nil>
	// order.created {"order":7} true
}
