package fila_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

// overDriver is a driver that claims two more messages than it is asked
// for, as the PostgreSQL log mode once did after a late commit.
type overDriver struct{ backend.Driver }

func (d overDriver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	p.Max += 2
	return d.Driver.Receive(ctx, queue, p)
}

// TestReceiveNeverOverMax: Client.Receive returns at most Max deliveries
// whatever its driver returns, and the extra ones are given back at once,
// not lost and not held for their leases.
func TestReceiveNeverOverMax(t *testing.T) {
	var logs bytes.Buffer
	c, err := fila.New(overDriver{memory.NewBroker(memory.BrokerOptions{}).Open()},
		fila.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 12
	for i := range n {
		if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k", Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for len(got) < n {
		// A lease far longer than the test: a message held by a lease
		// instead of given back would not come again in time.
		ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Max: 5, Lease: time.Hour})
		if err != nil {
			t.Fatalf("Receive with %d of %d received: %v", len(got), n, err)
		}
		if len(ds) > 5 {
			t.Fatalf("Receive(Max 5) returned %d deliveries", len(ds))
		}
		for _, d := range ds {
			if got[d.ID] {
				t.Errorf("message %s delivered twice", d.ID)
			}
			got[d.ID] = true
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = c.Close()
	if !strings.Contains(logs.String(), "more deliveries than Max") {
		t.Errorf("the driver's extra deliveries were not logged; the log:\n%s", logs.String())
	}
}
