package fila_test

import (
	"context"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

// plainDriver hides every optional capability of the driver it wraps, so a
// client over it has no marks (no pause or cancel checks).
type plainDriver struct{ backend.Driver }

// BenchmarkControlCost measures what pause and cancel support costs a
// receive-and-ack loop: the memory driver with its marks against the same
// driver with them hidden, in the same run.
func BenchmarkControlCost(b *testing.B) {
	for _, tc := range []struct {
		name string
		wrap func(backend.Driver) backend.Driver
	}{
		{"without-marks", func(d backend.Driver) backend.Driver { return plainDriver{d} }},
		{"with-marks", func(d backend.Driver) backend.Driver { return d }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := fila.New(tc.wrap(memory.NewBroker(memory.BrokerOptions{}).Open()))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			msgs := make([]fila.Message, 100)
			for i := range msgs {
				msgs[i] = fila.Message{Kind: "bench"}
			}
			b.ResetTimer()
			for done := 0; done < b.N; {
				if _, err := c.EnqueueBatch(ctx, "bench", msgs); err != nil {
					b.Fatal(err)
				}
				for range 10 {
					ds, err := c.Receive(ctx, "bench", fila.ReceiveParams{Max: 10})
					if err != nil {
						b.Fatal(err)
					}
					if err := c.AckBatch(ctx, ds); err != nil {
						b.Fatal(err)
					}
					done += len(ds)
				}
			}
		})
	}
}
