package rabbitmq

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// allBuckets lists every delay queue length bucketMS can pick: 1..99 ms,
// then two significant digits times each power of ten, and maxBucketMS
// (about 740 names).
var allBuckets = sync.OnceValue(func() []int64 {
	var out []int64
	for ms := int64(1); ms < 100; ms++ {
		out = append(out, ms)
	}
	for scale := int64(10); scale < maxBucketMS; scale *= 10 {
		for m := int64(10); m < 100; m++ {
			if v := m * scale; v < maxBucketMS {
				out = append(out, v)
			}
		}
	}
	return append(out, maxBucketMS)
})

// probeWorkers is how many throwaway channels probe delay queues at once.
const probeWorkers = 16

// delayQueue is a delay queue found by probe.
type delayQueue struct {
	ms    int64
	ready int
}

// probeDelays finds the delay queues of level l of n that exist, with
// their ready counts. Without the management plugin queues cannot be
// listed, but the possible names are finite: each is declared passively. A
// passive declare of a missing queue closes its channel, so the probes run
// on throwaway channels (reopened after each miss), several at once.
func (s *session) probeDelays(ctx context.Context, n names, l int) ([]delayQueue, error) {
	cands := allBuckets()
	found := make([]int, len(cands)) // -1 missing, else ready count
	var next atomic.Int64
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	for w := 0; w < probeWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ch *amqp.Channel
			defer func() {
				if ch != nil {
					_ = ch.Close()
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cands) {
					return
				}
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				if ch == nil {
					var err error
					if ch, err = s.conn.Channel(); err != nil {
						fail(err)
						return
					}
				}
				q, err := ch.QueueDeclarePassive(n.delayAt(l, cands[i]), true, false, false, false, nil)
				var ae *amqp.Error
				switch {
				case err == nil:
					found[i] = q.Messages
				case errors.As(err, &ae) && ae.Code == amqp.NotFound:
					found[i] = -1
					ch = nil // the broker closed it
				default:
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, mapErr(ctx, "probe delay queues", firstErr)
	}
	var out []delayQueue
	for i, c := range found {
		if c >= 0 {
			out = append(out, delayQueue{ms: cands[i], ready: c})
		}
	}
	return out, nil
}

// ReceiveDelayed takes, without blocking, up to p.Max messages waiting in
// queue's delay queues, of every level (found by probing every possible
// delay queue name, see probeDelays, of level 0 and of each level whose
// queue exists) with basic.get on the puller's channel, and leases them
// like Receive does: Ack acks them there, Retry and Release keep their
// run-at (the copy waits for the later of its run-at and the retry delay,
// at the message's level), Dead dead-letters them, and an expired lease
// rejects them with requeue back into their delay queue. The leases start
// when the call returns. The delay queues this instance knows are tried
// first; the probe runs only when they hold fewer than p.Max messages, so
// an empty result always comes after a full probe. Messages that reached
// their main queue a moment before their run-at (by bucket rounding) and
// are hopping to a shorter delay queue are not seen.
func (d *Driver) ReceiveDelayed(ctx context.Context, queue string, rp backend.ReceiveParams) ([]backend.Delivery, error) {
	p, err := d.puller(queue)
	if err != nil {
		return nil, err
	}
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return nil, err
	}
	if err := s.declare(ctx, queue, p.n); err != nil {
		return nil, err
	}
	want := max(rp.Max, 1)
	// Messages taken are held (not leased yet: the janitor leaves them
	// alone) until the call returns, when their leases start. A lease that
	// started at the take could expire during the probe that follows, and
	// the message would be taken again and returned twice.
	var taken []heldGet
	take := func(b bucket) error {
		for len(taken) < want {
			h, ok, err := p.getHeld(ctx, p.n.delayAt(b.level, b.ms), true)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			taken = append(taken, h)
		}
		return nil
	}
	// On an error the messages taken so far go back to their delay queues.
	finish := func(err error) ([]backend.Delivery, error) {
		p.release(taken)
		return nil, err
	}
	// The delay queues this instance knows first: when they hold enough,
	// the probe of every possible name is not needed.
	for _, b := range d.buckets(queue) {
		c, err := s.count(ctx, p.n.delayAt(b.level, b.ms))
		if err != nil {
			return finish(err)
		}
		if c > 0 {
			if err := take(b); err != nil {
				return finish(err)
			}
		}
		if len(taken) >= want {
			return p.lease(taken, rp.Lease), nil
		}
	}
	// A level's delay queues exist only beside its queue (declareDelayAt).
	mask, err := s.existingLevels(ctx, p.n)
	if err != nil {
		return finish(err)
	}
	d.noteLevels(queue, mask)
	mask |= d.levelMask(queue)
	for l := 0; l <= backend.MaxPriority; l++ {
		if l > 0 && mask&(1<<l) == 0 {
			continue
		}
		dqs, err := s.probeDelays(ctx, p.n, l)
		if err != nil {
			return finish(err)
		}
		for _, dq := range dqs {
			b := bucket{level: l, ms: dq.ms}
			d.rememberBucket(queue, b)
			if dq.ready > 0 && len(taken) < want {
				if err := take(b); err != nil {
					return finish(err)
				}
			}
		}
	}
	return p.lease(taken, rp.Lease), nil
}

// heldGet is a message ReceiveDelayed took and holds until it returns.
type heldGet struct {
	cs *chanState
	e  *entry
}

// getHeld takes one message from the queue name with basic.get on the
// puller's channel and holds it: it is recorded as a delivery of the
// channel, busy so that the janitor leaves it alone, until lease or release
// (or hop). delayed says name is a delay queue (ReceiveDelayed): the
// message keeps its run-at, and Retry never rejects it back there; else it
// is a level queue (takeLevels), where a reject returns it.
func (p *puller) getHeld(ctx context.Context, name string, delayed bool) (heldGet, bool, error) {
	p.mu.Lock()
	cs, closed := p.cs, p.closed
	p.mu.Unlock()
	if closed {
		return heldGet{}, false, backend.ErrClosed
	}
	if cs == nil {
		p.ensureMu.Lock()
		p.mu.Lock()
		cs, closed = p.cs, p.closed
		p.mu.Unlock()
		if closed {
			p.ensureMu.Unlock()
			return heldGet{}, false, backend.ErrClosed
		}
		if cs == nil {
			var err error
			if cs, err = p.open(ctx); err != nil {
				p.ensureMu.Unlock()
				return heldGet{}, false, err
			}
		}
		p.ensureMu.Unlock()
	}
	var dv amqp.Delivery
	var ok bool
	err := cs.call(func() error {
		var err error
		dv, ok, err = cs.ch.Get(name, false)
		if ok {
			// Recorded under callMu (see sweep).
			p.mu.Lock()
			if p.cs == cs {
				cs.noteTagLocked(dv.DeliveryTag)
			}
			p.mu.Unlock()
		}
		return err
	})
	if err != nil {
		return heldGet{}, false, mapErr(ctx, "get a message from "+name, err)
	}
	if !ok {
		return heldGet{}, false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs != cs {
		return heldGet{}, false, backend.ErrUnavailable
	}
	adopt(&dv, p.queue)
	stand := &cs.lgets
	if delayed {
		stand = &cs.gets
	}
	if *stand == nil {
		*stand = &consumer{}
	}
	e := &entry{dv: dv, cons: *stand, leased: true, busy: true, attempt: p.priorLocked(&dv) + 1}
	if ms := intHeader(dv.Headers, hRunAt); ms != 0 && delayed {
		e.runAt = time.UnixMilli(ms)
	}
	tag := dv.DeliveryTag
	cs.entries[tag] = e
	cs.order = append(cs.order, tag) // maybe out of tag order: see multipleOKLocked
	(*stand).outstanding++
	return heldGet{cs: cs, e: e}, true, nil
}

// lease starts the leases of the held messages now and returns their
// deliveries. Messages whose channel died meanwhile are left out: the broker
// put them back in their delay queues.
func (p *puller) lease(held []heldGet, lease time.Duration) []backend.Delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]backend.Delivery, 0, len(held))
	for _, h := range held {
		cs, e := h.cs, h.e
		if p.cs != cs || cs.entries[e.dv.DeliveryTag] != e {
			continue
		}
		e.busy = false
		e.deadline = now.Add(lease)
		out = append(out, backend.Delivery{
			Message:   decode(&e.dv),
			Attempt:   e.attempt,
			Receipt:   p.d.receipt(cs.gen, e.dv.DeliveryTag),
			Deadline:  e.deadline,
			LastError: strHeader(e.dv.Headers, hLastError),
		})
	}
	return out
}

// release gives held messages back at once: their leases end now, so the
// janitor rejects them with requeue into their delay queues (classic delay
// queues do not count the delivery).
func (p *puller) release(held []heldGet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for _, h := range held {
		h.e.busy = false
		h.e.deadline = now
	}
}

// DeadImport publishes letters (confirmed, persistent) to queue's
// dead-letter exchange in the format Dead uses, skipping those whose id
// the dead queue already holds. Checking means reading the whole dead
// queue as DeadList does: one round trip per dead letter already there.
func (d *Driver) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	if err := s.declare(ctx, queue, n); err != nil {
		return err
	}
	sc, err := d.scanDead(ctx, s, queue, n, nil)
	if err != nil {
		return err
	}
	// The scan's lock is held until the letters are published (then the
	// scanned ones go back in their places): two imports take turns, and
	// neither stores a letter the other stored.
	defer sc.close()
	have := make(map[string]bool, len(sc.letters)+len(letters))
	for _, l := range sc.letters {
		have[l.ID] = true
	}
	var items []pubItem
	now := time.Now()
	for i := range letters {
		l := &letters[i]
		if have[l.ID] {
			continue
		}
		have[l.ID] = true
		m := l.Message
		m.RunAt, m.Delay = time.Time{}, 0
		pub := encode(&m)
		pub.Headers[hAttempts] = int64(l.Attempts)
		pub.Headers[hReason] = l.Reason
		deadAt := l.DeadAt
		if deadAt.IsZero() {
			deadAt = now
		}
		pub.Headers[hDeadAt] = deadAt.UnixMilli()
		items = append(items, pubItem{exchange: n.dead, msg: pub, queue: queue})
	}
	if len(items) == 0 {
		return nil
	}
	return mapErr(ctx, "import dead letters", s.publish(ctx, items))
}
