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
	c := fila.New(plainDriver{memory.NewBroker(memory.BrokerOptions{}).Open()})
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
	c := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
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
