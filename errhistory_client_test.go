package fila_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

func receiveFirst(t *testing.T, c *fila.Client, q string) *fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %v, %v", ds, err)
	}
	return ds[0]
}

// A Retry of a cancelled message dead-letters it with its history, the
// Retry's reason included, before ReasonCancelled.
func TestErrorHistoryOfACancelledMessage(t *testing.T) {
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	id, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := receiveFirst(t, c, "q").Retry(ctx, 0, "boom"); err != nil {
		t.Fatal(err)
	}
	d := receiveFirst(t, c, "q")
	if err := c.MessageCancel(ctx, "q", id); err != nil {
		t.Fatal(err)
	}
	if err := d.Retry(ctx, 0, "again"); !errors.Is(err, fila.ErrCancelled) {
		t.Fatalf("Retry of a cancelled message: %v, want ErrCancelled", err)
	}
	page, err := c.DeadList(ctx, "q", fila.DeadListParams{})
	if err != nil || len(page.Letters) != 1 {
		t.Fatalf("DeadList = %+v, %v", page, err)
	}
	l := page.Letters[0]
	if l.Reason != fila.ReasonCancelled || len(l.Errors) != 2 || l.Errors[0].Reason != "boom" || l.Errors[0].Attempt != 1 ||
		l.Errors[1].Reason != "again" || l.Errors[1].Attempt != 2 {
		t.Errorf("cancelled dead letter: reason %q, errors %+v", l.Reason, l.Errors)
	}
}

// A last error stored as plain text (by an older version, or by a driver
// call made directly) reads as one error of unknown attempt and time, and
// the history goes on from it.
func TestErrorHistoryFromAPlainReason(t *testing.T) {
	drv := memory.NewBroker(memory.BrokerOptions{}).Open()
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	bds, err := drv.Receive(ctx, "q", backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(bds) != 1 {
		t.Fatalf("driver Receive = %v, %v", bds, err)
	}
	if err := drv.Retry(ctx, backend.Ref{Queue: "q", ID: bds[0].ID, Receipt: bds[0].Receipt}, 0, "plain\nold reason"); err != nil {
		t.Fatal(err)
	}
	d := receiveFirst(t, c, "q")
	if d.LastError != "plain\nold reason" || len(d.Errors) != 1 || d.Errors[0].Attempt != 0 || !d.Errors[0].At.IsZero() {
		t.Errorf("after a plain reason: last error %q, errors %+v", d.LastError, d.Errors)
	}
	before := time.Now()
	if err := d.Retry(ctx, 0, "new"); err != nil {
		t.Fatal(err)
	}
	d = receiveFirst(t, c, "q")
	if d.LastError != "new" || len(d.Errors) != 2 || d.Errors[0].Reason != "plain\nold reason" ||
		d.Errors[1].Attempt != 2 || d.Errors[1].At.Before(before.Truncate(time.Microsecond)) {
		t.Errorf("after a Retry on a plain reason: last error %q, errors %+v", d.LastError, d.Errors)
	}
}
