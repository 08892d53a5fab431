package memory

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
)

// Driver is one connection to a Broker. It implements backend.Driver and
// every optional capability.
type Driver struct {
	b         *Broker
	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.Deduper      = (*Driver)(nil)
	_ backend.DeadLetterer = (*Driver)(nil)
	_ backend.StatsReader  = (*Driver)(nil)
	_ backend.TxEnqueuer   = (*Driver)(nil)
	_ backend.Namer        = (*Driver)(nil)

	_ backend.DelayedReceiver = (*Driver)(nil)
	_ backend.DeadImporter    = (*Driver)(nil)
	_ backend.QueueLister     = (*Driver)(nil)
	_ backend.QueueDeleter    = (*Driver)(nil)
	_ backend.Marker          = (*Driver)(nil)
	_ backend.MarkLister      = (*Driver)(nil)
)

// DriverName returns "memory".
func (d *Driver) DriverName() string { return "memory" }

// DedupKeys reports true: the memory driver enforces dedup keys.
func (d *Driver) DedupKeys() bool { return true }

// Priorities reports true: a claim takes the higher levels first
// (backend.Prioritizer).
func (d *Driver) Priorities() bool { return true }

func (d *Driver) check(ctx context.Context) error {
	select {
	case <-d.closed:
		return backend.ErrClosed
	default:
	}
	return ctx.Err()
}

// Close closes this driver instance. Its leases are left to expire.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	return nil
}

// Enqueue stores msgs atomically.
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	res := b.insertLocked(queue, msgs)
	b.wakeLocked()
	return res, nil
}

// insertLocked stores msgs, skipping those whose dedup key is held.
func (b *Broker) insertLocked(queue string, msgs []backend.Message) []backend.EnqueueResult {
	q := b.queueLocked(queue)
	now := b.clock.Now()
	res := make([]backend.EnqueueResult, len(msgs))
	for i := range msgs {
		m := msgs[i]
		if m.DedupKey != "" {
			if holder, ok := q.dedup[m.DedupKey]; ok {
				res[i] = backend.EnqueueResult{ID: holder, Duplicate: true}
				continue
			}
			q.dedup[m.DedupKey] = m.ID
		}
		b.seq++
		m = cloneMessage(m) // the caller may reuse its buffers
		q.msgs[m.ID] = &msg{Message: m, seq: b.seq, due: m.Due(now), attempts: m.Attempts}
		res[i] = backend.EnqueueResult{ID: m.ID}
	}
	return res
}

// Receive claims up to p.Max receivable messages, blocking until there is one.
func (d *Driver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	b := d.b
	for {
		if err := d.check(ctx); err != nil {
			return nil, err
		}
		b.mu.Lock()
		out, next := b.claimLocked(queue, p)
		changed := b.changed
		b.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		var timer <-chan time.Time
		if !next.IsZero() {
			timer = b.clock.After(next.Sub(b.clock.Now()))
		}
		select {
		case <-changed:
		case <-timer:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.closed:
			return nil, backend.ErrClosed
		}
	}
}

// claimLocked leases up to p.Max messages, the highest priority first, then
// the oldest receivable (claimsBefore). When it finds none it returns when
// the next one becomes receivable (zero: never).
func (b *Broker) claimLocked(queue string, p backend.ReceiveParams) ([]backend.Delivery, time.Time) {
	q := b.queues[queue]
	if q == nil {
		return nil, time.Time{}
	}
	now := b.clock.Now()
	// Keep the p.Max earliest receivable messages in a bounded max-heap
	// (the latest of them at the root): one pass over the queue, O(n log
	// Max), instead of sorting every ready message on each claim.
	want := max(p.Max, 1)
	ready := make([]*msg, 0, min(want, len(q.msgs)))
	var next time.Time
	for _, m := range q.msgs {
		at := m.receivableAt()
		switch {
		case at.After(now):
			if next.IsZero() || at.Before(next) {
				next = at
			}
		case len(ready) < want:
			ready = append(ready, m)
			siftUp(ready, len(ready)-1)
		case claimsBefore(m, ready[0]):
			ready[0] = m
			siftDown(ready, 0)
		}
	}
	if len(ready) == 0 {
		return nil, next
	}
	slices.SortFunc(ready, func(x, y *msg) int {
		switch {
		case claimsBefore(x, y):
			return -1
		case claimsBefore(y, x):
			return 1
		}
		return 0
	})
	out := make([]backend.Delivery, len(ready))
	for i, m := range ready {
		b.tokens++
		m.token = strconv.FormatInt(b.tokens, 36)
		m.deadline = now.Add(p.Lease)
		m.attempts++
		out[i] = m.delivery()
	}
	return out, time.Time{}
}

// claimsBefore reports whether a is claimed before b, both receivable: the
// higher priority first, then the oldest receivable, then in enqueue order.
func claimsBefore(a, b *msg) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	ai, bi := a.receivableAt(), b.receivableAt()
	if !ai.Equal(bi) {
		return ai.Before(bi)
	}
	return a.seq < b.seq
}

// siftUp and siftDown keep h a heap whose root is claimed last.
func siftUp(h []*msg, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !claimsBefore(h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func siftDown(h []*msg, i int) {
	for {
		last, l := i, 2*i+1
		if l < len(h) && claimsBefore(h[last], h[l]) {
			last = l
		}
		if r := l + 1; r < len(h) && claimsBefore(h[last], h[r]) {
			last = r
		}
		if last == i {
			return
		}
		h[i], h[last] = h[last], h[i]
		i = last
	}
}

func (m *msg) delivery() backend.Delivery {
	return backend.Delivery{
		Message: cloneMessage(m.Message), Attempt: m.attempts, Receipt: m.token,
		Deadline: m.deadline, LastError: m.lastError,
	}
}

// cloneMessage returns m with its own copies of the body and headers. The
// broker stores and hands out copies only, so neither a producer reusing its
// buffer nor a consumer changing what it received changes a stored message.
func cloneMessage(m backend.Message) backend.Message {
	m.Body = bytes.Clone(m.Body) // an empty body stays non-nil
	if m.Headers != nil {
		m.Headers = maps.Clone(m.Headers)
	}
	return m
}

// leasedLocked returns the message ref names if ref's receipt is its
// current lease: the latest one, and its deadline has not passed (whether or
// not the message was claimed again since).
func (b *Broker) leasedLocked(ref backend.Ref) (*queue, *msg, error) {
	q := b.queues[ref.Queue]
	if q == nil {
		return nil, nil, backend.ErrLeaseLost
	}
	m := q.msgs[ref.ID]
	if m == nil || m.token == "" || m.token != ref.Receipt || !m.deadline.After(b.clock.Now()) {
		return nil, nil, backend.ErrLeaseLost
	}
	return q, m, nil
}

func (q *queue) removeLocked(m *msg) {
	delete(q.msgs, m.ID)
	if m.DedupKey != "" && q.dedup[m.DedupKey] == m.ID {
		delete(q.dedup, m.DedupKey)
	}
}

// Ack deletes the messages whose receipts are current.
func (d *Driver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ackLocked(refs), nil
}

func (b *Broker) ackLocked(refs []backend.Ref) []error {
	errs := make([]error, len(refs))
	for i, ref := range refs {
		q, m, err := b.leasedLocked(ref)
		if err != nil {
			errs[i] = err
			continue
		}
		q.removeLocked(m)
	}
	return errs
}

// AckReceive acks refs and claims what of queue is ready, under one lock
// (backend.AckReceiver).
func (d *Driver) AckReceive(ctx context.Context, refs []backend.Ref, queue string, p backend.ReceiveParams) ([]error, []backend.Delivery, error) {
	if err := d.check(ctx); err != nil {
		return nil, nil, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := b.ackLocked(refs)
	out, _ := b.claimLocked(queue, p)
	return errs, out, nil
}

// Retry makes the message ready again after delay.
func (d *Driver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	_, m, err := b.leasedLocked(ref)
	if err != nil {
		return err
	}
	m.token, m.deadline = "", time.Time{}
	// A message taken early (ReceiveDelayed) keeps its run-at.
	if due := b.clock.Now().Add(delay); due.After(m.due) {
		m.due = due
	}
	if reason != "" {
		m.lastError = reason
	}
	b.wakeLocked()
	return nil
}

// Dead moves the message to the queue's dead letters.
func (d *Driver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	q, m, err := b.leasedLocked(ref)
	if err != nil {
		return err
	}
	q.removeLocked(m)
	b.seq++
	dl := backend.DeadLetter{Message: m.Message, Queue: ref.Queue, Attempts: attempts, Reason: reason, DeadAt: b.clock.Now()}
	q.dead = append(q.dead, &deadEntry{DeadLetter: dl, seq: b.seq})
	return nil
}

// Extend moves the lease deadline to now + lease.
func (d *Driver) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	if err := d.check(ctx); err != nil {
		return time.Time{}, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	_, m, err := b.leasedLocked(ref)
	if err != nil {
		return time.Time{}, err
	}
	m.deadline = b.clock.Now().Add(lease)
	return m.deadline, nil
}
