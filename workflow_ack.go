package fila

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
)

// workflowAck is a workflow step's bookkeeping, run under the step's lease
// before its ack (the "ledger written before the ack"): it stores the
// step's result, marks the step done and releases each step waiting for it
// whose dependencies are now all done. Every write is idempotent, so a
// process that dies at any point leaves the step to be delivered again and
// its bookkeeping to be run again. It returns nil when d may be acked (a
// message that is not a step of a stored workflow included), ErrCancelled
// when the workflow was cancelled and d was dead-lettered instead, or the
// error that stopped it (d is then not acked, and comes back).
//
// The caller holds d.mu.
func (c *Client) workflowAck(ctx context.Context, d *Delivery) error {
	id, step := d.Workflow()
	if id == "" || step == "" || c.marker == nil || ValidateWorkflowID(id) != nil {
		return nil
	}
	ix, err := c.workflow(ctx, id, step, d.ID)
	if errors.Is(err, ErrWorkflowNotFound) {
		return nil // deleted, or headers copied onto another message
	}
	if err != nil {
		return err
	}
	x, ok := ix.byName[step]
	if !ok || ix.m.Steps[x].ID != d.ID {
		return nil // not this workflow's message
	}
	// A second run of the bookkeeping for one delivery (its ack failed)
	// may follow a release of its own that the first run made.
	again := d.Attempt > 1 || d.wfRan
	d.wfRan = true
	home := workflowQueue(id)
	live, err := c.marker.MarkGet(ctx, home, "live")
	if err != nil {
		return err
	}
	if !live {
		// Cancelled, or deleted (by another client: this one's copy of
		// the manifest outlived it), when the step runs as a plain
		// message.
		cancelled, err := c.marker.MarkGet(ctx, home, "cancelled")
		if err != nil || !cancelled {
			return err
		}
		reason := withError(d.history, d.Attempt, time.Now(), ReasonWorkflowCancelled)
		if err := c.drv.Dead(ctx, d.ref(), reason, d.Attempt); err != nil {
			return err
		}
		return ErrCancelled
	}
	if d.result != nil {
		now := time.Now()
		letter := backend.DeadLetter{
			Message: backend.Message{ID: workflowDerivedID(id, "result/"+step), Kind: workflowResultKind,
				Body: d.result, EnqueuedAt: now},
			Queue: home, Reason: "result of step " + step, DeadAt: now,
		}
		if err := c.drv.(backend.DeadImporter).DeadImport(ctx, home, []backend.DeadLetter{letter}); err != nil {
			return err
		}
	}
	// The marks of progress never expire and are set once: onlyNew
	// creates one without first deleting it (RabbitMQ's replace does),
	// and a second run finds it there, which is as good.
	if len(ix.next[x]) == 0 {
		_, err := c.marker.MarkSet(ctx, home, ix.doneMark(x), time.Time{}, true)
		return err
	}
	for _, e := range ix.next[x] {
		if _, err := c.marker.MarkSet(ctx, home, ix.edgeMark(e.step, e.bucket, x), time.Time{}, true); err != nil {
			return err
		}
	}
	for _, e := range ix.next[x] {
		full, err := c.wfBucketDone(ctx, ix, e.step, e.bucket, x)
		if err != nil {
			return err
		}
		if !full {
			continue
		}
		if ix.buckets(e.step) > 1 {
			prefix := ix.fullPrefix(e.step)
			if _, err := c.marker.MarkSet(ctx, home, prefix+fmt.Sprint(e.bucket), time.Time{}, true); err != nil {
				return err
			}
			full, err = c.wfMarksAll(ctx, home, prefix, ix.buckets(e.step), func(b int) string { return prefix + fmt.Sprint(b) })
			if err != nil {
				return err
			}
			if !full {
				continue
			}
		}
		if err := c.wfRelease(ctx, ix, e.step, x, again); err != nil {
			return err
		}
	}
	return nil
}

// wfBucketDone reports whether every dependency of step s in bucket b is
// done, x (in that bucket) being done.
func (c *Client) wfBucketDone(ctx context.Context, ix *wfIndex, s, b, x int) (bool, error) {
	deps := ix.deps[s][b*workflowBucket : min((b+1)*workflowBucket, len(ix.deps[s]))]
	if len(deps) == 1 && deps[0] == x {
		return true, nil // a chain's link: nothing to read
	}
	return c.wfMarksAll(ctx, workflowQueue(ix.m.ID), ix.bucketPrefix(s, b), len(deps),
		func(i int) string { return ix.edgeMark(s, b, deps[i]) })
}

// wfMarksAll reports whether the n marks name(0..n-1), all starting with
// prefix and the only marks that can, exist: one listing where the
// driver lists marks, else reads until one is missing.
func (c *Client) wfMarksAll(ctx context.Context, home, prefix string, n int, name func(int) string) (bool, error) {
	if c.lister != nil {
		got, err := c.lister.MarkList(ctx, home, prefix)
		return len(got) >= n, err
	}
	for i := n - 1; i >= 0; i-- { // the latest done are likelier missing
		ok, err := c.marker.MarkGet(ctx, home, name(i))
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// wfRelease enqueues step s, whose dependencies are all done, unless
// another ack (or a cancel) did first, and then sets its mark "enq/<s>".
// Each ack that races for the release first sets "try/<s>/<x>" (x: the
// step it acks). A lost race enqueues s anyway only when x raced in an
// earlier run of its bookkeeping (again: a redelivery, or a second run
// after a failed ack), so x may have won then and died before enqueueing,
// and neither "enq/<s>" nor s's done mark exists. A second copy can then
// come only from the winner being between its enqueue and its "enq/<s>"
// (died there, or still at it while x's earlier losing run is redone),
// and the step's dedup key, where the driver has them, refuses it while
// the first is pending.
func (c *Client) wfRelease(ctx context.Context, ix *wfIndex, s, x int, again bool) error {
	home := workflowQueue(ix.m.ID)
	st := ix.m.Steps[s]
	fresh, err := c.marker.MarkSet(ctx, home, "try/"+st.Name+"/"+ix.m.Steps[x].Name, time.Time{}, true)
	if err != nil {
		return err
	}
	won, err := c.marker.MarkSet(ctx, home, "rel/"+st.Name, time.Time{}, true)
	if err != nil {
		return err
	}
	if !won {
		if !again || fresh {
			return nil
		}
		for _, mark := range []string{"enq/" + st.Name, ix.doneMark(s)} {
			done, err := c.marker.MarkGet(ctx, home, mark)
			if err != nil || done {
				return err
			}
		}
	}
	bm, err := c.stepMessage(ix, s, st.Msg.message(), time.Now())
	if err != nil {
		return err
	}
	if _, err := c.drv.Enqueue(ctx, st.Queue, []backend.Message{bm}); err != nil {
		return fmt.Errorf("releasing step %q of workflow %s to queue %s: %w", st.Name, ix.m.ID, st.Queue, err)
	}
	if _, err := c.marker.MarkSet(ctx, home, "enq/"+st.Name, time.Time{}, true); err != nil {
		return err
	}
	if !won {
		c.opts.logger.Info("fila: workflow step released again after an earlier attempt of its dependency",
			slog.String("workflow", ix.m.ID), slog.String("step", st.Name), slog.String("queue", st.Queue))
	}
	return nil
}

// workflowAcks runs the bookkeeping of the workflow steps among ds (each
// locked by the caller), a few at a time, and returns one error per
// delivery (nil for those to ack).
func (c *Client) workflowAcks(ctx context.Context, ds []*Delivery) []error {
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, d := range ds {
		if d.Headers[HeaderWorkflow] == "" {
			continue
		}
		if errs == nil {
			errs = make([]error, len(ds))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.workflowAck(ctx, d)
		}()
	}
	wg.Wait()
	return errs
}
