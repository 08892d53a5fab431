package fila

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
)

// Delivery is a message received under a lease. Settle it exactly once with
// Ack, Retry or Dead; Extend keeps it invisible for longer while work goes on.
// Its methods are safe for concurrent use (a heartbeat may Extend while the
// handler runs).
type Delivery struct {
	ID      string
	Queue   string
	Kind    string
	Body    []byte
	Headers map[string]string
	// Attempt counts deliveries of this message, this one included: 1 on the
	// first delivery, more after retries, expired leases and crashes.
	Attempt int
	// MaxAttempts is the limit in force for this message.
	MaxAttempts int
	// EnqueuedAt is when the message was first enqueued.
	EnqueuedAt time.Time
	// LastError is the reason given by the latest Retry, if any (a Retry
	// with an empty reason, and Release, keep the one before).
	LastError string
	// Errors is the message's error history, oldest first, LastError's
	// entry last: the reasons of its latest retries, each with its attempt
	// and time, at most MaxErrorHistory of them (the earlier ones' reasons
	// cut to MaxEarlierReasonBytes). Nil when the message has none.
	Errors []AttemptError
	// DedupKey is the message's dedup key, if any.
	DedupKey string
	// Priority is the message's level (Message.Priority).
	Priority int

	c  *Client
	mu sync.Mutex
	// history is the error history as the driver stored it (encoded),
	// which Retry and Dead extend.
	history string
	// receipt identifies the lease; settled is set once Ack, Retry or Dead
	// succeeded or found the lease lost.
	receipt  string
	deadline time.Time
	settled  bool
	// cancelled is closed when a cancel of the message reaches the client;
	// nil when the driver cannot cancel.
	cancelled  chan struct{}
	cancelOnce sync.Once
	// flowSlot is the concurrency slot mark the delivery holds under its
	// queue's limits (flow.go), expiring at flowUntil; "" without one.
	flowSlot  string
	flowUntil time.Time
	// result is what SetResult left for a workflow step's dependants;
	// wfRan is set once its bookkeeping ran (workflow_ack.go).
	result []byte
	wfRan  bool
}

// Cancelled returns a channel that is closed when a cancel of this message
// (Client.MessageCancel, from any process) reaches this client, within the
// control interval (WithControlInterval). A handler can stop early on it;
// the worker cancels the handler's context. The channel is nil, so never
// ready, when the driver cannot cancel messages.
func (d *Delivery) Cancelled() <-chan struct{} { return d.cancelled }

func (d *Delivery) markCancelled() {
	if d.cancelled != nil {
		d.cancelOnce.Do(func() { close(d.cancelled) })
	}
}

func (d *Delivery) isCancelled() bool {
	if d.cancelled == nil {
		return false
	}
	select {
	case <-d.cancelled:
		return true
	default:
		return false
	}
}

func (c *Client) newDelivery(queue string, bd *backend.Delivery) *Delivery {
	max := bd.MaxAttempts
	if max == 0 {
		max = c.opts.maxAttempts
	}
	body := bd.Body
	if body == nil {
		body = []byte{}
	}
	lastError, errs := splitErrors(bd.LastError)
	d := &Delivery{
		ID: bd.ID, Queue: queue, Kind: bd.Kind, Body: body, Headers: bd.Headers,
		Attempt: bd.Attempt, MaxAttempts: max, EnqueuedAt: bd.EnqueuedAt,
		LastError: lastError, Errors: errs, DedupKey: bd.DedupKey, Priority: bd.Priority,
		c: c, receipt: bd.Receipt, history: bd.LastError, deadline: bd.Deadline,
	}
	if c.lister != nil {
		d.cancelled = make(chan struct{})
	}
	return d
}

// Deadline is when the lease ends unless extended.
func (d *Delivery) Deadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// Receipt is the opaque token of this lease.
func (d *Delivery) Receipt() string { return d.receipt }

func (d *Delivery) ref() backend.Ref {
	return backend.Ref{Queue: d.Queue, ID: d.ID, Receipt: d.receipt}
}

// settle runs op unless the delivery was already settled. A success or a lost
// lease marks it settled; other errors (a broken connection) leave it open so
// the caller may try again.
func (d *Delivery) settle(ctx context.Context, op func(ctx context.Context) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return ErrLeaseLost
	}
	err := d.c.call(ctx, op)
	if err == nil || err == ErrLeaseLost || isLeaseLost(err) || errors.Is(err, ErrCancelled) {
		d.settled = true
		d.c.settled(d)
	}
	return err
}

// Ack marks the message done; it is never delivered again. ErrLeaseLost
// means the lease had ended (someone else may be running the message) and
// nothing changed.
func (d *Delivery) Ack(ctx context.Context) error {
	return d.settle(ctx, func(ctx context.Context) error {
		if d.Headers[HeaderWorkflow] != "" {
			if err := d.c.workflowAck(ctx, d); err != nil {
				return err
			}
		}
		errs, err := d.c.drv.Ack(ctx, []backend.Ref{d.ref()})
		if err != nil {
			return err
		}
		if len(errs) == 1 {
			return errs[0]
		}
		return nil
	})
}

// Retry ends the lease and makes the message receivable again no earlier
// than delay from now, keeping reason as its last error, added to the
// message's error history (Errors) with this attempt and the time; an
// empty reason keeps the history as it was. The attempt count goes on;
// past max attempts the message is dead-lettered. A message that was
// cancelled (MessageCancel) is dead-lettered with reason ReasonCancelled
// instead, and Retry returns ErrCancelled.
func (d *Delivery) Retry(ctx context.Context, delay time.Duration, reason string) error {
	if err := validateDelay(delay, "retry delay"); err != nil {
		return err
	}
	reason = cleanReason(reason)
	// An empty reason keeps the stored history: the driver is given "".
	history, given := d.history, ""
	if reason != "" {
		history = withError(d.history, d.Attempt, time.Now(), reason)
		given = history
	}
	return d.settle(ctx, func(ctx context.Context) error {
		if err := d.deadIfCancelled(ctx, history); err != nil {
			return err
		}
		return d.c.drv.Retry(ctx, d.ref(), delay, given)
	})
}

// deadIfCancelled dead-letters a cancelled message instead of retrying it,
// with history (its stored error history, with the Retry's reason if it
// gave one) before ReasonCancelled: it returns ErrCancelled when it did,
// nil when the message was not cancelled.
func (d *Delivery) deadIfCancelled(ctx context.Context, history string) error {
	cancelled, err := d.c.cancelledNow(ctx, d)
	if err != nil {
		return err
	}
	if !cancelled {
		return nil
	}
	d.markCancelled()
	reason := withError(history, d.Attempt, time.Now(), ReasonCancelled)
	if err := d.c.drv.Dead(ctx, d.ref(), reason, d.Attempt); err != nil {
		return err
	}
	return ErrCancelled
}

// Release gives the message back at once without recording an error, for a
// consumer that received it but will not run it. The delivery still counts as
// an attempt. Like Retry, it dead-letters a cancelled message and returns
// ErrCancelled.
func (d *Delivery) Release(ctx context.Context) error {
	return d.settle(ctx, func(ctx context.Context) error {
		if err := d.deadIfCancelled(ctx, d.history); err != nil {
			return err
		}
		return d.c.drv.Retry(ctx, d.ref(), 0, "")
	})
}

// Dead moves the message to its queue's dead-letter store with reason,
// which the dead letter keeps as its Reason, after the message's earlier
// errors (DeadLetter.Errors). It is not delivered again unless replayed.
func (d *Delivery) Dead(ctx context.Context, reason string) error {
	if reason == "" {
		reason = "dead-lettered by consumer"
	}
	history := withError(d.history, d.Attempt, time.Now(), cleanReason(reason))
	return d.settle(ctx, func(ctx context.Context) error {
		return d.c.drv.Dead(ctx, d.ref(), history, d.Attempt)
	})
}

// Extend moves the lease deadline to now + lease while the lease is current.
func (d *Delivery) Extend(ctx context.Context, lease time.Duration) error {
	if err := validateLease(lease); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return ErrLeaseLost
	}
	var deadline time.Time
	err := d.c.call(ctx, func(ctx context.Context) error {
		var err error
		deadline, err = d.c.drv.Extend(ctx, d.ref(), lease)
		return err
	})
	if err != nil {
		if isLeaseLost(err) {
			d.settled = true
		}
		return err
	}
	d.deadline = deadline
	if d.flowSlot != "" && deadline.After(d.flowUntil) {
		// The concurrency slot lasts as long as the lease.
		until := deadline.Add(flowReceiveBound(lease))
		if _, err := d.c.marker.MarkSet(ctx, d.Queue, d.flowSlot, until, false); err != nil {
			d.c.opts.logger.Warn("fila: extending a concurrency slot failed; it may be taken by another client when it expires",
				slog.String("queue", d.Queue), slog.String("id", d.ID), slog.Any("error", err))
		} else {
			d.flowUntil = until
		}
	}
	return nil
}

// AckBatch acks many deliveries of one client in as few round trips as the
// driver allows. It returns nil when all were acked, otherwise an error
// joining one error per failed delivery (each wrapping ErrLeaseLost or the
// cause), so errors.Is(err, ErrLeaseLost) works.
func (c *Client) AckBatch(ctx context.Context, ds []*Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	cl, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer c.leave(cl)
	return c.ackDeliveries(ctx, cl.ctx, ds, c.drv.Ack)
}

// ackDeliveries is AckBatch within a call: it settles the live deliveries
// among ds with ack under cctx (the call's context; ctx is the caller's),
// holding each delivery's lock until the outcome is known. ack returns
// one error per ref, or an error alone when the outcome is unknown.
func (c *Client) ackDeliveries(ctx, cctx context.Context, ds []*Delivery,
	ack func(context.Context, []backend.Ref) ([]error, error)) error {
	var (
		refs []backend.Ref
		live []*Delivery
		errs []error
	)
	seen := make(map[*Delivery]bool, len(ds))
	for _, d := range ds {
		if seen[d] {
			errs = append(errs, deliveryErr(d, ErrLeaseLost))
			continue
		}
		seen[d] = true
		if d.c != c {
			errs = append(errs, invalidf("delivery %s was received by another client", d.ID))
			continue
		}
		d.mu.Lock() // held until the outcome is known, like Ack
		if d.settled {
			d.mu.Unlock()
			errs = append(errs, deliveryErr(d, ErrLeaseLost))
			continue
		}
		refs = append(refs, d.ref())
		live = append(live, d)
	}
	locked := live
	defer func() {
		for _, d := range locked {
			d.mu.Unlock()
		}
	}()
	if wfErrs := c.workflowAcks(cctx, live); wfErrs != nil {
		// Steps whose bookkeeping failed are not acked; those of a
		// cancelled workflow were dead-lettered.
		keep := refs[:0:0]
		kept := live[:0:0]
		for i, d := range live {
			switch e := wfErrs[i]; {
			case e == nil:
				keep = append(keep, refs[i])
				kept = append(kept, d)
			case errors.Is(e, ErrCancelled) || isLeaseLost(e):
				d.settled = true
				c.settled(d)
				errs = append(errs, deliveryErr(d, e))
			default:
				errs = append(errs, deliveryErr(d, c.done(ctx, e)))
			}
		}
		refs, live = keep, kept
	}
	if len(refs) > 0 {
		per, err := ack(cctx, refs)
		if err != nil {
			return c.done(ctx, err)
		}
		for i, d := range live {
			var e error
			if i < len(per) {
				e = per[i]
			}
			if e == nil || isLeaseLost(e) {
				d.settled = true
				c.settled(d)
			}
			if e != nil {
				errs = append(errs, deliveryErr(d, e))
			}
		}
	}
	return joinErrors(errs)
}
