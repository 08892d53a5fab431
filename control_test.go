package fila_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// Without marks, job control is refused with ErrUnsupported and receiving
// works as before.
func TestControlWithoutMarks(t *testing.T) {
	c, err := fila.New(plainDriver{memory.NewBroker(memory.BrokerOptions{}).Open()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for what, err := range map[string]error{
		"QueuePause":    c.QueuePause(ctx, "q"),
		"QueueResume":   c.QueueResume(ctx, "q"),
		"MessageCancel": c.MessageCancel(ctx, "q", "id"),
	} {
		if !errors.Is(err, fila.ErrUnsupported) {
			t.Errorf("%s without marks: %v, want ErrUnsupported", what, err)
		}
	}
	if _, err := c.QueuePaused(ctx, "q"); !errors.Is(err, fila.ErrUnsupported) {
		t.Errorf("QueuePaused without marks: %v, want ErrUnsupported", err)
	}
	if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k", DedupKey: "k", UniqueFor: time.Hour}); !errors.Is(err, fila.ErrUnsupported) {
		t.Errorf("UniqueFor without marks: %v, want ErrUnsupported", err)
	}
	id, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, err := c.Receive(rctx, "q", fila.ReceiveParams{})
	if err != nil || len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("Receive without marks = %v, %v", ds, err)
	}
	if ds[0].Cancelled() != nil {
		t.Errorf("Cancelled() is not nil on a driver that cannot cancel")
	}
}

// Bad arguments to job control are ErrInvalid.
func TestControlBadInput(t *testing.T) {
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for what, err := range map[string]error{
		"QueuePause of a bad name":     c.QueuePause(ctx, "bad name"),
		"MessageCancel without id":     c.MessageCancel(ctx, "q", ""),
		"MessageCancel of a bad id":    c.MessageCancel(ctx, "q", "a\x00b"),
		"MessageCancel of a bad queue": c.MessageCancel(ctx, "", "id"),
	} {
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	for _, m := range []fila.Message{
		{Kind: "k", UniqueFor: time.Hour},
		{Kind: "k", DedupKey: "k", UniqueFor: -time.Second},
	} {
		if _, err := c.Enqueue(ctx, "q", m); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Enqueue(%+v): %v, want ErrInvalid", m, err)
		}
	}
}

// Settling deliveries while the client reads its marks in the background
// must not deadlock (a refresh used to read a delivery's deadline while a
// batch ack held it and waited for the refresh's lock).
func TestControlRefreshDuringSettlements(t *testing.T) {
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open(), fila.WithControlInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := make([]fila.Message, 500)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k"}
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if _, err := c.EnqueueBatch(ctx, "q", msgs); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Max: 500})
		if err != nil {
			t.Fatalf("Receive: %v (a deadlock ends in the context's deadline)", err)
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
}
