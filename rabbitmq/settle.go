package rabbitmq

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/fila-go/fila/backend"
)

// Receipts are "<instance>.<channel generation>.<delivery tag>": a lease is
// current while this instance still has that delivery, unsettled, on that
// channel incarnation. A receipt of another instance, of a dead channel, or
// of a delivery already settled or expired is not current (ErrLeaseLost).
func (d *Driver) receipt(gen, tag uint64) string {
	return d.nonce + "." + strconv.FormatUint(gen, 36) + "." + strconv.FormatUint(tag, 36)
}

func (d *Driver) parseReceipt(r string) (gen, tag uint64, ok bool) {
	rest, found := strings.CutPrefix(r, d.nonce+".")
	if !found {
		return 0, 0, false
	}
	g, t, found := strings.Cut(rest, ".")
	if !found {
		return 0, 0, false
	}
	gen, err1 := strconv.ParseUint(g, 36, 64)
	tag, err2 := strconv.ParseUint(t, 36, 64)
	return gen, tag, err1 == nil && err2 == nil
}

// leaseLocked finds the current lease of ref: this instance still holds the
// delivery on that channel, unsettled, and its deadline has not passed (the
// janitor gives it back a moment later).
func (p *puller) leaseLocked(ref backend.Ref) (*chanState, *entry, bool) {
	gen, tag, ok := p.d.parseReceipt(ref.Receipt)
	cs := p.cs
	if !ok || cs == nil || cs.gen != gen {
		return nil, nil, false
	}
	e := cs.entries[tag]
	if e == nil || !e.leased || e.busy || e.dv.MessageId != ref.ID || !time.Now().Before(e.deadline) {
		return nil, nil, false
	}
	return cs, e, true
}

// Ack acks the current leases among refs: one basic.ack with multiple=true
// when they are exactly the channel's oldest unsettled deliveries, else one
// basic.ack each (acks have no reply in AMQP, so either way it is one
// write). Acks of one queue go on the channel its deliveries came from.
func (d *Driver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	errs := make([]error, len(refs))
	byQueue := map[string][]int{}
	for i, r := range refs {
		byQueue[r.Queue] = append(byQueue[r.Queue], i)
	}
	for queue, idx := range byQueue {
		p := d.existingPuller(queue)
		if p == nil {
			for _, i := range idx {
				errs[i] = backend.ErrLeaseLost
			}
			continue
		}
		if err := p.ack(refs, idx, errs); err != nil {
			return nil, mapErr(ctx, "ack", err)
		}
	}
	return errs, nil
}

func (p *puller) ack(refs []backend.Ref, idx []int, errs []error) error {
	p.quiesce(settleIdle)
	p.mu.Lock()
	defer p.mu.Unlock()
	var cs *chanState
	tags := make([]uint64, 0, len(idx))
	for _, i := range idx {
		c, e, ok := p.leaseLocked(refs[i])
		if !ok {
			errs[i] = backend.ErrLeaseLost
			continue
		}
		cs = c
		cs.removeLocked(e)
		tags = append(tags, e.dv.DeliveryTag)
	}
	if cs == nil {
		return nil
	}
	defer p.freedLocked(cs)
	return cs.ackLocked(tags)
}

// Extend moves the lease deadline; the driver's janitor rejects the
// delivery with requeue once it passes.
func (d *Driver) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	p := d.existingPuller(ref.Queue)
	if p == nil {
		return time.Time{}, backend.ErrLeaseLost
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, e, ok := p.leaseLocked(ref)
	if !ok {
		return time.Time{}, backend.ErrLeaseLost
	}
	e.deadline = time.Now().Add(lease)
	return e.deadline, nil
}

// Retry without delay nor reason (Release, and the portable layer's
// give-backs) is basic.reject with requeue: one frame, so a crash at any
// moment leaves the message in the queue exactly once, unchanged (its last
// error kept), and the quorum queue counts the delivery. Otherwise Retry
// publishes a copy of the message (confirmed) to the delay queue of delay,
// or straight to the main queue for no delay, of the message's level,
// carrying its attempt count and last error, then acks the original (see
// republish for a crash in between). A message taken early by
// ReceiveDelayed waits at least until its run-at.
func (d *Driver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	if delay <= 0 && reason == "" {
		if done, err := d.requeue(ctx, ref); done {
			return err
		}
	}
	level := 0
	err := d.republish(ctx, ref, "retry", func(s *session, p *puller, e *entry) (pubItem, error) {
		pub := copyOf(&e.dv)
		pub.Headers[hAttempts] = int64(e.attempt)
		if reason != "" {
			pub.Headers[hLastError] = reason
		}
		delete(pub.Headers, hRunAt)
		level = levelOf(pub.Headers)
		now := time.Now()
		at := now.Add(delay)
		if at.Before(e.runAt) { // taken early by ReceiveDelayed: never ready before its run-at
			at = e.runAt
		}
		if at.After(now) {
			setRunAt(&pub, at)
		}
		key, err := s.delayKeyAt(ctx, p.queue, p.n, level, at)
		if err != nil {
			return pubItem{}, err
		}
		return pubItem{key: key, msg: pub, queue: p.queue}, nil
	})
	if err == nil && level > 0 {
		d.levelBell(ref.Queue)
	}
	return err
}

// requeue gives a leased message back to its queue with basic.reject and
// requeue. It reports false, doing nothing, for a message ReceiveDelayed
// took from a delay queue (a reject would put it back there, or early into
// the main queue), which Retry republishes.
func (d *Driver) requeue(ctx context.Context, ref backend.Ref) (bool, error) {
	p := d.existingPuller(ref.Queue)
	if p == nil {
		return true, backend.ErrLeaseLost
	}
	// With no Receive waiting here, the consumer goes first: the freed
	// credit, or credit it had left, would pull the message straight back
	// into a buffer nobody reads.
	p.quiesce(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	cs, e, ok := p.leaseLocked(ref)
	if !ok {
		return true, backend.ErrLeaseLost
	}
	if e.cons == cs.gets || !e.runAt.IsZero() {
		return false, nil
	}
	cs.removeLocked(e)
	defer p.freedLocked(cs)
	return true, mapErr(ctx, "reject", cs.ch.Reject(e.dv.DeliveryTag, true))
}

// Dead publishes a copy of the message (confirmed) with its reason,
// attempts and time to the queue's dead-letter exchange, then acks the
// original.
func (d *Driver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	return d.republish(ctx, ref, "dead-letter", func(s *session, p *puller, e *entry) (pubItem, error) {
		pub := copyOf(&e.dv)
		pub.Headers[hAttempts] = int64(attempts)
		pub.Headers[hReason] = reason
		pub.Headers[hDeadAt] = time.Now().UnixMilli()
		delete(pub.Headers, hRunAt)
		return pubItem{exchange: p.n.dead, msg: pub, queue: p.queue}, nil
	})
}

// republish is Retry and Dead: it holds the lease busy (the janitor leaves it
// alone) while the copy is published, then acks the original. If the
// publish fails the lease stays as it was and the error is returned; if the
// channel died meanwhile the broker has requeued the original, and the copy
// makes a duplicate (at-least-once). That window, between the broker's
// confirm of the copy and the write of the ack, holds no round trip: an
// idle consumer is cancelled (quiesce) before the publish, not in it. Only
// AMQP transactions on the consumer's channel would close it, at the price
// of a round trip per ack on that channel (see doc.go).
func (d *Driver) republish(ctx context.Context, ref backend.Ref, op string, build func(*session, *puller, *entry) (pubItem, error)) error {
	p := d.existingPuller(ref.Queue)
	if p == nil {
		return backend.ErrLeaseLost
	}
	p.mu.Lock()
	cs, e, ok := p.leaseLocked(ref)
	if ok {
		e.busy = true
	}
	p.mu.Unlock()
	if !ok {
		return backend.ErrLeaseLost
	}
	p.quiesce(0)
	err := func() error {
		s, err := d.session(ctx, d.opts.ReconnectWait)
		if err != nil {
			return err
		}
		item, err := build(s, p, e)
		if err != nil {
			return err
		}
		return s.publish(ctx, []pubItem{item})
	}()
	if err == nil && d.afterRepublish != nil {
		d.afterRepublish()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs != cs {
		if err == nil {
			d.log.Warn("rabbitmq: the channel of a delivery closed while settling it; the message may be delivered twice",
				slog.String("queue", ref.Queue), slog.String("id", ref.ID), slog.String("op", op))
			return nil
		}
		return backend.ErrLeaseLost
	}
	if err != nil {
		e.busy = false
		return mapErr(ctx, op, err)
	}
	cs.removeLocked(e)
	defer p.freedLocked(cs)
	return mapErr(ctx, "ack after "+op, cs.ackLocked([]uint64{e.dv.DeliveryTag}))
}
