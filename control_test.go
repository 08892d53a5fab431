package fila_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
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

// probedMarks is a driver whose marks can be slowed down and counted: each
// mark read takes readDelay, as on a busy server, and each mark set whose
// name starts with setPrefix adds one to sets (when sets is not nil).
type probedMarks struct {
	backend.Driver
	marks interface {
		backend.Marker
		backend.MarkLister
	}
	readDelay time.Duration
	setPrefix string
	sets      *atomic.Int64
}

func (d probedMarks) wait(ctx context.Context) error {
	if d.readDelay <= 0 {
		return nil
	}
	select {
	case <-time.After(d.readDelay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d probedMarks) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	if d.sets != nil && strings.HasPrefix(name, d.setPrefix) {
		d.sets.Add(1)
	}
	return d.marks.MarkSet(ctx, queue, name, until, onlyNew)
}

func (d probedMarks) MarkDelete(ctx context.Context, queue, name string) error {
	return d.marks.MarkDelete(ctx, queue, name)
}

func (d probedMarks) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	if err := d.wait(ctx); err != nil {
		return false, err
	}
	return d.marks.MarkGet(ctx, queue, name)
}

func (d probedMarks) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	return d.marks.MarkList(ctx, queue, prefix)
}

// A consumer calling Receive with contexts shorter than the server takes
// to read the queue's marks still gets its message: the client's first
// read of them goes on past each call's end, and the next calls wait for
// it rather than starting over (each read here takes three times a
// call's context).
func TestReceiveShortContextsSlowMarks(t *testing.T) {
	mem := memory.NewBroker(memory.BrokerOptions{}).Open()
	c, err := fila.New(probedMarks{Driver: mem, marks: mem, readDelay: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := c.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	receives := 0
	for ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		ds, err := c.Receive(rctx, "q", fila.ReceiveParams{Max: 1})
		rcancel()
		receives++
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Receive: %v", err)
		}
		if len(ds) == 1 {
			if ds[0].ID != id {
				t.Fatalf("received %s, want %s", ds[0].ID, id)
			}
			t.Logf("received after %d receives of 50ms", receives)
			return
		}
	}
	t.Fatalf("not received by %d receives of 50ms while the marks took 150ms a read", receives)
}
