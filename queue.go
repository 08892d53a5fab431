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

// Message is what a producer enqueues. Keep bodies small: put ids in them,
// not whole objects, so a retried job reads fresh data.
type Message struct {
	// Kind names the handler that processes the message ("email.send").
	// Required.
	Kind string
	// Body is opaque bytes; nil is stored as empty.
	Body []byte
	// Headers are string metadata carried with the message (trace context,
	// tenant, content type).
	Headers map[string]string
	// RunAt delays the message until this time. Set RunAt or Delay, not both.
	RunAt time.Time
	// Delay delays the message by this long from enqueue.
	Delay time.Duration
	// DedupKey, when set, makes Enqueue return ErrDuplicate while another
	// pending message of the queue holds the same key. Drivers without dedup
	// support return ErrUnsupported.
	DedupKey string
	// UniqueFor keeps DedupKey held for this long after the enqueue, even
	// when the message completes sooner (and for as long as it is pending,
	// as always): another enqueue of the key that also sets UniqueFor
	// (any period) returns a *DuplicateError with an empty ID within the
	// period. An enqueue without UniqueFor checks only pending messages,
	// so that plain dedup keys cost no extra broker read. It needs DedupKey
	// and a driver with dedup keys and marks; EnqueueTx refuses it (the
	// hold would not roll back with the transaction).
	UniqueFor time.Duration
	// MaxAttempts overrides the client's default (WithMaxAttempts).
	MaxAttempts int
	// Priority is the message's level, from 0 (the default, and the
	// lowest) to MaxPriority (the highest). Among a queue's ready messages
	// a higher level is handed out first; within a level there is no order
	// promise. A delayed message takes its level when it is due, and a
	// retried one keeps it. Strict priority can starve the lower levels of
	// a queue that never runs dry: see worker.Config.Weights for sharing
	// a worker between queues instead. Drivers without priorities return
	// ErrUnsupported for a level above 0.
	Priority int
}

// ReceiveParams tune Receive.
type ReceiveParams struct {
	// Max is the most messages to return; 0 means 1. At most MaxReceive;
	// negative is ErrInvalid.
	Max int
	// Lease is how long each delivery stays invisible to other consumers; 0
	// means the client's default (WithLease). Negative is ErrInvalid.
	Lease time.Duration
}

// Client is a handle to one broker. It is safe for concurrent use; open one
// per process and share it.
type Client struct {
	drv   backend.Driver
	opts  options
	name  string
	dedup bool
	// priorities: the driver hands out higher levels first
	// (backend.Prioritizer).
	priorities bool
	// marker and lister are the driver's marks, nil without them: pause,
	// cancel and unique periods need them (control.go).
	marker backend.Marker
	lister backend.MarkLister
	ctlMu  sync.Mutex
	ctl    map[string]*queueControl
	bg     sync.WaitGroup // refresher goroutines

	mu       sync.RWMutex
	closed   bool
	closeCtx context.Context // cancelled by Close, ending background work
	cancel   context.CancelFunc
	// inflight counts calls in progress so Close can wait for them.
	inflight sync.WaitGroup
	// calls holds the cancel functions of the calls in progress, so Close
	// can end them; a slot is reused once its call has left.
	callsMu sync.Mutex
	calls   []context.CancelCauseFunc
	free    []int
	// wfCache keeps the workflow manifests read (workflow.go).
	wfCache wfCache
}

// New returns a Client over a driver value, for callers that build the
// driver themselves (like sql.OpenDB). Most callers use Open. It fails,
// with an ErrInvalid error, only for a nil driver or a bad option value; it
// does not contact the broker.
func New(drv backend.Driver, opts ...Option) (*Client, error) {
	if drv == nil {
		return nil, invalidf("New with a nil driver")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{drv: drv, opts: o, name: "unnamed"}
	c.closeCtx, c.cancel = context.WithCancel(context.Background())
	if n, ok := drv.(backend.Namer); ok {
		c.name = n.DriverName()
	}
	if d, ok := drv.(backend.Deduper); ok {
		c.dedup = d.DedupKeys()
	}
	if p, ok := drv.(backend.Prioritizer); ok {
		c.priorities = p.Priorities()
	}
	c.ctl = map[string]*queueControl{}
	if m, ok := drv.(backend.Marker); ok {
		c.marker = m
		if l, ok := drv.(backend.MarkLister); ok {
			c.lister = l
		}
	}
	return c, nil
}

// DriverName returns the short name of the client's driver ("postgres",
// "mysql", "redis", "rabbitmq", "mongo", "memory"), as errors and logs name it:
// the driver's backend.Namer name, or "unnamed" for a driver without one.
func (c *Client) DriverName() string { return c.name }

// Driver returns the underlying driver, for driver-specific features.
func (c *Client) Driver() backend.Driver { return c.drv }

// entered is one Client method's use of the driver, from enter to leave.
type entered struct {
	// ctx ends when the caller's context does, when the client closes, or
	// when cancel is called (a pause ends a Receive's call this way).
	ctx    context.Context
	cancel context.CancelCauseFunc
	slot   int
}

// enter marks the start of a call; it fails with ErrClosed after Close. The
// call's context is cancelled when the client closes, so blocked calls end.
// It costs one cancellable context and a slot in the client's table of
// calls, which Close walks: a context.AfterFunc on a client-wide context
// per call cost twice as much.
func (c *Client) enter(ctx context.Context) (entered, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return entered{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return entered{}, err
	}
	c.inflight.Add(1)
	cctx, cancel := context.WithCancelCause(ctx)
	c.callsMu.Lock()
	var slot int
	if n := len(c.free); n > 0 {
		slot = c.free[n-1]
		c.free = c.free[:n-1]
		c.calls[slot] = cancel
	} else {
		slot = len(c.calls)
		c.calls = append(c.calls, cancel)
	}
	c.callsMu.Unlock()
	return entered{ctx: cctx, cancel: cancel, slot: slot}, nil
}

// leave ends a call that enter started.
func (c *Client) leave(cl entered) {
	c.callsMu.Lock()
	c.calls[cl.slot] = nil
	c.free = append(c.free, cl.slot)
	c.callsMu.Unlock()
	cl.cancel(nil)
	c.inflight.Done()
}

// cancelCalls ends every call in progress, for Close.
func (c *Client) cancelCalls() {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	for _, cancel := range c.calls {
		if cancel != nil {
			cancel(nil)
		}
	}
}

// call runs f under enter and maps its error with done: the sequence of
// every Client method that calls the driver. EnqueueBatch, Receive and
// AckBatch use enter and done themselves, because they map some errors and
// not others (per-message and per-delivery results).
func (c *Client) call(ctx context.Context, f func(context.Context) error) error {
	cl, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer c.leave(cl)
	return c.done(ctx, f(cl.ctx))
}

// done maps an error from a call made under enter: a cancellation caused by
// Close becomes ErrClosed; the caller's context errors stay unwrapped.
func (c *Client) done(parent context.Context, err error) error {
	if err == nil {
		return nil
	}
	if parent.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && c.isClosed() {
		return ErrClosed
	}
	if perr := parent.Err(); perr != nil && errors.Is(err, perr) {
		return perr
	}
	return err
}

func (c *Client) isClosed() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.closed
}

// Close closes the client: calls in progress end with ErrClosed, later calls
// return ErrClosed. Close never acks: messages leased by this client are
// released by the driver or come back when their leases expire. Closing twice
// is harmless.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cancel()
	c.mu.Unlock()
	c.cancelCalls()
	c.inflight.Wait()
	c.bg.Wait()
	if c.marker != nil {
		c.flowClose() // the concurrency slots this client kept for reuse
	}
	return c.drv.Close()
}

// Enqueue stores one message in queue and returns its id. With a dedup key
// held by a pending message it returns a *DuplicateError (ErrDuplicate) that
// carries the holder's id.
func (c *Client) Enqueue(ctx context.Context, queue string, m Message) (string, error) {
	ids, err := c.EnqueueBatch(ctx, queue, []Message{m})
	if len(ids) == 1 {
		return ids[0], err
	}
	return "", err
}

// EnqueueBatch stores msgs in queue and returns their ids in order. The
// batch is validated whole first: one invalid message fails the call and
// stores nothing. Messages whose dedup keys are taken are not stored: their
// slots hold the holders' ids and the error is a *DuplicateError for the
// first of them, with every other message stored.
func (c *Client) EnqueueBatch(ctx context.Context, queue string, msgs []Message) ([]string, error) {
	bms, err := c.prepareBatch(queue, msgs)
	if err != nil {
		return nil, err
	}
	cl, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer c.leave(cl)
	cctx := cl.ctx
	held, claimed, err := c.holdUnique(cctx, queue, msgs, bms[0].EnqueuedAt)
	if err != nil {
		return nil, c.done(ctx, err)
	}
	if held == nil {
		res, err := c.drv.Enqueue(cctx, queue, bms)
		if err != nil {
			c.releaseUnique(queue, msgs, claimed)
			return nil, c.done(ctx, err)
		}
		return enqueueIDs(queue, bms, res)
	}
	return c.enqueueUnique(cctx, ctx, queue, msgs, bms, held, claimed)
}

// enqueueUnique enqueues the messages of a batch whose unique periods are
// not held, and reports the others as duplicates with an empty holder id.
func (c *Client) enqueueUnique(cctx, ctx context.Context, queue string, msgs []Message, bms []backend.Message, held []bool, claimed []int) ([]string, error) {
	var send []backend.Message
	var at []int
	for i := range bms {
		if !held[i] {
			send = append(send, bms[i])
			at = append(at, i)
		}
	}
	res := make([]backend.EnqueueResult, len(bms))
	for i := range held {
		if held[i] {
			res[i] = backend.EnqueueResult{Duplicate: true}
		}
	}
	if len(send) > 0 {
		sent, err := c.drv.Enqueue(cctx, queue, send)
		if err != nil {
			c.releaseUnique(queue, msgs, claimed)
			return nil, c.done(ctx, err)
		}
		if len(sent) != len(send) {
			return nil, fmt.Errorf("fila: driver returned %d results for %d messages", len(sent), len(send))
		}
		for j, r := range sent {
			res[at[j]] = r
		}
	}
	// A claimed period whose message was refused as a duplicate (a pending
	// message holds the key) was not started by this call: give it back.
	var refused []int
	for _, i := range claimed {
		if res[i].Duplicate {
			refused = append(refused, i)
		}
	}
	c.releaseUnique(queue, msgs, refused)
	return enqueueIDs(queue, bms, res)
}

// EnqueueTx enqueues msgs inside a transaction the caller owns, so they
// commit or roll back with the caller's own writes, and returns their ids in
// order; the batch is checked and reported like EnqueueBatch's. The type of
// tx depends on the driver (for PostgreSQL, a pgx.Tx); drivers without
// transactional enqueue return ErrUnsupported.
func (c *Client) EnqueueTx(ctx context.Context, tx any, queue string, msgs []Message) ([]string, error) {
	txe, ok := c.drv.(backend.TxEnqueuer)
	if !ok {
		return nil, &UnsupportedError{Driver: c.name, Capability: "transactional enqueue"}
	}
	bms, err := c.prepareBatch(queue, msgs)
	if err != nil {
		return nil, err
	}
	for i := range msgs {
		if msgs[i].UniqueFor != 0 {
			return nil, invalidf("EnqueueTx cannot hold a dedup key for a period (UniqueFor): the hold would not roll back with the transaction")
		}
	}
	var res []backend.EnqueueResult
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		res, err = txe.EnqueueTx(ctx, tx, queue, bms)
		return err
	})
	if err != nil {
		return nil, err
	}
	return enqueueIDs(queue, bms, res)
}

func (c *Client) prepareBatch(queue string, msgs []Message) ([]backend.Message, error) {
	if err := ValidateQueueName(queue); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, invalidf("batch is empty")
	}
	if len(msgs) > MaxBatch {
		return nil, invalidf("batch has %d messages; the limit is %d", len(msgs), MaxBatch)
	}
	now := time.Now()
	bms := make([]backend.Message, len(msgs))
	size := 0
	for i := range msgs {
		bm, err := c.prepare(&msgs[i], now)
		if err != nil {
			if len(msgs) > 1 {
				return nil, fmt.Errorf("message %d of the batch: %w", i, err)
			}
			return nil, err
		}
		bms[i] = bm
		size += messageBytes(&bm)
	}
	if size > MaxBatchBytes {
		return nil, fmt.Errorf("%w: the batch's bodies and headers total %d bytes; the limit is %d (enqueue it in smaller batches)",
			ErrTooLarge, size, MaxBatchBytes)
	}
	return bms, nil
}

func enqueueIDs(queue string, bms []backend.Message, res []backend.EnqueueResult) ([]string, error) {
	if len(res) != len(bms) {
		return nil, fmt.Errorf("fila: driver returned %d results for %d messages", len(res), len(bms))
	}
	ids := make([]string, len(res))
	var dup error
	for i, r := range res {
		ids[i] = r.ID
		if r.Duplicate && dup == nil {
			dup = &DuplicateError{Queue: queue, DedupKey: bms[i].DedupKey, ID: r.ID}
		}
	}
	return ids, dup
}

// Receive blocks until at least one message of queue is available or ctx
// ends, and returns up to p.Max deliveries, each leased for p.Lease. A
// message whose attempt would exceed its max attempts is dead-lettered with
// reason "max attempts exceeded" instead of being returned.
func (c *Client) Receive(ctx context.Context, queue string, p ReceiveParams) ([]*Delivery, error) {
	bp, err := c.receiveParams(queue, p)
	if err != nil {
		return nil, err
	}
	cl, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	inCall := true
	defer func() {
		if inCall {
			c.leave(cl)
		}
	}()
	for {
		cctx := cl.ctx
		var qc *queueControl
		if c.marker != nil {
			// While the queue is paused nothing is received; a pause
			// the client's refresher sees meanwhile ends the driver's
			// Receive (receiveUnlessPaused).
			var paused bool
			var err error
			qc, paused, err = c.receiveState(cctx, queue)
			if err != nil {
				return nil, c.done(ctx, err)
			}
			if paused {
				if err := c.waitResume(cctx, queue, qc); err != nil {
					return nil, c.done(ctx, err)
				}
				continue
			}
		}
		var lim QueueLimits
		if qc != nil {
			lim = qc.flowLimits()
		}
		var out []*Delivery
		if !lim.IsZero() {
			out, err = c.receiveLimited(ctx, cl, qc, queue, bp, lim)
		} else {
			var bds []backend.Delivery
			bds, err = c.receiveUnlessPaused(cl, qc, queue, bp, nil)
			if err == nil {
				out = c.deliveries(cctx, qc, queue, bds, nil)
			} else if !errors.Is(err, errPaused) {
				err = c.done(ctx, err)
			}
		}
		if errors.Is(err, errPaused) {
			// The pause may have ended the call's context: wait for the
			// resume under a fresh one.
			c.leave(cl)
			inCall = false
			if cl, err = c.enter(ctx); err != nil {
				return nil, err
			}
			inCall = true
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// receiveParams checks Receive's arguments and fills in the defaults.
func (c *Client) receiveParams(queue string, p ReceiveParams) (backend.ReceiveParams, error) {
	if err := ValidateQueueName(queue); err != nil {
		return backend.ReceiveParams{}, err
	}
	if p.Max < 0 || p.Max > MaxReceive {
		return backend.ReceiveParams{}, invalidf("receive max %d must be between 0 (one) and %d", p.Max, MaxReceive)
	}
	if p.Max == 0 {
		p.Max = 1
	}
	if p.Lease == 0 {
		p.Lease = c.opts.lease
	}
	if err := validateLease(p.Lease); err != nil {
		return backend.ReceiveParams{}, err
	}
	return backend.ReceiveParams{Max: p.Max, Lease: p.Lease}, nil
}

// deliveries turns what the driver claimed into deliveries, leaving out
// (and dead-lettering) the cancelled messages and those past their max
// attempts.
func (c *Client) deliveries(ctx context.Context, qc *queueControl, queue string, bds []backend.Delivery, g *flowGrant) []*Delivery {
	out := make([]*Delivery, 0, len(bds))
	for i := range bds {
		bd := &bds[i]
		if qc != nil && qc.isCancelled(bd.ID) {
			c.deadCancelled(ctx, queue, bd)
			g.free(c, queue, qc, i)
			continue
		}
		max := bd.MaxAttempts
		if max == 0 {
			max = c.opts.maxAttempts
		}
		if bd.Attempt > max {
			c.deadExhausted(ctx, queue, bd, max)
			g.free(c, queue, qc, i)
			continue
		}
		d := c.newDelivery(queue, bd)
		if g != nil && i < len(g.slots) {
			d.flowSlot, d.flowUntil = g.slots[i].name, g.slots[i].until
		}
		if qc != nil {
			c.watch(qc, d)
		}
		out = append(out, d)
	}
	return out
}

// AckReceive acks ds as AckBatch does and claims up to p.Max messages of
// queue that are ready now, in one round trip where the driver can
// (backend.AckReceiver): a consumer that acks what it ran and receives
// again waits for one round trip instead of two. It never waits for
// messages. When it returns none (nothing was ready, the driver cannot
// combine the two, the queue is paused, or its limits leave no room at
// hand: a concurrency limit half taken or more, a rate limit whose share
// this client drew is used up), call Receive. Under a concurrency limit
// the slots of the acked deliveries pass to the messages claimed.
//
// ackErr is AckBatch's result for ds. err is the claim's: with it nothing
// was received. Invalid arguments return ErrInvalid as err and ack
// nothing.
func (c *Client) AckReceive(ctx context.Context, ds []*Delivery, queue string, p ReceiveParams) (received []*Delivery, ackErr, err error) {
	bp, err := c.receiveParams(queue, p)
	if err != nil {
		return nil, nil, err
	}
	ar, ok := c.drv.(backend.AckReceiver)
	if !ok {
		return nil, c.AckBatch(ctx, ds), nil
	}
	cl, err := c.enter(ctx)
	if err != nil {
		return nil, err, err
	}
	defer c.leave(cl)
	var qc *queueControl
	var g *flowGrant
	claimed := 0
	if c.marker != nil {
		var paused bool
		qc, paused, err = c.receiveState(cl.ctx, queue)
		limited := false
		if err == nil && !paused {
			if lim := qc.flowLimits(); !lim.IsZero() {
				g, limited = c.flowHandOver(queue, qc, lim, ds, bp.Max, bp.Lease)
				if !limited {
					// Waiting for room is Receive's: only ack.
					return nil, c.ackDeliveries(ctx, cl.ctx, ds, c.drv.Ack), nil
				}
				bp.Max = g.n(bp.Max)
				// The slots and tokens of the messages not claimed go
				// back; the slots of those claimed ride on their
				// deliveries (deliveries frees the ones it does not hand
				// out).
				defer func() {
					c.flowFree(queue, qc, g.slots[min(claimed, len(g.slots)):])
					qc.flowUnused(g.lim, g.tokens[min(claimed, len(g.tokens)):])
				}()
			}
		}
		if err != nil || paused {
			return nil, c.ackDeliveries(ctx, cl.ctx, ds, c.drv.Ack), c.done(ctx, err)
		}
	}
	ran := false
	bds, err := c.receiveUnlessPaused(cl, qc, queue, bp, func(cctx context.Context) ([]backend.Delivery, error) {
		ran = true
		var (
			got  []backend.Delivery
			gerr error
			sent bool
		)
		ackErr = c.ackDeliveries(ctx, cctx, ds, func(ctx context.Context, refs []backend.Ref) ([]error, error) {
			sent = true
			var per []error
			per, got, gerr = ar.AckReceive(ctx, refs, queue, bp)
			if per == nil && gerr != nil {
				return nil, gerr
			}
			return per, nil
		})
		if !sent { // every delivery was settled already: only claim
			_, got, gerr = ar.AckReceive(cctx, nil, queue, bp)
		}
		return got, gerr
	})
	if !ran { // paused just now: the acks alone
		return nil, c.ackDeliveries(ctx, cl.ctx, ds, c.drv.Ack), nil
	}
	if err == nil {
		claimed = len(bds)
	}
	if errors.Is(err, errPaused) {
		return nil, ackErr, nil
	}
	if err != nil {
		return nil, ackErr, c.done(ctx, err)
	}
	if g != nil {
		bds = c.flowFreshen(cl.ctx, queue, qc, g, bds)
		claimed = len(bds)
	}
	return c.deliveries(cl.ctx, qc, queue, bds, g), ackErr, nil
}

// errPaused ends a driver Receive when its queue was paused meanwhile.
var errPaused = errors.New("fila: queue paused")

// receiveUnlessPaused calls the driver's Receive, or claim when it is not
// nil, under the call cl; with marks, a pause seen meanwhile ends cl's
// context with errPaused and what the driver claimed goes back.
func (c *Client) receiveUnlessPaused(cl entered, qc *queueControl, queue string, p backend.ReceiveParams,
	claim func(context.Context) ([]backend.Delivery, error)) ([]backend.Delivery, error) {
	call := func() ([]backend.Delivery, error) {
		if claim != nil {
			return claim(cl.ctx)
		}
		return c.drv.Receive(cl.ctx, queue, p)
	}
	if qc != nil {
		key, ok := qc.addReceiver(cl.cancel)
		if !ok {
			return nil, errPaused
		}
		defer qc.removeReceiver(key)
	}
	bds, err := call()
	if len(bds) > p.Max {
		// A driver bug; the caller sized its work by Max (a worker counts
		// its free slots by it), so the extra ones go back.
		c.opts.logger.Error("fila: the driver returned more deliveries than Max; the extra ones are given back",
			slog.String("queue", queue), slog.Int("max", p.Max), slog.Int("returned", len(bds)))
		c.giveBack(queue, bds[p.Max:], "returned past Max")
		bds = bds[:p.Max]
	}
	if errors.Is(context.Cause(cl.ctx), errPaused) {
		// The pause was seen while the driver was claiming: what it claimed
		// goes back at once (a delivery, counted like any other), so
		// nothing is handed out after a pause was seen.
		c.giveBack(queue, bds, "claimed as its queue was paused")
		return nil, errPaused
	}
	if cl.ctx.Err() != nil && len(bds) > 0 && c.isClosed() {
		// Close ended the call while the driver completed a claim it had
		// sent: nobody will settle these, so they go back at once
		// (contract: close). Close waits for the give-back (the call
		// counts as in flight until it returns, so the Add comes first).
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			c.giveBack(queue, bds, "claimed as the client closed")
		}()
		return nil, ErrClosed
	}
	// A claim the driver completed after the caller's context ended is
	// returned, not given back: a consumer polling with contexts shorter
	// than a claim (FerretDB under load) would otherwise claim and give
	// back the same message forever (contract: cancellation).
	return bds, err
}

// giveBack releases claimed deliveries that will not be handed out; why
// says why, for the log line of a release that failed.
func (c *Client) giveBack(queue string, bds []backend.Delivery, why string) {
	if len(bds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.closeCtx), 10*time.Second)
	defer cancel()
	for _, bd := range bds {
		ref := backend.Ref{Queue: queue, ID: bd.ID, Receipt: bd.Receipt}
		err := c.drv.Retry(ctx, ref, 0, "")
		if err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrClosed) {
			c.opts.logger.Warn("fila: giving back a message "+why+" failed; it comes back when its lease expires",
				slog.String("queue", queue), slog.String("id", bd.ID), slog.Any("error", err))
		}
	}
}

func (c *Client) deadExhausted(ctx context.Context, queue string, bd *backend.Delivery, max int) {
	ref := backend.Ref{Queue: queue, ID: bd.ID, Receipt: bd.Receipt}
	// The claim may have come back while ctx was ending: dead-letter it
	// anyway, or it would wait for its lease to expire first.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The dead letter keeps the message's error history, ReasonMaxAttempts
	// last, recorded at the attempts it had.
	reason := withError(bd.LastError, bd.Attempt-1, time.Now(), ReasonMaxAttempts)
	err := c.drv.Dead(ctx, ref, reason, bd.Attempt-1)
	log := c.opts.logger.With(slog.String("queue", queue), slog.String("kind", bd.Kind),
		slog.String("id", bd.ID), slog.Int("attempt", bd.Attempt), slog.Int("max_attempts", max))
	switch {
	case err == nil:
		log.Warn("fila: message dead-lettered: max attempts exceeded", slog.String("last_error", latestError(bd.LastError)))
	case errors.Is(err, ErrLeaseLost):
		// Someone else holds it now; they will see the same attempt count.
	default:
		// The lease will expire and the next receiver tries again.
		log.Error("fila: dead-lettering an exhausted message failed; it will be retried when its lease expires", slog.Any("error", err))
	}
}

// ReasonMaxAttempts is the dead-letter reason of a message delivered more
// times than its max attempts. Its dead letter's Errors are the reasons of
// the message's latest retries.
const ReasonMaxAttempts = "max attempts exceeded"
