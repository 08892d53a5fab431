// Package relay moves messages from a queue on one fila.Client to a queue
// on another, at least once: the outbox pattern (PostgreSQL written in the
// application's transactions, published to another broker) and moving a
// queue between brokers (what fila migrate runs).
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/bridge"
)

// h is what the relay needs of a Client beyond its exported API.
var h = bridge.Get[*fila.Client, *fila.Delivery, fila.Message]()

var invalidf = backend.Invalidf

// HeaderSourceID is the header a Relay adds to every message it moves: the
// id the message had on the source, so consumers can de-duplicate. A message
// relayed again (A to B to C) keeps the id it had on A.
const HeaderSourceID = "Fila-Source-Id"

// Relay moves messages from a queue on one client to a queue on another,
// at least once: it receives a batch from the source, enqueues it to the
// target in one confirmed batch, then acks it on the source. A crash between
// the two leaves the batch on the source, so it is moved again; where the
// target enforces dedup keys, each moved message carries its source id as
// its dedup key (unless it had one of its own), so the second copy is
// refused while the first is still pending.
//
// Kind, body, headers, dedup key, max attempts, remaining delay and attempt
// count carry over; the target assigns new ids and the source id travels in
// the HeaderSourceID header.
//
// Relay serves two stories. Outbox: the source is PostgreSQL, written in the
// application's own transactions (fila.Client.EnqueueTx), and the relay publishes
// to Redis, RabbitMQ or MongoDB — transactional enqueue for every broker.
// Migration: point producers at the target, run the relay with StopWhenIdle
// until the source stays empty (with IncludeDelayed and IncludeDead), retire
// the source.
type Relay struct {
	From      *fila.Client
	FromQueue string
	To        *fila.Client
	// ToQueue defaults to FromQueue.
	ToQueue string

	// Batch is the most messages moved per round trip (default 100).
	Batch int
	// Concurrency is the number of batches in flight (default 1).
	Concurrency int
	// Lease is the source lease of a batch in flight (default 1 minute).
	Lease time.Duration
	// StopWhenIdle ends Run once the source has had no ready message for
	// this long; 0 runs until ctx ends (an outbox relay).
	StopWhenIdle time.Duration
	// IncludeDelayed also moves messages whose run-at has not come, keeping
	// their run-at (the source driver must implement backend.DelayedReceiver).
	IncludeDelayed bool
	// IncludeDead also moves the source queue's dead letters into the
	// target's dead-letter store (backend.DeadLetterer on the source,
	// backend.DeadImporter on the target).
	IncludeDead bool
	// Progress, when set, is called after each moved batch. Progress is
	// also logged at most every 10 seconds.
	Progress func(Stats)
	// Logger defaults to the source client's logger.
	Logger *slog.Logger
}

// Stats count what a Relay moved.
type Stats struct {
	Moved      int64 // ready messages
	Delayed    int64 // delayed messages, with their run-at
	Dead       int64 // dead letters
	Duplicates int64 // messages the target already held (after a crash)
}

// Total is everything moved.
func (s Stats) Total() int64 { return s.Moved + s.Delayed + s.Dead }

type relayRun struct {
	r       *Relay
	log     *slog.Logger
	to      string
	moved   atomic.Int64
	delayed atomic.Int64
	dead    atomic.Int64
	dups    atomic.Int64
	progMu  sync.Mutex
	// loggedAt is when progress was last logged (under progMu).
	loggedAt time.Time
}

func (rr *relayRun) stats() Stats {
	return Stats{Moved: rr.moved.Load(), Delayed: rr.delayed.Load(), Dead: rr.dead.Load(), Duplicates: rr.dups.Load()}
}

// progressLogEvery is the least time between two progress log lines.
const progressLogEvery = 10 * time.Second

func (rr *relayRun) progress() {
	rr.progMu.Lock()
	defer rr.progMu.Unlock()
	st := rr.stats()
	if now := time.Now(); now.Sub(rr.loggedAt) >= progressLogEvery {
		rr.loggedAt = now
		rr.log.Info("fila: relay progress", slog.Int64("moved", st.Moved), slog.Int64("delayed", st.Delayed),
			slog.Int64("dead", st.Dead), slog.Int64("duplicates", st.Duplicates))
	}
	if rr.r.Progress != nil {
		rr.r.Progress(st)
	}
}

// Run moves messages until ctx ends or, with StopWhenIdle, until the source
// stays empty. It returns what it moved; a context ending is not an error
// when StopWhenIdle is 0. When ctx ends, the batches in hand are finished
// (enqueued and acked, for at most 10 seconds more) so that a stopped relay
// leaves nothing to move twice; a batch it cannot move is given back to the
// source at once rather than when its lease expires.
func (r *Relay) Run(ctx context.Context) (Stats, error) {
	if r.From == nil || r.To == nil {
		return Stats{}, invalidf("relay needs both From and To clients")
	}
	if err := fila.ValidateQueueName(r.FromQueue); err != nil {
		return Stats{}, err
	}
	rr := &relayRun{r: r, to: r.ToQueue, log: r.Logger}
	if rr.to == "" {
		rr.to = r.FromQueue
	}
	if err := fila.ValidateQueueName(rr.to); err != nil {
		return Stats{}, err
	}
	if r.From == r.To && rr.to == r.FromQueue {
		return Stats{}, invalidf("relay source and target are the same queue on the same client")
	}
	if rr.log == nil {
		rr.log = h.Logger(r.From)
	}
	rr.log = rr.log.With(slog.String("from_queue", r.FromQueue), slog.String("to_queue", rr.to))
	batch, lease, conc := r.Batch, r.Lease, r.Concurrency
	if batch <= 0 {
		batch = 100
	}
	batch = min(batch, fila.MaxReceive)
	if lease <= 0 {
		lease = time.Minute
	}
	if conc <= 0 {
		conc = 1
	}
	var dr backend.DelayedReceiver
	if r.IncludeDelayed {
		var ok bool
		if dr, ok = r.From.Driver().(backend.DelayedReceiver); !ok {
			return Stats{}, &fila.UnsupportedError{Driver: r.From.DriverName(), Capability: "taking delayed messages early (relay IncludeDelayed)"}
		}
	}
	var dst backend.DeadImporter
	if r.IncludeDead {
		if _, ok := r.From.Driver().(backend.DeadLetterer); !ok {
			return Stats{}, &fila.UnsupportedError{Driver: r.From.DriverName(), Capability: "dead-letter management (relay IncludeDead)"}
		}
		var ok bool
		if dst, ok = r.To.Driver().(backend.DeadImporter); !ok {
			return Stats{}, &fila.UnsupportedError{Driver: r.To.DriverName(), Capability: "importing dead letters (relay IncludeDead)"}
		}
	}
	rr.loggedAt = time.Now()
	rr.log.Info("fila: relay started", slog.Int("batch", batch), slog.Int("concurrency", conc),
		slog.Bool("delayed", r.IncludeDelayed), slog.Bool("dead", r.IncludeDead))

	// Dead letters and delayed messages are moved before the ready ones and
	// again after them, for those that appeared meanwhile (retries during a
	// cut-over).
	extras := func() error {
		if dst != nil {
			if err := rr.moveDead(ctx, dst, batch); err != nil {
				return err
			}
		}
		if dr != nil {
			return rr.moveDelayed(ctx, dr, batch, lease)
		}
		return nil
	}
	err := extras()
	if err == nil {
		err = rr.moveReady(ctx, batch, lease, conc)
	}
	if err == nil && ctx.Err() == nil {
		err = extras()
	}
	st := rr.stats()
	rr.log.Info("fila: relay stopped", slog.Int64("moved", st.Moved), slog.Int64("delayed", st.Delayed),
		slog.Int64("dead", st.Dead), slog.Int64("duplicates", st.Duplicates), slog.Any("error", err))
	return st, err
}

// moveReady runs conc receive→enqueue→ack loops until parent ends or, with
// StopWhenIdle, until no loop has received anything for that long.
func (rr *relayRun) moveReady(parent context.Context, batch int, lease time.Duration, conc int) error {
	r := rr.r
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		// lastSeen is when any loop last received a message (unix nanos).
		lastSeen atomic.Int64
	)
	lastSeen.Store(time.Now().UnixNano())
	fail := func(err error) {
		if perr := parent.Err(); perr != nil && errors.Is(err, perr) {
			cancel() // stopping, not failing
			return
		}
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rctx, rcancel := ctx, context.CancelFunc(func() {})
				if r.StopWhenIdle > 0 {
					idleFor := time.Since(time.Unix(0, lastSeen.Load()))
					if idleFor >= r.StopWhenIdle {
						cancel() // the source stayed empty: done
						return
					}
					rctx, rcancel = context.WithTimeout(ctx, r.StopWhenIdle-idleFor)
				}
				ds, err := r.From.Receive(rctx, r.FromQueue, fila.ReceiveParams{Max: batch, Lease: lease})
				rcancel()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
						fail(fmt.Errorf("relay: receive from %s: %w", r.FromQueue, err))
						return
					}
					continue // idle timeout or stopping: the loop condition decides
				}
				lastSeen.Store(time.Now().UnixNano())
				if err := rr.forward(ctx, ds, nil, &rr.moved); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	switch {
	case firstErr != nil:
		return firstErr
	case r.StopWhenIdle == 0:
		return nil // an outbox relay runs until its context ends
	default:
		return parent.Err()
	}
}

// moveDelayed takes delayed messages early until none is left.
func (rr *relayRun) moveDelayed(ctx context.Context, dr backend.DelayedReceiver, batch int, lease time.Duration) error {
	r := rr.r
	for ctx.Err() == nil {
		var bds []backend.Delivery
		err := h.Call(r.From, ctx, func(ctx context.Context) error {
			var err error
			bds, err = dr.ReceiveDelayed(ctx, r.FromQueue, backend.ReceiveParams{Max: batch, Lease: lease})
			return err
		})
		if err != nil {
			return fmt.Errorf("relay: take delayed messages from %s: %w", r.FromQueue, err)
		}
		if len(bds) == 0 {
			return nil
		}
		ds := make([]*fila.Delivery, len(bds))
		runAts := make([]time.Time, len(bds))
		for i := range bds {
			ds[i] = h.NewDelivery(r.From, r.FromQueue, &bds[i])
			runAts[i] = bds[i].RunAt
		}
		if err := rr.forward(ctx, ds, runAts, &rr.delayed); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// moveDead imports the source's dead letters into the target, then purges
// them from the source, a page at a time. It lists them from the source's
// driver, not with Client.DeadList, so that a letter's reason moves as the
// source stored it: the encoded error history (fila.AttemptError), which
// DeadList decodes.
func (rr *relayRun) moveDead(ctx context.Context, dst backend.DeadImporter, batch int) error {
	r := rr.r
	src := r.From.Driver().(backend.DeadLetterer) // checked by Run
	for ctx.Err() == nil {
		var page backend.DeadPage
		err := h.Call(r.From, ctx, func(ctx context.Context) error {
			var err error
			page, err = src.DeadList(ctx, r.FromQueue, backend.DeadListParams{Limit: batch})
			return err
		})
		if err != nil {
			return fmt.Errorf("relay: list dead letters of %s: %w", r.FromQueue, err)
		}
		if len(page.Letters) == 0 {
			return nil
		}
		letters := make([]backend.DeadLetter, len(page.Letters))
		for i, l := range page.Letters {
			body := l.Body
			if body == nil {
				body = []byte{}
			}
			letters[i] = backend.DeadLetter{
				Message: backend.Message{ID: l.ID, Kind: l.Kind, Body: body, Headers: l.Headers,
					DedupKey: l.DedupKey, MaxAttempts: l.MaxAttempts, EnqueuedAt: l.EnqueuedAt, Priority: l.Priority},
				Queue: l.Queue, Attempts: l.Attempts, Reason: l.Reason, DeadAt: l.DeadAt,
			}
		}
		err = h.Call(r.To, ctx, func(ctx context.Context) error { return dst.DeadImport(ctx, rr.to, letters) })
		if err != nil {
			return fmt.Errorf("relay: import dead letters into %s: %w", rr.to, err)
		}
		ids := make([]string, len(page.Letters))
		for i, l := range page.Letters {
			ids[i] = l.ID
		}
		n, err := r.From.DeadPurge(ctx, r.FromQueue, fila.DeadFilter{IDs: ids})
		if err != nil {
			return fmt.Errorf("relay: purge moved dead letters from %s: %w", r.FromQueue, err)
		}
		if n == 0 {
			// The same page would be listed again forever.
			return fmt.Errorf("relay: purging %d moved dead letters from %s removed none", len(ids), r.FromQueue)
		}
		rr.dead.Add(int64(len(ids)))
		rr.progress()
	}
	return ctx.Err()
}

// forward enqueues ds to the target in one batch, then acks them on the
// source. runAts, when not nil, holds the run-at of each delivery taken
// early (ReceiveDelayed).
func (rr *relayRun) forward(ctx context.Context, ds []*fila.Delivery, runAts []time.Time, counter *atomic.Int64) error {
	r := rr.r
	bms := make([]backend.Message, len(ds))
	now := time.Now()
	for i, d := range ds {
		headers := make(map[string]string, len(d.Headers)+1)
		for k, v := range d.Headers {
			headers[k] = v
		}
		if headers[HeaderSourceID] == "" {
			headers[HeaderSourceID] = d.ID // a later hop keeps the first source's id
		}
		m := fila.Message{Kind: d.Kind, Body: d.Body, Headers: headers, DedupKey: d.DedupKey, MaxAttempts: d.MaxAttempts,
			Priority: d.Priority}
		if runAts != nil {
			m.RunAt = runAts[i]
		}
		dedup := h.Dedup(r.To)
		if m.DedupKey == "" && dedup {
			m.DedupKey = "fila-relay:" + d.ID
		}
		if !dedup {
			m.DedupKey = ""
		}
		bm, err := h.Prepare(r.To, &m, now)
		if err != nil {
			rr.release(ctx, ds)
			return fmt.Errorf("relay: message %s does not fit the target: %w", d.ID, err)
		}
		bm.Attempts = max(d.Attempt-1, 0) // the relay's own delivery is not an attempt
		bms[i] = bm
	}
	// A batch in hand is finished even when ctx ends meanwhile (a stopped
	// relay): enqueued, then acked, within settleTimeout after the stop.
	// Cutting the enqueue short could leave the batch stored on the target
	// and still on the source — a duplicate on the next run wherever the
	// target has no dedup keys.
	fctx, fcancel := graceful(ctx, settleTimeout)
	defer fcancel()
	var res []backend.EnqueueResult
	err := h.Call(r.To, fctx, func(ctx context.Context) error {
		var err error
		res, err = r.To.Driver().Enqueue(ctx, rr.to, bms)
		return err
	})
	if err != nil {
		rr.release(ctx, ds)
		return fmt.Errorf("relay: enqueue %d messages to %s: %w (they stay on the source and are moved again)", len(bms), rr.to, err)
	}
	for _, x := range res {
		if x.Duplicate {
			rr.dups.Add(1)
		}
	}
	if err := r.From.AckBatch(fctx, ds); err != nil {
		// Lost leases mean the batch comes back and is moved again; the dedup
		// key (where the target has them) refuses the second copy.
		rr.log.Warn("fila: relay ack on the source failed; those messages will be moved again", slog.Any("error", err))
	}
	counter.Add(int64(len(ds)))
	rr.progress()
	return nil
}

// settleTimeout bounds how long a relay whose context ended goes on
// finishing the batches in hand (enqueue and ack) or giving them back.
const settleTimeout = 10 * time.Second

// graceful returns a context that outlives ctx by grace: it ends grace after
// ctx ends (or when cancel is called), carrying ctx's values.
func graceful(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		timer = time.AfterFunc(grace, cancel)
		mu.Unlock()
	})
	return g, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// release gives back a batch that could not be moved, so it is ready again at
// once instead of after its lease (best effort: otherwise the lease expires).
func (rr *relayRun) release(ctx context.Context, ds []*fila.Delivery) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	for _, d := range ds {
		if err := d.Release(rctx); err != nil {
			rr.log.Debug("fila: relay could not release a message; it comes back when its lease expires", slog.String("id", d.ID), slog.Any("error", err))
			return
		}
	}
}
