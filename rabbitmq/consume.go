package rabbitmq

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/outagelog"
)

// puller is the consumer side of one Fila queue in one driver instance: a
// channel of its own (acks must go on the channel a delivery came from), at
// most one active consumer on it, the buffer of pushed messages no caller has
// received yet, and the client-side leases of the received ones.
//
// Demand-driven prefetch: a consumer is started when a Receive finds the
// buffer empty, with a prefetch equal to the sum of the Max of the waiting
// Receive calls (capped by Options.MaxPrefetch). Unacked messages count
// against a consumer's prefetch, leased ones included. A Receive that finds
// the credit used up by leases first waits a moment (creditGrace) for a
// settlement to give it back, as a worker's ack does just after its loop
// asks for more; if none comes, or the consumer is smaller than the demand,
// it is replaced by a fresh one (the old one is cancelled; its deliveries
// stay ackable on the channel). When messages sit
// in the buffer with no Receive waiting for Options.BufferIdle they are
// given back (basic.nack with requeue, after the consumer is cancelled), so
// an idle client does not sit on messages other consumers could take.
type puller struct {
	d     *Driver
	queue string
	n     names

	ensureMu sync.Mutex     // serializes consumer (re)starts and parking
	outage   *outagelog.Log // failures to start a consumer

	mu            sync.Mutex
	cs            *chanState
	waiters       int
	demand        int
	noWaiterSince time.Time     // when the last waiting Receive left; zero while one waits
	graceMissed   time.Time     // when a Receive last waited creditGrace for credit in vain
	graceMisses   int           // such waits in vain in a row
	wake          chan struct{} // closed (and replaced) when waiters should look again
	parking       bool
	closed        bool
	starting      *startCall // the consumer start under way, nil when none
	// levelHint changes when waiting Receive calls should look at the
	// queue's levels at once (levelBell), and levelCheckAt is when one last
	// did (see levels.go).
	levelHint    uint64
	levelCheckAt time.Time

	// returned holds, by message id, the messages that went back to the
	// queue from this puller's buffer without being handed out (see
	// noteReturnedLocked), so that their next delivery here does not show
	// an attempt nobody made.
	returned map[string]returnRec

	// countCh is the channel of the level queues' passive declares
	// (countLevel), on the connection countSess.
	countMu   sync.Mutex
	countCh   *amqp.Channel
	countSess *session
}

// startCall is one run of ensure in the background, shared by every Receive
// that needs a consumer while it runs.
type startCall struct {
	done chan struct{} // closed when ensure returned
	err  error         // its result, set before done is closed
}

// chanState is one incarnation of a puller's channel. Everything in it dies
// with the channel: RabbitMQ requeues the channel's unacked messages and the
// leases on them are lost.
type chanState struct {
	ch     *amqp.Channel
	gen    uint64
	callMu sync.Mutex // serializes synchronous methods on ch

	cons    *consumer         // the active consumer, nil when none
	buf     []*entry          // pushed, not yet received, in delivery order
	entries map[uint64]*entry // every delivery not yet acked or rejected, by tag
	order   []uint64          // their tags in delivery order (settled ones removed lazily)
	seen    uint64            // deliveries received on ch
	qos     int               // the prefetch last set with basic.qos on ch (0: none yet)
	maxTag  uint64            // highest delivery tag received on ch
	// holes are the tags below maxTag not received (yet): deliveries of
	// interleaved consumers or gets still on their way, or deliveries amqp091
	// dropped because their consumer was cancelled (see sweep).
	holes map[uint64]struct{}
	// live are the consumers whose deliveries may still arrive: their
	// goroutines have not ended.
	live map[*consumer]struct{}
	// gets stands for the messages ReceiveDelayed took with basic.get on
	// ch (they count against no consumer's prefetch); non-nil once it did.
	gets *consumer
	// lgets stands likewise for the messages Receive took from level
	// queues (see takeLevels).
	lgets *consumer
}

type consumer struct {
	tag         string
	prefetch    int
	outstanding int // delivered and not yet acked or rejected
	pushed      int // delivered, ever
	done        chan struct{}
}

// entry is one delivery not yet settled with the broker.
type entry struct {
	dv       amqp.Delivery
	cons     *consumer
	leased   bool
	busy     bool // a settlement, hop or give-back is publishing its copy
	attempt  int
	deadline time.Time
	runAt    time.Time // for a message taken early by ReceiveDelayed: its run-at
}

// returnRec is a message that went back to its queue unseen: its count of
// prior attempts when it was buffered, and how many such returns since.
type returnRec struct {
	base, returns int
}

// maxReturned bounds a puller's returned records. When it is full, a record
// is dropped at random: that message's next delivery here may then show one
// attempt more than it had, as it would on another client.
const maxReturned = 4096

// noteReturnedLocked records that e's message, never handed out, went back
// to its queue: given back (basic.nack with requeue), or requeued by the
// broker when its channel closed. A quorum queue counts a channel's death in
// x-delivery-count, and RabbitMQ before 4.3 counts a nack too: the message
// comes back showing a delivery that no Receive made. When it comes back to
// this puller with exactly the count the returns explain, priorLocked takes
// them off; a count that differs (another client received it, failed or
// crashed meanwhile, or the broker did not count the return) is taken as
// it is.
func (p *puller) noteReturnedLocked(e *entry) {
	id := e.dv.MessageId
	if id == "" {
		return
	}
	raw := priorAttempts(&e.dv)
	r, ok := p.returned[id]
	if ok && raw == r.base+r.returns {
		r.returns++
	} else {
		r = returnRec{base: raw, returns: 1}
	}
	if p.returned == nil {
		p.returned = map[string]returnRec{}
	}
	if _, had := p.returned[id]; !had && len(p.returned) >= maxReturned {
		for k := range p.returned {
			delete(p.returned, k)
			break
		}
	}
	p.returned[id] = r
}

// priorLocked is how many deliveries dv's message had before this one
// (priorAttempts), without the returns noteReturnedLocked recorded when its
// count is what they explain. The record goes: dv is now handed out or
// republished.
func (p *puller) priorLocked(dv *amqp.Delivery) int {
	raw := priorAttempts(dv)
	r, ok := p.returned[dv.MessageId]
	if !ok {
		return raw
	}
	delete(p.returned, dv.MessageId)
	if raw == r.base+r.returns {
		return r.base
	}
	return raw
}

// noteBufferLostLocked records the buffered messages of cs, whose channel
// closed, as returned, and empties the buffer.
func (p *puller) noteBufferLostLocked(cs *chanState) {
	for _, e := range cs.buf {
		p.noteReturnedLocked(e)
	}
	clear(cs.buf)
	cs.buf = nil
}

func newPuller(d *Driver, queue string, n names) *puller {
	return &puller{d: d, queue: queue, n: n, wake: make(chan struct{}), outage: outagelog.New(d.log)}
}

func (p *puller) broadcastLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Receive hands out up to p.Max buffered messages, starting a consumer when
// the buffer is empty, and blocks until one arrives or ctx ends.
func (d *Driver) Receive(ctx context.Context, queue string, rp backend.ReceiveParams) ([]backend.Delivery, error) {
	p, err := d.puller(queue)
	if err != nil {
		return nil, err
	}
	return p.receive(ctx, max(rp.Max, 1), rp.Lease)
}

// receive is Receive on one puller.
//
// Cancellation (contract: cancellation): the broker pushes messages into the
// puller's buffer, not into a Receive call, so a call whose context ends
// abandons nothing. Every wait (for a delivery, for credit, for a consumer
// start, gathering a burst) ends at once with ctx.Err(); the messages that
// arrive meanwhile stay buffered, owned by the puller, for the next Receive,
// and go back to the queue after Options.BufferIdle if none comes (park). A
// claim is only takeLocked, which leases buffered messages under p.mu
// without waiting; what it took is always returned with a nil error, even
// when ctx ended at that moment (the portable layer gives it back). The
// consumer start a call began goes on in the background after it returned
// (ensureAsync).
//
// Levels (see levels.go): on a queue with levels above 0, the call first
// takes what the level queues hold, highest first, and hands out level 0
// only after it looked at them since it last waited. Waiting, it looks
// again when this driver publishes to a level, when a level-0 message
// arrives, and every levelPoll.
func (p *puller) receive(ctx context.Context, want int, lease time.Duration) ([]backend.Delivery, error) {
	registered := false
	defer func() {
		if registered {
			p.mu.Lock()
			p.waiters--
			p.demand -= want
			if p.waiters == 0 {
				p.noWaiterSince = time.Now()
			}
			p.mu.Unlock()
		}
	}()
	backoff := 50 * time.Millisecond
	gathered := false
	var grace *time.Timer // running while this call waits for credit to come back (see creditGrace)
	graceOver := false
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	p.d.maybeDiscover(p.queue, p.n)
	checked := false // the levels were looked at since this call last waited
	var hint uint64  // p.levelHint when they were
	// afterWait decides, once a wait ended, whether the levels must be
	// looked at again: a level-0 message waits to be handed out, this
	// driver published to a level, or the last look is levelPoll old.
	afterWait := func(mask uint8) {
		if mask == 0 || !checked {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case p.cs != nil && len(p.cs.buf) > 0, p.levelHint != hint:
			checked = false
		case time.Since(p.levelCheckAt) >= levelPoll:
			p.levelCheckAt = time.Now() // this call looks; the others need not
			checked = false
		}
	}
	var tick *time.Ticker // while waiting: level polls and probes
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		mask := p.d.levelMask(p.queue)
		if mask != 0 && !checked {
			p.mu.Lock()
			hint = p.levelHint
			p.mu.Unlock()
			checked = true
			out, more, err := p.takeLevels(ctx, mask, want, lease)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.Is(err, backend.ErrClosed):
				return nil, err
			case err != nil:
				// Level 0 is served meanwhile; the next poll looks again.
				p.d.log.Debug("rabbitmq: taking messages from a level queue failed", slog.String("queue", p.queue), slog.Any("error", err))
			case len(out) > 0:
				p.mu.Lock()
				if more {
					p.levelHint++ // the other waiting calls take the rest
					p.broadcastLocked()
				}
				if cs := p.cs; cs != nil && len(cs.buf) > 0 && len(out) < want {
					out = append(out, p.takeLocked(cs, want-len(out), lease)...)
				}
				p.mu.Unlock()
				return out, nil
			}
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, backend.ErrClosed
		}
		if cs := p.cs; cs != nil && len(cs.buf) > 0 {
			if c := cs.cons; !gathered && len(cs.buf) < want && c != nil && c.pushed < c.prefetch && c.outstanding < c.prefetch {
				// The consumer's first burst may still be on its way:
				// wait a moment so that a batch is not handed out a message
				// at a time.
				gathered = true
				p.mu.Unlock()
				p.gather(ctx, want)
				continue
			}
			out := p.takeLocked(cs, want, lease)
			p.mu.Unlock()
			return out, nil
		}
		if !registered {
			registered = true
			p.waiters++
			p.demand += want
			p.noWaiterSince = time.Time{}
		}
		need := p.needConsumerLocked()
		wait := need && !graceOver && p.graceLocked()
		wake := p.wake
		p.mu.Unlock()
		if wait {
			// The consumer's credit is all leased: a settlement of one of
			// those leases (a worker acks just after asking for more) gives
			// it back, and the broker pushes the next message to this
			// consumer, which saves replacing it (three round trips).
			if grace == nil {
				grace = time.NewTimer(p.d.creditGrace)
			}
			select {
			case <-wake:
				p.mu.Lock()
				if !p.needConsumerLocked() {
					p.graceMisses = 0
				}
				p.mu.Unlock()
			case <-grace.C:
				graceOver = true
				p.mu.Lock()
				if p.needConsumerLocked() {
					p.graceMissed = time.Now()
					p.graceMisses++
				}
				p.mu.Unlock()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			afterWait(mask)
			continue
		}
		if need {
			// The consumer starts in the background (declaring a quorum
			// queue on a loaded cluster can take seconds), so that a Receive
			// whose context ends returns at once; the next Receive finds the
			// consumer, or the start still under way.
			call := p.ensureAsync(ctx)
			var err error
			select {
			case <-call.done:
				err = call.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			switch {
			case err == nil:
				p.outage.Up("rabbitmq: consumer started again", slog.String("queue", p.queue))
				backoff = 50 * time.Millisecond
				afterWait(mask)
				continue
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.Is(err, backend.ErrClosed), errors.Is(err, backend.ErrInvalid):
				return nil, err
			}
			p.outage.Down("rabbitmq: starting a consumer failed; retrying", slog.String("queue", p.queue), slog.Any("error", err))
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
			backoff = min(backoff*2, 2*time.Second)
			afterWait(mask)
			continue
		}
		// Waiting: a queue with levels looks at them every levelPoll (one
		// waiting call for all), and every queue probes for levels other
		// processes started to use every levelProbeEvery.
		period := levelProbeEvery
		if mask != 0 {
			period = levelPoll
		}
		if tick == nil {
			tick = time.NewTicker(period)
		} else {
			tick.Reset(period)
		}
		select {
		case <-wake:
		case <-tick.C:
			p.d.maybeDiscover(p.queue, p.n)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		afterWait(mask)
	}
}

// firstConsumeDelay is how long the first consumer of a queue on a
// connection waits after declaring it (see open).
const firstConsumeDelay = 50 * time.Millisecond

// Gathering: a Receive that finds fewer messages than it wants while its
// consumer's first burst (as many deliveries as its prefetch) may still be
// arriving waits until deliveries stop arriving for gatherGap, at most
// gatherMax. Later deliveries follow settlements one by one, a round trip
// after each: waiting for them would leave a worker's free slots idle, so
// a Receive hands out what is buffered at once.
const (
	gatherGap = 300 * time.Microsecond
	gatherMax = 2 * time.Millisecond
)

func (p *puller) gather(ctx context.Context, want int) {
	limit := time.NewTimer(gatherMax)
	defer limit.Stop()
	gap := time.NewTimer(gatherGap)
	defer gap.Stop()
	had := -1
	for {
		p.mu.Lock()
		cs := p.cs
		if cs == nil || len(cs.buf) >= want {
			p.mu.Unlock()
			return
		}
		if n := len(cs.buf); n != had {
			if had >= 0 { // a delivery arrived (not another wake-up, such as a settlement)
				gap.Reset(gatherGap)
			}
			had = n
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-gap.C:
			return
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// creditGrace is how long a Receive that finds its consumer's credit used
// up by leases waits for a settlement to give credit back before it
// replaces the consumer. A worker's loop asks for the next message just
// before it acks the last one; replacing the consumer then (basic.cancel,
// basic.qos, basic.consume, each a round trip) would cost more than the
// ack. After graceMissesMax waits in vain in a row (a caller holding its
// leases) Receive calls replace the consumer at once for graceHold; a
// single wait in vain (a worker's ack delayed by a busy machine) does not
// stop the next one.
const (
	creditGrace    = 2 * time.Millisecond
	graceMissesMax = 3
	graceHold      = 100 * time.Millisecond
)

// graceLocked reports whether a Receive that needs a consumer should first
// wait creditGrace for a settlement: the consumer exists and is as large as
// a new one would be (only its credit is used up), and the last waits were
// not all in vain (see graceMissesMax).
func (p *puller) graceLocked() bool {
	cs := p.cs
	if cs == nil || cs.cons == nil || len(cs.buf) > 0 {
		return false
	}
	if cs.cons.prefetch < min(prefetchFor(p.demand), p.d.opts.MaxPrefetch) {
		return false
	}
	return p.graceMisses < graceMissesMax || time.Since(p.graceMissed) >= graceHold
}

// freedLocked wakes waiting Receive calls after a settlement on cs freed
// credit: one waiting for credit (see creditGrace) looks again.
func (p *puller) freedLocked(cs *chanState) {
	if p.waiters > 0 && p.cs == cs {
		p.broadcastLocked()
	}
}

// needConsumerLocked reports whether waiting Receive calls need a (new)
// consumer: there is none, or its credit is used up (every message it was
// pushed is leased or buffered). A consumer with credit left is replaced
// only by park, which gives its messages back anyway: RabbitMQ 3.10 returns
// messages that are on their way to a cancelled consumer with
// x-delivery-count incremented, which would count an attempt nobody made;
// with no credit left nothing is on its way.
func (p *puller) needConsumerLocked() bool {
	cs := p.cs
	if cs == nil || cs.cons == nil {
		return true
	}
	return cs.cons.outstanding >= cs.cons.prefetch
}

// takeLocked leases up to want buffered messages; the lease starts now.
func (p *puller) takeLocked(cs *chanState, want int, lease time.Duration) []backend.Delivery {
	n := min(want, len(cs.buf))
	now := time.Now()
	out := make([]backend.Delivery, 0, n)
	for _, e := range cs.buf[:n] {
		e.leased = true
		e.deadline = now.Add(lease)
		e.attempt = p.priorLocked(&e.dv) + 1
		out = append(out, backend.Delivery{
			Message:   decode(&e.dv),
			Attempt:   e.attempt,
			Receipt:   p.d.receipt(cs.gen, e.dv.DeliveryTag),
			Deadline:  e.deadline,
			LastError: strHeader(e.dv.Headers, hLastError),
		})
	}
	rest := copy(cs.buf, cs.buf[n:])
	clear(cs.buf[rest:])
	cs.buf = cs.buf[:rest]
	return out
}

// ensure opens the channel and (re)starts the consumer if waiting Receive
// calls need it.
// ensureAsync starts ensure in the background unless a start is under way,
// and returns the start to wait for. The start outlives the context of the
// Receive that began it (keeping its values); it ends when the driver
// closes.
func (p *puller) ensureAsync(ctx context.Context) *startCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.starting != nil {
		return p.starting
	}
	call := &startCall{done: make(chan struct{})}
	if p.closed {
		call.err = backend.ErrClosed
		close(call.done)
		return call
	}
	p.starting = call
	p.d.wg.Add(1)
	go func() {
		defer p.d.wg.Done()
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		go func() {
			select {
			case <-p.d.closeCh:
				cancel()
			case <-bctx.Done():
			}
		}()
		call.err = p.ensure(bctx)
		cancel()
		p.mu.Lock()
		p.starting = nil
		p.mu.Unlock()
		close(call.done)
	}()
	return call
}

func (p *puller) ensure(ctx context.Context) error {
	p.ensureMu.Lock()
	defer p.ensureMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return backend.ErrClosed
	}
	need := p.needConsumerLocked() && p.waiters > 0
	cs, demand := p.cs, p.demand
	var old *consumer
	if cs != nil {
		old = cs.cons
	}
	p.mu.Unlock()
	if !need {
		return nil
	}
	if cs == nil {
		var err error
		if cs, err = p.open(ctx); err != nil {
			return err
		}
	}
	if old != nil {
		// The old consumer's credit is used up, so nothing is on its way to
		// it; the deliveries amqp091 already holds for it still arrive and
		// stay ackable. Checked again under p.mu with the cancel: a
		// settlement meanwhile gave it credit back, and it goes on.
		p.mu.Lock()
		if cs.cons != old || !cs.fullLocked() {
			p.mu.Unlock()
			return nil
		}
		err := p.cancelLocked(cs)
		p.mu.Unlock()
		if err != nil {
			return mapErr(ctx, "cancel consumer", err)
		}
	}
	prefetch := min(prefetchFor(demand), p.d.opts.MaxPrefetch)
	tag := "fila-" + p.d.nonce + "-" + strconv.FormatUint(p.d.seq.Add(1), 36)
	var deliveries <-chan amqp.Delivery
	if p.d.beforeConsume != nil {
		p.d.beforeConsume()
	}
	err := cs.call(func() error {
		if cs.qos != prefetch { // it applies to the channel's next consumers
			if err := cs.ch.Qos(prefetch, 0, false); err != nil {
				return err
			}
			cs.qos = prefetch
		}
		var err error
		deliveries, err = cs.ch.Consume(p.n.main, tag, false, false, false, false, nil)
		return err
	})
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			if s, serr := p.d.session(ctx, time.Millisecond); serr == nil {
				s.forget(p.queue, p.n) // deleted behind our back: declare again
			}
		}
		return mapErr(ctx, "consume", err)
	}
	c := &consumer{tag: tag, prefetch: prefetch, done: make(chan struct{})}
	p.mu.Lock()
	cs.cons = c
	cs.live[c] = struct{}{}
	p.mu.Unlock()
	p.d.wg.Add(1)
	go p.consume(cs, c, deliveries)
	return nil
}

// open declares the topology and opens a fresh channel.
func (p *puller) open(ctx context.Context) (*chanState, error) {
	s, err := p.d.session(ctx, 0)
	if err != nil {
		return nil, err
	}
	fresh, err := s.declareFresh(ctx, p.queue, p.n)
	if err != nil {
		return nil, err
	}
	if fresh {
		// RabbitMQ 3.10 crashes the channel, and closes the connection, when
		// basic.consume reaches a quorum queue whose Raft server another
		// connection is still starting (both declared it at once). Giving a
		// possibly new queue a moment before the first consume makes that
		// rare; the driver reconnects if it happens anyway.
		t := time.NewTimer(firstConsumeDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, mapErr(ctx, "open channel", err)
	}
	cs := &chanState{ch: ch, gen: p.d.seq.Add(1), entries: map[uint64]*entry{},
		holes: map[uint64]struct{}{}, live: map[*consumer]struct{}{}}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	// The broker cancels a consumer (basic.cancel) when its queue is
	// deleted. amqp091 closes this channel when ch closes.
	cancels := ch.NotifyCancel(make(chan string, 1))
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = ch.Close()
		return nil, backend.ErrClosed
	}
	p.cs = cs
	p.mu.Unlock()
	p.d.wg.Add(1)
	go func() {
		defer p.d.wg.Done()
		e := <-closes
		p.mu.Lock()
		if p.cs == cs {
			p.cs = nil
			p.broadcastLocked()
		}
		p.noteBufferLostLocked(cs)
		p.mu.Unlock()
		if e != nil {
			p.d.log.Debug("rabbitmq: consumer channel closed; its leases are lost", slog.String("queue", p.queue), slog.Any("error", e))
		}
	}()
	p.d.wg.Add(1)
	go func() {
		defer p.d.wg.Done()
		for range cancels {
			p.cancelledByBroker(cs)
		}
	}()
	return cs, nil
}

// cancelledByBroker handles the broker's basic.cancel of a consumer on cs:
// the queue was deleted (by another process, or a tool). The declarations
// are forgotten, so the next call declares the queue again, and cs is
// dropped with its buffered messages and leases, which belonged to the
// deleted queue (settling them returns ErrLeaseLost). If the queue was not
// deleted after all, closing cs requeues its messages: nothing is lost.
func (p *puller) cancelledByBroker(cs *chanState) {
	p.d.log.Debug("rabbitmq: the broker cancelled a consumer (queue deleted); dropping its channel and leases", slog.String("queue", p.queue))
	p.d.mu.Lock()
	s := p.d.sess
	delete(p.d.levels, p.queue)
	p.d.mu.Unlock()
	if s != nil {
		s.forget(p.queue, p.n)
	}
	// Closing cs waits for the broker's reply, which the connection's reader
	// delivers; it must not wait here, where that reader hands over cancels.
	p.d.wg.Add(1)
	go func() {
		defer p.d.wg.Done()
		p.dropChannel(cs)
	}()
}

// current returns the puller's channel, nil when it has none.
func (p *puller) current() *chanState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cs
}

// dropChannel forgets cs with its buffered messages and leases (settling
// them returns ErrLeaseLost) and closes it, which requeues whatever of them
// still exists; the next Receive opens a fresh channel.
func (p *puller) dropChannel(cs *chanState) {
	if cs == nil {
		return
	}
	p.mu.Lock()
	if p.cs != cs {
		p.mu.Unlock()
		return
	}
	p.cs = nil
	p.broadcastLocked()
	p.noteBufferLostLocked(cs)
	p.mu.Unlock()
	_ = cs.ch.Close()
}

func (cs *chanState) call(fn func() error) error {
	cs.callMu.Lock()
	defer cs.callMu.Unlock()
	return fn()
}

// consume moves c's deliveries into the buffer.
func (p *puller) consume(cs *chanState, c *consumer, deliveries <-chan amqp.Delivery) {
	defer p.d.wg.Done()
	defer close(c.done)
	for dv := range deliveries {
		p.onDelivery(cs, c, dv)
	}
	p.mu.Lock()
	delete(cs.live, c)
	if cs.cons == c { // cancelled by the broker (queue deleted) or the channel died
		cs.cons = nil
		p.broadcastLocked()
	}
	p.mu.Unlock()
}

func (p *puller) onDelivery(cs *chanState, c *consumer, dv amqp.Delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs != cs {
		return // the channel died: the broker requeued it
	}
	adopt(&dv, p.queue)
	e := &entry{dv: dv, cons: c}
	tag := dv.DeliveryTag
	cs.entries[tag] = e
	cs.order = append(cs.order, tag)
	cs.noteTagLocked(tag)
	c.outstanding++
	c.pushed++
	if l := levelOf(dv.Headers); l > 0 {
		// A topic copy of a level this subscription has no queue for
		// (P.Q:levels sent it here): it goes out from here with its level,
		// and the level's queue takes the next ones.
		p.d.ensureLevelAsync(p.queue, p.n, l)
	}
	if runAt := intHeader(dv.Headers, hRunAt); runAt > time.Now().UnixMilli() {
		// Arrived before its run-at (a delay rounded down to its bucket, or
		// longer than the largest bucket): wait out the rest in a delay queue.
		e.busy = true
		p.d.wg.Add(1)
		go p.hop(cs, e, time.UnixMilli(runAt))
		return
	}
	cs.buf = append(cs.buf, e)
	p.broadcastLocked()
}

// noteTagLocked records that the delivery tag arrived on cs (a consumer's
// delivery or a basic.get's).
func (cs *chanState) noteTagLocked(tag uint64) {
	cs.seen++
	if tag <= cs.maxTag {
		delete(cs.holes, tag)
		return
	}
	if tag-cs.maxTag <= maxHoles {
		for t := cs.maxTag + 1; t < tag; t++ {
			cs.holes[t] = struct{}{}
		}
	}
	cs.maxTag = tag
}

// maxHoles bounds the tags a single delivery can mark as not received: more
// than that many deliveries in flight at once on one channel means
// something else is wrong, and sweep then misses some.
const maxHoles = 1 << 16

// sweep gives back deliveries the broker sent on cs to a consumer that was
// cancelled meanwhile: a quorum queue of RabbitMQ 3.10 can send a delivery
// after the cancel-ok, and amqp091 drops a delivery whose consumer it no
// longer knows, so the message would stay unacknowledged on cs, seen by
// nobody, until the channel closes. Delivery tags number every delivery of
// a channel, so the tag of a marker message taken with basic.get (see
// barrier) counts what the broker sent before it; once every cancelled
// consumer's deliveries have arrived, a tag below it that never arrived was
// dropped, and is given back with basic.nack and requeue. Call it with
// ensureMu held after cancelling cs's consumer: it does nothing while one
// runs.
func (p *puller) sweep(ctx context.Context, cs *chanState) error {
	for {
		p.mu.Lock()
		if p.cs != cs || cs.cons != nil {
			p.mu.Unlock()
			return nil
		}
		var c *consumer
		for k := range cs.live {
			c = k
			break
		}
		p.mu.Unlock()
		if c == nil {
			break
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s, err := p.d.session(ctx, p.d.opts.ReconnectWait)
	if err != nil {
		return err
	}
	marker, err := s.markerQueue(ctx)
	if err != nil {
		return err
	}
	if err := s.publish(ctx, []pubItem{{key: marker, msg: amqp.Publishing{}}}); err != nil {
		return mapErr(ctx, "publish a sweep marker", err)
	}
	// Under callMu: every other basic.get on cs has recorded its tag.
	return cs.call(func() error {
		dv, ok, err := cs.ch.Get(marker, true)
		if err != nil {
			return mapErr(ctx, "take a sweep marker", err)
		}
		if !ok {
			return nil // someone took it: nothing is known
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cs != cs {
			return nil
		}
		cs.noteTagLocked(dv.DeliveryTag)
		if cs.cons != nil || len(cs.live) > 0 {
			return nil
		}
		for t := range cs.holes {
			if t < dv.DeliveryTag {
				delete(cs.holes, t)
				cs.seen++
				p.d.log.Debug("rabbitmq: giving back a delivery sent to a cancelled consumer", slog.String("queue", p.queue))
				_ = cs.ch.Nack(t, false, true)
			}
		}
		return nil
	})
}

// removeLocked forgets e after its ack or reject was decided.
func (cs *chanState) removeLocked(e *entry) {
	tag := e.dv.DeliveryTag
	if cs.entries[tag] != e {
		return
	}
	delete(cs.entries, tag)
	e.cons.outstanding--
	i := 0
	for i < len(cs.order) && cs.entries[cs.order[i]] == nil {
		i++
	}
	if i > 0 {
		n := copy(cs.order, cs.order[i:])
		cs.order = cs.order[:n]
	}
	if len(cs.order) > 2*len(cs.entries)+256 {
		// A long lease at the front keeps settled tags behind it: drop them.
		kept := cs.order[:0]
		for _, t := range cs.order {
			if cs.entries[t] != nil {
				kept = append(kept, t)
			}
		}
		clear(cs.order[len(kept):])
		cs.order = kept
	}
}

// multipleOKLocked reports whether one basic.ack with multiple=true up to
// tag acks exactly the removed deliveries: every delivery up to tag was
// received and none of them is still unsettled.
func (cs *chanState) multipleOKLocked(tag uint64) bool {
	if cs.seen != cs.maxTag { // deliveries of two consumers may interleave out of order
		return false
	}
	if cs.gets != nil || cs.lgets != nil { // basic.get replies and pushed deliveries may be recorded out of tag order
		return false
	}
	return len(cs.order) == 0 || cs.order[0] > tag
}

// settleLocked acks (or rejects with requeue) entries already removed.
// Frames are sent under p.mu so that their order matches the bookkeeping.
func (cs *chanState) ackLocked(tags []uint64) error {
	if len(tags) == 0 {
		return nil
	}
	top := tags[0]
	for _, t := range tags {
		top = max(top, t)
	}
	if len(tags) > 1 && cs.multipleOKLocked(top) {
		return cs.ch.Ack(top, true)
	}
	for _, t := range tags {
		if err := cs.ch.Ack(t, false); err != nil {
			return err
		}
	}
	return nil
}

// tick expires leases past their deadline and parks an idle puller. An
// expired lease is basic.reject with requeue: the delivery failed, and the
// quorum queue counts it (every RabbitMQ version counts a reject; 4.3 and
// later no longer count a basic.nack). With no Receive waiting and a
// consumer, the rejects go out from park after the consumer is cancelled:
// otherwise the freed credit, or credit the consumer had left, would bring
// the messages straight back into this buffer, where nobody wants them,
// while Receive calls of other clients wait for them (contract:
// lease-expiry).
//
// A puller is parked when no Receive has waited for Options.BufferIdle and
// it holds buffered messages, or a consumer with credit left.
func (p *puller) tick(now time.Time) {
	p.mu.Lock()
	cs := p.cs
	if cs == nil || p.closed {
		p.mu.Unlock()
		return
	}
	// With no Receive waiting here, an expired lease must not go back to
	// this client's consumer, which would take it straight back into a
	// buffer nobody reads while Receive calls of other clients wait: park
	// cancels the consumer first.
	cancellable := p.waiters == 0 && cs.cons != nil
	expired := false
	for _, e := range cs.entries {
		if e.leased && !e.busy && now.After(e.deadline) {
			if cancellable {
				expired = true
				continue
			}
			cs.removeLocked(e)
			_ = cs.ch.Reject(e.dv.DeliveryTag, true)
			p.freedLocked(cs)
		}
	}
	idle := p.waiters == 0 && !p.noWaiterSince.IsZero() && now.Sub(p.noWaiterSince) >= p.d.opts.BufferIdle
	// An idle consumer goes when it holds buffered messages or has credit
	// left, which would pull messages that other clients wait for into
	// this buffer.
	idleConsumer := len(cs.buf) > 0 || cs.cons != nil && !cs.fullLocked()
	park := !p.parking && (expired || idle && idleConsumer)
	if park {
		p.parking = true
	}
	p.mu.Unlock()
	if park {
		p.d.wg.Add(1)
		go func() {
			defer p.d.wg.Done()
			p.park(cs)
		}()
	}
}

// fullLocked reports whether cs has a consumer holding as many unsettled
// deliveries as its prefetch: the broker has nothing on its way to it, so
// cancelling it strands nothing. (A quorum queue in RabbitMQ 3.10 can send
// deliveries it handed to a consumer after the cancel-ok, and amqp091 drops
// deliveries for a cancelled consumer: they would stay unacknowledged on the
// channel, seen by nobody, until the channel closes.) Only park cancels a
// consumer with spare credit, and it then sweeps for such deliveries.
func (cs *chanState) fullLocked() bool {
	return cs.cons != nil && cs.cons.outstanding >= cs.cons.prefetch
}

// park cancels the consumer of a puller nobody waits on, then rejects its
// expired leases and gives its buffered messages back to the queue.
// Cancelling first keeps the broker from pushing them (or others) straight
// back. A consumer that had credit left may have had a delivery on its way:
// sweep finds it. The next Receive starts a new consumer.
func (p *puller) park(cs *chanState) {
	defer func() {
		p.mu.Lock()
		p.parking = false
		p.mu.Unlock()
	}()
	p.ensureMu.Lock()
	defer p.ensureMu.Unlock()
	p.mu.Lock()
	stop := p.waiters == 0 && p.cs == cs && cs.cons != nil
	p.mu.Unlock()
	if stop {
		full := p.stopConsumer(cs)
		p.mu.Lock()
		spare := len(cs.live) > 0 || len(cs.holes) > 0
		p.mu.Unlock()
		if !full || spare {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := p.sweep(ctx, cs)
			cancel()
			if err != nil && !p.d.isClosed() {
				p.d.log.Debug("rabbitmq: looking for deliveries sent to a cancelled consumer failed", slog.String("queue", p.queue), slog.Any("error", err))
			}
		}
	}
	p.mu.Lock()
	if p.cs != cs {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	for _, e := range cs.entries {
		if e.leased && !e.busy && now.After(e.deadline) {
			cs.removeLocked(e)
			_ = cs.ch.Reject(e.dv.DeliveryTag, true)
		}
	}
	var items []*entry
	if p.waiters == 0 && cs.cons == nil {
		items = p.detachBufferLocked(cs)
	}
	p.mu.Unlock()
	p.giveBack(cs, items)
}

// settleIdle is how long no Receive must have waited on a puller before an
// ack cancels its consumer (see quiesce). A loop that receives again within
// it (a worker whose handlers are quicker) keeps its consumer.
const settleIdle = 50 * time.Millisecond

// quiesce cancels the puller's consumer before a settlement frees credit on
// it, when no Receive waits and none has for idle: the broker would fill
// the freed credit with a message nobody asked for, which would have to be
// given back (and RabbitMQ before 4.3 counts a give-back as a delivery).
// Acks pass settleIdle, and cancel only a full consumer (see fullLocked).
// Retry and Dead pass 0: they are a failure path, where a consumer restart
// costs little, and a Retry without delay frees credit, or finds credit
// left, that would pull the message straight back into a buffer nobody
// reads while other clients wait for it; they cancel a consumer with
// credit left too, and sweep. The next Receive starts a new one.
func (p *puller) quiesce(idle time.Duration) {
	p.mu.Lock()
	cs := p.cs
	need := cs != nil && p.waiters == 0 && !p.parking && cs.cons != nil && (cs.fullLocked() || idle == 0) &&
		!p.noWaiterSince.IsZero() && time.Since(p.noWaiterSince) >= idle
	p.mu.Unlock()
	if need {
		p.stopIdleConsumer(cs, idle == 0)
	}
}

// stopIdleConsumer cancels cs's consumer if no Receive waits on it and it is
// full (see fullLocked), or, with spare, whatever credit it has left (then
// it sweeps). When a full consumer was cancelled, every message the broker
// gave it is in the buffer or leased: none is on its way.
func (p *puller) stopIdleConsumer(cs *chanState, spare bool) {
	if cs == nil {
		return
	}
	p.ensureMu.Lock()
	defer p.ensureMu.Unlock()
	p.mu.Lock()
	still := p.cs == cs && p.waiters == 0 && cs.cons != nil && (spare || cs.fullLocked())
	p.mu.Unlock()
	if !still {
		return
	}
	if full := p.stopConsumer(cs); !full {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.sweep(ctx, cs); err != nil && !p.d.isClosed() {
			p.d.log.Debug("rabbitmq: looking for deliveries sent to a cancelled consumer failed", slog.String("queue", p.queue), slog.Any("error", err))
		}
	}
}

// stopConsumer cancels cs's consumer and waits until the deliveries amqp091
// holds for it are in the buffer. It reports whether the consumer was full
// (see fullLocked) when it was cancelled: otherwise a delivery may have been
// on its way to it, and the caller sweeps. Call with ensureMu held.
func (p *puller) stopConsumer(cs *chanState) (full bool) {
	p.mu.Lock()
	c := cs.cons
	full = cs.fullLocked()
	var err error
	if c != nil {
		err = p.cancelLocked(cs)
	}
	p.mu.Unlock()
	if c == nil || err != nil {
		return full // none, or the channel is gone
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
	return full
}

// cancelLocked cancels cs's consumer with a basic.cancel that asks for no
// reply, under p.mu so that whether it was full (see fullLocked) holds
// until the broker has it: no settlement frame goes out in between.
//
// A cancel that waits for its basic.cancel-ok can wedge the connection:
// RabbitMQ 3.10 answers the cancel of a quorum queue's consumer twice when
// the queue is deleted (or its node lost) at that moment (the quorum queue
// replies, then the channel replies again after the queue's Raft server
// exited), and amqp091's reader, finding nobody waiting for the second
// reply, blocks on it forever: every later call on the connection hangs,
// and so does Close. With no reply asked for, the broker sends none.
// amqp091 forgets the consumer at once and drops any delivery that reaches
// it later: none can when it was full; otherwise the caller sweeps.
func (p *puller) cancelLocked(cs *chanState) error {
	c := cs.cons
	cs.cons = nil
	return cs.ch.Cancel(c.tag, true)
}

func (p *puller) detachBufferLocked(cs *chanState) []*entry {
	items := cs.buf
	cs.buf = nil
	for _, e := range items {
		e.busy = true
	}
	return items
}

// giveBack returns buffered, never-received messages to their queue with
// basic.nack and requeue: one frame per message, so a crash at any moment
// leaves each message exactly once in the broker (the channel's death
// requeues whatever was not nacked yet). RabbitMQ 4.3 and later do not
// count a nack as a delivery; earlier versions count it in
// x-delivery-count; the puller records the give-back (noteReturnedLocked),
// so that the message does not show that extra attempt when it comes back
// to this client (on another client it does, as it does for a message a
// crashed client held buffered). A give-back used to publish copies and ack
// the originals, which kept the count exact but left both copies when the
// process died between the two.
func (p *puller) giveBack(cs *chanState, items []*entry) {
	if len(items) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range items {
		p.noteReturnedLocked(e)
	}
	if p.cs != cs {
		return // the channel died: the broker requeued them
	}
	for _, e := range items {
		cs.removeLocked(e)
		_ = cs.ch.Nack(e.dv.DeliveryTag, false, true)
	}
}

// hop sends a message that reached its level's main queue before its
// run-at to the level's delay queue of the time left.
func (p *puller) hop(cs *chanState, e *entry, runAt time.Time) {
	defer p.d.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := func() error {
		s, err := p.d.session(ctx, p.d.opts.ReconnectWait)
		if err != nil {
			return err
		}
		pub := copyOf(&e.dv)
		p.mu.Lock()
		prior := p.priorLocked(&e.dv)
		p.mu.Unlock()
		pub.Headers[hAttempts] = int64(prior)
		key, err := s.delayKeyAt(ctx, p.queue, p.n, levelOf(pub.Headers), runAt)
		if err != nil {
			return err
		}
		return s.publish(ctx, []pubItem{{key: key, msg: pub, queue: p.queue}})
	}()
	if err != nil {
		p.d.log.Warn("rabbitmq: moving an early message to its delay queue failed; it goes back to the queue",
			slog.String("queue", p.queue), slog.Any("error", err))
		select {
		case <-time.After(time.Second):
		case <-p.d.closeCh:
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs != cs {
		return
	}
	cs.removeLocked(e)
	defer p.freedLocked(cs)
	if err != nil {
		_ = cs.ch.Nack(e.dv.DeliveryTag, false, true)
		return
	}
	_ = cs.ackLocked([]uint64{e.dv.DeliveryTag})
}

// shutdown ends the puller for Close: blocked Receive calls end, the
// consumer is cancelled, buffered messages are given back, and the channel
// is closed (which requeues what is still leased). A consumer start or
// park that still holds ensureMu when ctx ends is left to the connection's
// close, which ends its calls and requeues everything the channel held:
// Close never waits on a broker that stopped answering.
func (p *puller) shutdown(ctx context.Context, s *session) {
	p.mu.Lock()
	p.closed = true
	p.broadcastLocked()
	p.mu.Unlock()
	if !lockWithin(ctx, &p.ensureMu) {
		p.d.log.Debug("rabbitmq: a consumer start or cancel still runs at Close; closing the connection ends it", slog.String("queue", p.queue))
		return
	}
	defer p.ensureMu.Unlock()
	p.mu.Lock()
	cs := p.cs
	p.mu.Unlock()
	if cs == nil || s == nil || s.isDead() {
		return
	}
	p.stopConsumer(cs)
	p.mu.Lock()
	items := p.detachBufferLocked(cs)
	p.mu.Unlock()
	p.giveBack(cs, items)
	_ = cs.ch.Close()
}

// prefetchFor sizes a consumer's prefetch for demand, the sum of the Max of
// the waiting Receive calls: exactly that, so the broker pushes only
// messages somebody asked for. Every message pushed beyond it would have to
// be given back, which RabbitMQ before 4.3 counts as a delivery.
func prefetchFor(demand int) int {
	return max(demand, 1)
}

// lockWithin locks mu, giving up when ctx ends first.
func lockWithin(ctx context.Context, mu *sync.Mutex) bool {
	if mu.TryLock() {
		return true
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if mu.TryLock() {
				return true
			}
		}
	}
}
