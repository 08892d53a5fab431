package worker

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/fila-go/fila"
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
// delivery over when its handler returns nil and frees its slot at once; the
// acker gathers the acks that arrive close together (all it can take without
// waiting, up to ackBatchMax), acks them with one Client.AckBatch, and only
// then reports each job's end (log, OnJobEnd). At most acksPerSlot times the
// concurrency of acks are in flight (queued or being acked): a job whose
// hand-over would exceed that waits, keeping its slot. So a queue holds at
// most 1+acksPerSlot times its concurrency of leases: its running jobs' and
// its acks in flight.
type acker struct {
	w        *Worker
	base     context.Context // values for the ack calls; never cancelled
	ch       chan pendingAck
	inflight chan struct{} // one token per ack queued or being acked
	done     sync.WaitGroup
}

func newAcker(w *Worker, base context.Context, concurrency int) *acker {
	n := acksPerSlot * max(concurrency, 1)
	a := &acker{w: w, base: context.WithoutCancel(base), ch: make(chan pendingAck, n), inflight: make(chan struct{}, n)}
	a.done.Add(1)
	go a.loop()
	return a
}

// add queues p's ack. It must not be called after stop.
func (a *acker) add(p pendingAck) {
	a.inflight <- struct{}{}
	a.ch <- p
}

// stop tells the acker that no more acks come; it flushes the queued ones
// and ends. wait waits for that (each flush is bounded by settleTimeout).
func (a *acker) stop() { close(a.ch) }
func (a *acker) wait() { a.done.Wait() }

func (a *acker) loop() {
	defer a.done.Done()
	batch := make([]pendingAck, 0, ackBatchMax)
	for p := range a.ch {
		batch = append(batch[:0], p)
		open := true
	gather:
		for len(batch) < ackBatchMax {
			select {
			case p, ok := <-a.ch:
				if !ok {
					open = false
					break gather
				}
				batch = append(batch, p)
			default:
				break gather
			}
		}
		a.flush(batch)
		for range batch {
			<-a.inflight
		}
		clear(batch) // drop references to finished deliveries
		if !open {
			return
		}
	}
}

// flush acks batch with one AckBatch and reports each job's end. When the
// batch fails, the deliveries whose outcome it does not tell are acked one
// by one to learn it.
func (a *acker) flush(batch []pendingAck) {
	ctx, cancel := context.WithTimeout(a.base, settleTimeout)
	defer cancel()
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
	err := a.w.c.AckBatch(ctx, ds)
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
