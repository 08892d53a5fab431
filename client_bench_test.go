package fila_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

// BenchmarkClientCost measures what the portable layer adds to a call: one
// message enqueued, received and acked through a Client, against the same
// three calls made on the memory driver directly, in the same run. The
// difference per iteration (ns/op and allocs/op of "client" minus
// "driver") is the cost of validation, IDs, the call bookkeeping and the
// pause and cancel checks, spread over three calls.
func BenchmarkClientCost(b *testing.B) {
	ctx := context.Background()
	b.Run("driver", func(b *testing.B) {
		drv := memory.NewBroker(memory.BrokerOptions{}).Open()
		defer drv.Close()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m := backend.Message{ID: strconv.Itoa(i), Kind: "bench", Body: []byte{}, EnqueuedAt: time.Now()}
			if _, err := drv.Enqueue(ctx, "bench", []backend.Message{m}); err != nil {
				b.Fatal(err)
			}
			ds, err := drv.Receive(ctx, "bench", backend.ReceiveParams{Max: 1, Lease: 30 * time.Second})
			if err != nil || len(ds) != 1 {
				b.Fatalf("Receive = %d, %v", len(ds), err)
			}
			errs, err := drv.Ack(ctx, []backend.Ref{{Queue: "bench", ID: ds[0].ID, Receipt: ds[0].Receipt}})
			if err != nil || errs[0] != nil {
				b.Fatalf("Ack: %v %v", errs, err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Enqueue(ctx, "bench", fila.Message{Kind: "bench"}); err != nil {
				b.Fatal(err)
			}
			ds, err := c.Receive(ctx, "bench", fila.ReceiveParams{})
			if err != nil || len(ds) != 1 {
				b.Fatalf("Receive = %d, %v", len(ds), err)
			}
			if err := ds[0].Ack(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
