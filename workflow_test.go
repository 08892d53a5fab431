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

// faultyWorkflowDriver is the memory driver with the capabilities workflows
// use and no dedup keys (as RabbitMQ), whose ack of failAck and enqueue to
// failQueue fail once each, as a connection lost at that moment would.
type faultyWorkflowDriver struct {
	backend.Driver
	mem interface {
		backend.Marker
		backend.MarkLister
		backend.DeadLetterer
		backend.DeadImporter
	}
	failAck   atomic.Pointer[string]
	failQueue atomic.Pointer[string]
	failMark  atomic.Pointer[string] // a mark name prefix
	deadLists atomic.Int64
}

func (d *faultyWorkflowDriver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	if id := d.failAck.Load(); id != nil && len(refs) == 1 && refs[0].ID == *id && d.failAck.CompareAndSwap(id, nil) {
		return nil, backend.ErrUnavailable
	}
	return d.Driver.Ack(ctx, refs)
}

func (d *faultyWorkflowDriver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if q := d.failQueue.Load(); q != nil && queue == *q && d.failQueue.CompareAndSwap(q, nil) {
		return nil, backend.ErrUnavailable
	}
	return d.Driver.Enqueue(ctx, queue, msgs)
}

func (d *faultyWorkflowDriver) MarkSet(ctx context.Context, q, n string, until time.Time, onlyNew bool) (bool, error) {
	if p := d.failMark.Load(); p != nil && strings.HasPrefix(n, *p) && d.failMark.CompareAndSwap(p, nil) {
		return false, backend.ErrUnavailable
	}
	return d.mem.MarkSet(ctx, q, n, until, onlyNew)
}
func (d *faultyWorkflowDriver) MarkGet(ctx context.Context, q, n string) (bool, error) {
	return d.mem.MarkGet(ctx, q, n)
}
func (d *faultyWorkflowDriver) MarkDelete(ctx context.Context, q, n string) error {
	return d.mem.MarkDelete(ctx, q, n)
}
func (d *faultyWorkflowDriver) MarkList(ctx context.Context, q, prefix string) ([]string, error) {
	return d.mem.MarkList(ctx, q, prefix)
}
func (d *faultyWorkflowDriver) DeadList(ctx context.Context, q string, p backend.DeadListParams) (backend.DeadPage, error) {
	d.deadLists.Add(1)
	return d.mem.DeadList(ctx, q, p)
}
func (d *faultyWorkflowDriver) DeadReplay(ctx context.Context, q string, f backend.DeadFilter) (int, error) {
	return d.mem.DeadReplay(ctx, q, f)
}
func (d *faultyWorkflowDriver) DeadPurge(ctx context.Context, q string, f backend.DeadFilter) (int, error) {
	return d.mem.DeadPurge(ctx, q, f)
}
func (d *faultyWorkflowDriver) DeadImport(ctx context.Context, q string, ls []backend.DeadLetter) error {
	return d.mem.DeadImport(ctx, q, ls)
}

// fanInOfTwo starts x, y → cb on a client over a faulty driver, acks y,
// and returns x's delivery, leased for lease.
func fanInOfTwo(t *testing.T, lease time.Duration) (*fila.Client, *faultyWorkflowDriver, *fila.Delivery) {
	t.Helper()
	mem := memory.NewBroker(memory.BrokerOptions{}).Open()
	drv := &faultyWorkflowDriver{Driver: mem, mem: mem}
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if _, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: []fila.WorkflowStep{
		{Name: "x", Queue: "steps", Message: fila.Message{Kind: "x"}},
		{Name: "y", Queue: "steps", Message: fila.Message{Kind: "y"}},
		{Name: "cb", Queue: "callbacks", After: []string{"x", "y"}, Message: fila.Message{Kind: "cb"}},
	}}); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, "steps", fila.ReceiveParams{Max: 2, Lease: lease})
	if err != nil || len(ds) != 2 {
		t.Fatalf("Receive: %d deliveries, %v", len(ds), err)
	}
	x, y := ds[0], ds[1]
	if _, step := x.Workflow(); step != "x" {
		x, y = y, x
	}
	if err := y.Ack(ctx); err != nil {
		t.Fatalf("Ack(y): %v", err)
	}
	return c, drv, x
}

// receiveStep waits for the next delivery of queue.
func receiveStep(t *testing.T, c *fila.Client, queue string, within time.Duration) *fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive(%s): %d deliveries, %v", queue, len(ds), err)
	}
	return ds[0]
}

func expectNoStep(t *testing.T, c *fila.Client, queue string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive(%s): %d deliveries, %v; want none", queue, len(ds), err)
	}
}

// The last dependency's ack releases the callback and then fails; the
// dependency comes back and is acked again while the callback is still
// pending: on a driver without dedup keys nothing but the release's own
// mark keeps its bookkeeping from enqueueing the callback a second time.
func TestWorkflowRedeliveredDependencyReleasesOnce(t *testing.T) {
	c, drv, x := fanInOfTwo(t, 200*time.Millisecond)
	ctx := context.Background()
	drv.failAck.Store(&x.ID)
	if err := x.Ack(ctx); !errors.Is(err, fila.ErrUnavailable) {
		t.Fatalf("Ack(x) through a failing ack: %v, want ErrUnavailable", err)
	}
	cb := receiveStep(t, c, "callbacks", 5*time.Second) // released by the failed ack
	again := receiveStep(t, c, "steps", 5*time.Second)  // x, its lease expired
	if again.ID != x.ID || again.Attempt != 2 {
		t.Fatalf("received %s attempt %d, want x (%s) again", again.ID, again.Attempt, x.ID)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatalf("Ack(x) again: %v", err)
	}
	expectNoStep(t, c, "callbacks")
	if err := cb.Ack(ctx); err != nil {
		t.Fatalf("Ack(cb): %v", err)
	}
}

// The last dependency's ack wins the release and fails to enqueue the
// callback (a process dying there leaves the same): the dependency's next
// delivery enqueues it, once.
func TestWorkflowReleaseLostIsRedone(t *testing.T) {
	c, drv, x := fanInOfTwo(t, 200*time.Millisecond)
	ctx := context.Background()
	q := "callbacks"
	drv.failQueue.Store(&q)
	if err := x.Ack(ctx); !errors.Is(err, fila.ErrUnavailable) {
		t.Fatalf("Ack(x) with the release failing: %v, want ErrUnavailable", err)
	}
	again := receiveStep(t, c, "steps", 5*time.Second)
	if again.ID != x.ID {
		t.Fatalf("received %s, want x (%s) again", again.ID, x.ID)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatalf("Ack(x) again: %v", err)
	}
	cb := receiveStep(t, c, "callbacks", 5*time.Second)
	if _, step := cb.Workflow(); step != "cb" {
		t.Fatalf("received step %q, want cb", step)
	}
	if err := cb.Ack(ctx); err != nil {
		t.Fatalf("Ack(cb): %v", err)
	}
	expectNoStep(t, c, "callbacks")
}

// A client that read a workflow sees it deleted by another client, and
// runs the workflow started again under its id by the new definition.
func TestWorkflowDeletedByAnotherClient(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	c1, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx := context.Background()
	p := fila.WorkflowParams{ID: "wf", Steps: []fila.WorkflowStep{
		{Name: "a", Queue: "q", Message: fila.Message{Kind: "a"}},
		{Name: "b", Queue: "q", After: []string{"a"}, Message: fila.Message{Kind: "b"}},
	}}
	if _, err := c1.WorkflowStart(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.WorkflowShow(ctx, "wf"); err != nil {
		t.Fatalf("WorkflowShow: %v", err)
	}
	old := receiveStep(t, c2, "q", 5*time.Second)
	if err := c1.WorkflowDelete(ctx, "wf"); err != nil {
		t.Fatalf("WorkflowDelete: %v", err)
	}
	if _, err := c2.WorkflowShow(ctx, "wf"); !errors.Is(err, fila.ErrWorkflowNotFound) {
		t.Errorf("WorkflowShow by the other client after the delete: %v, want ErrWorkflowNotFound", err)
	}
	if err := c2.WorkflowCancel(ctx, "wf"); !errors.Is(err, fila.ErrWorkflowNotFound) {
		t.Errorf("WorkflowCancel by the other client after the delete: %v, want ErrWorkflowNotFound", err)
	}
	if err := old.Ack(ctx); err != nil { // a plain message now: releases nothing
		t.Fatalf("Ack of a deleted workflow's step: %v", err)
	}
	expectNoStep(t, c2, "q")
	if _, err := c1.WorkflowStart(ctx, p); err != nil {
		t.Fatalf("WorkflowStart again: %v", err)
	}
	a := receiveStep(t, c2, "q", 5*time.Second)
	if _, step := a.Workflow(); step != "a" || a.ID == old.ID {
		t.Fatalf("received step %q (%s), want the new a", step, a.ID)
	}
	if err := a.Ack(ctx); err != nil {
		t.Fatalf("Ack(new a): %v", err)
	}
	if _, step := receiveStep(t, c2, "q", 5*time.Second).Workflow(); step != "b" {
		t.Fatalf("after the new a received step %q, want b", step)
	}
}

// A client that has not read a workflow yet, acking a batch of its steps,
// reads its manifest once, not once per step.
func TestWorkflowManifestReadOnce(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	starter, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	mem := b.Open()
	drv := &faultyWorkflowDriver{Driver: mem, mem: mem}
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	steps := []fila.WorkflowStep{{Name: "cb", Queue: "cb", Message: fila.Message{Kind: "cb"}}}
	for i := range 16 {
		name := "s" + string(rune('a'+i))
		steps = append(steps, fila.WorkflowStep{Name: name, Queue: "q", Message: fila.Message{Kind: "s"}})
		steps[0].After = append(steps[0].After, name)
	}
	if _, err := starter.WorkflowStart(ctx, fila.WorkflowParams{Steps: steps}); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, "q", fila.ReceiveParams{Max: 16})
	if err != nil || len(ds) != 16 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatalf("AckBatch: %v", err)
	}
	if n := drv.deadLists.Load(); n != 1 {
		t.Errorf("acking 16 steps read the manifest %d times, want once", n)
	}
	if _, step := receiveStep(t, c, "cb", 5*time.Second).Workflow(); step != "cb" {
		t.Errorf("received step %q, want cb", step)
	}
}

// A dependency whose first ack ran its bookkeeping before the fan-in was
// complete, and then failed, comes back while the winner of the release
// is between its enqueue and its mark of it (here: failed there): having
// never raced for the release, the dependency's second ack leaves it to
// the winner's own next delivery, so the callback is enqueued once.
func TestWorkflowRedeliveredLoserLeavesRelease(t *testing.T) {
	mem := memory.NewBroker(memory.BrokerOptions{}).Open()
	drv := &faultyWorkflowDriver{Driver: mem, mem: mem}
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: []fila.WorkflowStep{
		{Name: "x", Queue: "x", Message: fila.Message{Kind: "x"}},
		{Name: "y", Queue: "y", Message: fila.Message{Kind: "y"}},
		{Name: "cb", Queue: "callbacks", After: []string{"x", "y"}, Message: fila.Message{Kind: "cb"}},
	}}); err != nil {
		t.Fatal(err)
	}
	ys, err := c.Receive(ctx, "y", fila.ReceiveParams{Max: 1, Lease: 200 * time.Millisecond})
	if err != nil || len(ys) != 1 {
		t.Fatalf("Receive(y): %d, %v", len(ys), err)
	}
	drv.failAck.Store(&ys[0].ID)
	if err := ys[0].Ack(ctx); !errors.Is(err, fila.ErrUnavailable) { // y marked done, not acked
		t.Fatalf("Ack(y) through a failing ack: %v, want ErrUnavailable", err)
	}
	x := receiveStep(t, c, "x", 5*time.Second)
	prefix := "enq/"
	drv.failMark.Store(&prefix)
	if err := x.Ack(ctx); !errors.Is(err, fila.ErrUnavailable) { // cb enqueued, not marked so
		t.Fatalf("Ack(x) with the enqueued mark failing: %v, want ErrUnavailable", err)
	}
	cb := receiveStep(t, c, "callbacks", 5*time.Second)
	y := receiveStep(t, c, "y", 5*time.Second) // y, its lease expired
	if y.Attempt != 2 {
		t.Fatalf("received y attempt %d, want 2", y.Attempt)
	}
	if err := y.Ack(ctx); err != nil {
		t.Fatalf("Ack(y) again: %v", err)
	}
	expectNoStep(t, c, "callbacks")
	if err := cb.Ack(ctx); err != nil {
		t.Fatalf("Ack(cb): %v", err)
	}
}
