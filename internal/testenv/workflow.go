package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// Diamond is a workflow A → B, A → C, B+C → D started for a test (see
// StartDiamond), on queues Q1 (A, B) and Q2 (C, D).
type Diamond struct {
	ID     string
	Q1, Q2 string
	// Msg are the steps' message ids by name.
	Msg map[string]string
}

// StartDiamond starts a Diamond workflow id on queues q1 and q2, step X's
// message of kind "wf.X" with body(X) as its body, and deletes it when the
// test ends. It skips t when the driver (named driver in the skip line)
// cannot run workflows. The caller cleans up the queues.
func StartDiamond(t testing.TB, c *fila.Client, driver, id, q1, q2 string, body func(step string) []byte) Diamond {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := Diamond{ID: id, Q1: q1, Q2: q2, Msg: map[string]string{}}
	step := func(name, q string, after ...string) fila.WorkflowStep {
		return fila.WorkflowStep{Name: name, Queue: q, After: after,
			Message: fila.Message{Kind: "wf." + name, Body: body(name)}}
	}
	_, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: w.ID, Steps: []fila.WorkflowStep{
		step("A", w.Q1), step("B", w.Q1, "A"), step("C", w.Q2, "A"), step("D", w.Q2, "B", "C"),
	}})
	if errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the %s driver cannot run workflows: %v", driver, err)
	}
	if err != nil {
		t.Fatalf("WorkflowStart: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.WorkflowDelete(ctx, w.ID)
	})
	st, err := c.WorkflowShow(ctx, w.ID)
	if err != nil {
		t.Fatalf("WorkflowShow: %v", err)
	}
	for _, s := range st.Steps {
		w.Msg[s.Name] = s.MessageID
	}
	return w
}

// ReceiveStep receives from queue until it gets the message id, which it
// returns leased for a minute; it fails on any other message (the test's
// queues hold only its own steps).
func ReceiveStep(t testing.TB, c *fila.Client, queue, id string) *fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			t.Fatalf("receiving step %s from %s: %v", id, queue, err)
		}
		for _, d := range ds {
			if d.ID != id {
				t.Fatalf("received %s (%v) from %s, want step %s", d.ID, d.Headers, queue, id)
			}
			return d
		}
	}
}
