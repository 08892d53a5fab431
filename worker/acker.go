package worker

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// ackBatchMax is the most deliveries one batched ack carries.
const ackBatchMax = 100

// acksPerSlot is how many acks per unit of a queue's concurrency may be in
// flight (queued or being acked). With one per slot, a job that finished
// while the previous ack was still on its way waited for it, keeping its
// slot, so at concurrency 1 the next Receive did too: the ack's round trip
// and the next receive's ran one after the other. Four lets them overlap and
// lets acks gather into larger batches (BENCHMARKS.md, "History": Redis
// burn-down at concurrency 1 and 10).
const acksPerSlot = 4

// pendingAck is a finished job whose handler succeeded, waiting for its ack.
type pendingAck struct {
	d   *fila.Delivery
	ev  JobEvent
	log *jobLog
}

// acker acks one queue's successful jobs in batches. A job hands its
// delivery over when its handler returns nil and frees its slot at once.
// The acks queued are acked together (up to ackBatchMax in one call), and
// only then is each job's end reported (log, OnJobEnd). At most acksPerSlot
// times the concurrency of acks are in flight (queued or being acked): a
// job whose hand-over would exceed that waits, keeping its slot. So a queue
// holds at most 1+acksPerSlot times its concurrency of leases: its running
// jobs' and its acks in flight.
//
// Who sends the acks: when the client's driver acks and claims in one round
// trip (backend.AckReceiver), the receive loop takes the queued acks into
// its next claim (Client.AckReceive) while it is about to claim: waiting
// for a free slot or claiming (handoff). An ack queued then is never kept
// long: the job that queued it frees its slot right after, so the loop
// claims next. While the loop waits for messages in a blocking Receive,
// backs off after an error, or has stopped, the acker's own goroutine acks
// them with Client.AckBatch, as it always does without the capability.
type acker struct {
	w        *Worker
	base     context.Context // values for the ack calls; never cancelled
	inflight chan struct{}   // one token per ack queued or being acked
	// combine: the receive loop may take acks into its claims.
	combine bool
	wake    chan struct{} // tells the goroutine to look at the queue

	mu      sync.Mutex
	queue   []pendingAck
	handoff bool // the receive loop takes the queued acks
	stopped bool

	done sync.WaitGroup
}

func newAcker(w *Worker, base context.Context, concurrency int) *acker {
	n := acksPerSlot * max(concurrency, 1)
	_, combine := w.c.Driver().(backend.AckReceiver)
	a := &acker{w: w, base: context.WithoutCancel(base), inflight: make(chan struct{}, n),
		combine: combine, wake: make(chan struct{}, 1)}
	a.done.Add(1)
	go a.loop()
	return a
}

// add queues p's ack. It must not be called after stop.
func (a *acker) add(p pendingAck) {
	a.inflight <- struct{}{}
	a.mu.Lock()
	a.queue = append(a.queue, p)
	mine := !a.handoff
	a.mu.Unlock()
	if mine {
		a.signal()
	}
}

func (a *acker) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// setHandoff says whether the receive loop is about to claim (and takes the
// queued acks) or not (the goroutine acks them). Without combine it stays
// false.
func (a *acker) setHandoff(on bool) {
	if !a.combine {
		return
	}
	a.mu.Lock()
	a.handoff = on && !a.stopped
	pending := !a.handoff && len(a.queue) > 0
	a.mu.Unlock()
	if pending {
		a.signal()
	}
}

// take removes up to ackBatchMax queued acks: for the goroutine
// (goroutine true) when the receive loop is not taking them, for the
// receive loop only with combine.
func (a *acker) take(goroutine bool) []pendingAck {
	if !goroutine && !a.combine {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if goroutine && a.handoff {
		return nil
	}
	n := min(len(a.queue), ackBatchMax)
	if n == 0 {
		return nil
	}
	batch := make([]pendingAck, n)
	copy(batch, a.queue)
	rest := copy(a.queue, a.queue[n:])
	clear(a.queue[rest:])
	a.queue = a.queue[:rest]
	return batch
}

// stop tells the acker that no more acks come; it acks the queued ones and
// ends. wait waits for that (each call is bounded by settleTimeout).
func (a *acker) stop() {
	a.mu.Lock()
	a.stopped, a.handoff = true, false
	a.mu.Unlock()
	a.signal()
}
func (a *acker) wait() { a.done.Wait() }

func (a *acker) loop() {
	defer a.done.Done()
	for range a.wake {
		for {
			batch := a.take(true)
			if len(batch) == 0 {
				break
			}
			a.flush(batch, a.ackBatch)
		}
		a.mu.Lock()
		end := a.stopped && len(a.queue) == 0
		a.mu.Unlock()
		if end {
			return
		}
	}
}

// ackBatch acks ds with one AckBatch.
func (a *acker) ackBatch(ctx context.Context, ds []*fila.Delivery) error {
	return a.w.c.AckBatch(ctx, ds)
}

// ackReceive acks batch and claims what of queue is ready with one
// Client.AckReceive, for the receive loop. err is the claim's.
func (a *acker) ackReceive(batch []pendingAck, queue string, p fila.ReceiveParams) (got []*fila.Delivery, err error) {
	a.flush(batch, func(ctx context.Context, ds []*fila.Delivery) error {
		var ackErr error
		got, ackErr, err = a.w.c.AckReceive(ctx, ds, queue, p)
		return ackErr
	})
	return got, err
}

// flush acks batch with one call of ack (AckBatch's contract) and reports
// each job's end, then frees the batch's places in flight. When the call
// fails, the deliveries whose outcome it does not tell are acked one by one
// to learn it.
func (a *acker) flush(batch []pendingAck, ack func(context.Context, []*fila.Delivery) error) {
	ctx, cancel := context.WithTimeout(a.base, settleTimeout)
	defer cancel()
	defer func() {
		for range batch {
			<-a.inflight
		}
	}()
	ds := make([]*fila.Delivery, 0, len(batch))
	byID := make(map[string]int, len(batch))
	var alone []pendingAck // a second delivery of one id: acked by itself
	for _, p := range batch {
		if _, dup := byID[p.d.ID]; dup {
			alone = append(alone, p)
			continue
		}
		byID[p.d.ID] = len(ds)
		ds = append(ds, p.d)
	}
	var errs map[string]error
	err := ack(ctx, ds)
	if err != nil {
		errs = perDelivery(err, byID)
	}
	for _, p := range batch {
		i, ok := byID[p.d.ID]
		if !ok || ds[i] != p.d {
			continue // in alone
		}
		var serr error
		switch e, failed := errs[p.d.ID]; {
		case err == nil:
		case errs == nil: // the whole call failed: nothing was acked
			serr = p.d.Ack(ctx)
		case !failed:
		case errors.Is(e, fila.ErrLeaseLost):
			serr = e
		default: // not settled: learn its own outcome
			serr = p.d.Ack(ctx)
		}
		a.w.ended(p, serr)
	}
	for _, p := range alone {
		a.w.ended(p, p.d.Ack(ctx))
	}
}

// perDelivery splits AckBatch's error into the errors of the deliveries in
// byID, which it joins as "delivery <id>: <err>". It returns nil when err is
// not such a join: the whole call failed and no delivery was settled.
func perDelivery(err error, byID map[string]int) map[string]error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	out := map[string]error{}
	for _, e := range j.Unwrap() {
		rest, ok := strings.CutPrefix(e.Error(), "delivery ")
		if !ok {
			return nil
		}
		id, _, ok := strings.Cut(rest, ": ")
		if _, known := byID[id]; !ok || !known {
			return nil
		}
		out[id] = e
	}
	return out
}

// ended records a job's end once its ack has been tried.
func (w *Worker) ended(p pendingAck, serr error) {
	ev := p.ev
	switch {
	case serr == nil:
	case errors.Is(serr, fila.ErrLeaseLost):
		ev.Outcome, ev.SettleErr = OutcomeLeaseLost, serr
	default:
		ev.Outcome, ev.SettleErr = OutcomeUnsettled, serr
	}
	w.logEnd(p.log, ev)
	w.end(ev)
}
