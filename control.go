package fila

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
)

// Job control: pausing a queue, cancelling a message by id and holding a
// dedup key for a period are stored in the broker as marks
// (backend.Marker), so that every client of every process sees them. A
// client looks for the marks of the queues it receives from once per
// control interval (WithControlInterval); see the package documentation
// for the bounds this gives.

// Mark names the portable layer uses. A driver stores them as they are.
const (
	markPause        = "pause"
	markCancelPrefix = "cancel/"
	markUniquePrefix = "unique/"
)

// DefaultControlInterval is how often a client looks for pause and cancel
// marks of the queues it works on, unless WithControlInterval says
// otherwise.
const DefaultControlInterval = time.Second

// ReasonCancelled is the dead-letter reason of a message cancelled with
// MessageCancel.
const ReasonCancelled = "cancelled"

// CancelHold is how long a cancel waits for its message: a delayed message
// that becomes due more than CancelHold after MessageCancel is not
// cancelled.
const CancelHold = 90 * 24 * time.Hour

// queueControl is a client's view of one queue's pause and cancel marks.
// Lock order: Delivery.mu, then queueControl.fetchMu, then queueControl.mu;
// code holding qc.mu never takes a delivery's mu.
type queueControl struct {
	fetchMu sync.Mutex // one refresh at a time

	mu        sync.Mutex
	fetchedAt time.Time
	paused    bool
	cancelled map[string]bool
	// watches are the deliveries of this client not settled yet, by id,
	// whose Cancelled channel a refresh closes.
	watches map[string]*Delivery
	running bool // a refresher goroutine runs
	// receivers cancels the driver Receive calls in progress, for a pause.
	receivers map[uint64]context.CancelCauseFunc
	nextKey   uint64
	// resumed is closed when a pause seen by this client ends; Receive
	// calls waiting out the pause wait for it (waiting counts them, and
	// keeps the refresher running for them).
	resumed chan struct{}
	waiting int
	// limits are the queue's flow control limits (flow.go); flowFreed is
	// closed when this client frees a slot or sees new limits, waking the
	// Receive calls waiting for room.
	limits    QueueLimits
	flowFreed chan struct{}
	// flow is what this client keeps between Receive calls under the
	// limits (flowgate.go); it has a lock of its own, taken after qc.mu
	// is released.
	flow flowState
	// first is the refresh that gives this client its first view of the
	// queue's marks, in flight or failed (nil before it starts and after it
	// fails); see firstRefresh.
	first *pendingRefresh
}

// pendingRefresh is a refresh running apart from the calls waiting for
// it: done is closed when it ends, with err.
type pendingRefresh struct {
	done chan struct{}
	err  error
}

// flowLimits returns the queue's limits as this client last read them.
func (qc *queueControl) flowLimits() QueueLimits {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	return qc.limits
}

// setPausedLocked records whether the queue is paused, waking the Receive
// calls that wait for a resume. qc.mu is held.
func (qc *queueControl) setPausedLocked(paused bool) {
	qc.paused = paused
	if paused {
		qc.stopReceiversLocked()
	} else if qc.resumed != nil {
		close(qc.resumed)
		qc.resumed = nil
	}
}

// waitResume waits until the client sees queue resumed, or ctx ends. The
// refresher reads the marks once per control interval, so a resume made by
// any client is seen within that interval and one read of the marks.
func (c *Client) waitResume(ctx context.Context, queue string, qc *queueControl) error {
	qc.mu.Lock()
	if !qc.paused {
		qc.mu.Unlock()
		return nil
	}
	if qc.resumed == nil {
		qc.resumed = make(chan struct{})
	}
	ch := qc.resumed
	qc.waiting++
	qc.mu.Unlock()
	defer func() {
		qc.mu.Lock()
		qc.waiting--
		qc.mu.Unlock()
	}()
	c.ensureRefresher(queue, qc)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) control(queue string) *queueControl {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	qc := c.ctl[queue]
	if qc == nil {
		qc = &queueControl{cancelled: map[string]bool{}, watches: map[string]*Delivery{}, receivers: map[uint64]context.CancelCauseFunc{},
			flowFreed: make(chan struct{})}
		c.ctl[queue] = qc
	}
	return qc
}

// refresh reads queue's pause and cancel marks into qc, unless another
// caller did within the interval.
func (c *Client) refresh(ctx context.Context, queue string, qc *queueControl, force bool) error {
	qc.fetchMu.Lock()
	defer qc.fetchMu.Unlock()
	qc.mu.Lock()
	fresh := !force && time.Since(qc.fetchedAt) < c.opts.controlInterval
	qc.mu.Unlock()
	if fresh {
		return nil
	}
	// Cancels first, then the pause: a refresh that sees a cancel made
	// after a pause sees that pause too.
	var cancelled map[string]bool
	var limits QueueLimits
	if c.lister != nil {
		names, err := c.lister.MarkList(ctx, queue, markCancelPrefix)
		if err != nil {
			return err
		}
		cancelled = make(map[string]bool, len(names))
		for _, n := range names {
			cancelled[strings.TrimPrefix(n, markCancelPrefix)] = true
		}
		if names, err = c.lister.MarkList(ctx, queue, markLimitsPrefix); err != nil {
			return err
		}
		limits, _ = limitsFromMarks(names)
	}
	paused, err := c.marker.MarkGet(ctx, queue, markPause)
	if err != nil {
		return err
	}
	qc.mu.Lock()
	defer qc.mu.Unlock()
	qc.fetchedAt = time.Now()
	qc.setPausedLocked(paused)
	if c.lister != nil {
		if limits != qc.limits {
			qc.limits = limits
			close(qc.flowFreed)
			qc.flowFreed = make(chan struct{})
		}
		qc.cancelled = cancelled
		for id, d := range qc.watches {
			if cancelled[id] {
				d.markCancelled()
			}
		}
	}
	return nil
}

// ensureRefresher keeps qc fresh in the background while this client
// receives from the queue or holds unsettled deliveries of it, so that a
// cancel reaches running handlers even when no Receive is waiting.
func (c *Client) ensureRefresher(queue string, qc *queueControl) {
	qc.mu.Lock()
	if qc.running {
		qc.mu.Unlock()
		return
	}
	qc.running = true
	qc.mu.Unlock()
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		t := time.NewTicker(c.opts.controlInterval)
		defer t.Stop()
		for {
			select {
			case <-c.closeCtx.Done():
				return
			case <-t.C:
			}
			// Lock order: a Delivery's mu before qc.mu (settlements hold
			// the delivery's while they forget it here), so deadlines are
			// read outside qc.mu.
			qc.mu.Lock()
			watched := make([]*Delivery, 0, len(qc.watches))
			for _, d := range qc.watches {
				watched = append(watched, d)
			}
			qc.mu.Unlock()
			now := time.Now()
			var stale []*Delivery
			for _, d := range watched {
				if d.Deadline().Before(now) {
					stale = append(stale, d) // its lease is over: nothing to tell its holder
				}
			}
			qc.mu.Lock()
			for _, d := range stale {
				if qc.watches[d.ID] == d {
					delete(qc.watches, d.ID)
				}
			}
			idle := len(qc.watches) == 0 && len(qc.receivers) == 0 && qc.waiting == 0
			qc.mu.Unlock()
			// Slots kept for reuse and idle for an interval go back.
			pooled := c.flowTrim(queue, qc, time.Now().Add(-c.opts.controlInterval))
			if idle && !pooled {
				qc.mu.Lock()
				if len(qc.watches) == 0 && len(qc.receivers) == 0 && qc.waiting == 0 {
					qc.running = false
					qc.mu.Unlock()
					return
				}
				qc.mu.Unlock()
			}
			ctx, cancel := context.WithTimeout(c.closeCtx, 10*time.Second)
			err := c.refresh(ctx, queue, qc, true)
			cancel()
			if err != nil && c.closeCtx.Err() == nil {
				c.opts.logger.Debug("fila: reading pause and cancel marks failed; retrying", slog.String("queue", queue), slog.Any("error", err))
			}
		}
	}()
}

// receiveState returns queue's control state and whether it is paused.
// A client's first Receive on a queue reads the marks first; later, when
// the client's view is older than the control interval (its refresher had
// stopped), a refresh starts beside the Receive, so the reads do not delay
// it; the view is then at most one interval and one read old.
func (c *Client) receiveState(ctx context.Context, queue string) (*queueControl, bool, error) {
	qc := c.control(queue)
	c.ensureRefresher(queue, qc)
	qc.mu.Lock()
	never := qc.fetchedAt.IsZero()
	stale := time.Since(qc.fetchedAt) >= c.opts.controlInterval
	qc.mu.Unlock()
	switch {
	case never:
		if err := c.firstRefresh(ctx, queue, qc); err != nil {
			return nil, false, err
		}
	case stale:
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			rctx, cancel := context.WithTimeout(c.closeCtx, 10*time.Second)
			defer cancel()
			if err := c.refresh(rctx, queue, qc, false); err != nil && c.closeCtx.Err() == nil {
				c.opts.logger.Debug("fila: reading pause and cancel marks failed", slog.String("queue", queue), slog.Any("error", err))
			}
		}()
	}
	return qc, qc.isPaused(), nil
}

// firstRefresh waits, as long as ctx allows, for the client's first read
// of queue's marks. The read runs on a context of its own and carries on
// when ctx ends, so that consumers calling Receive with contexts shorter
// than the reads take (a busy server) still get past it: the next call
// waits for the same read rather than starting another. A read that fails
// is started again by the next call.
func (c *Client) firstRefresh(ctx context.Context, queue string, qc *queueControl) error {
	qc.mu.Lock()
	f := qc.first
	if f == nil {
		f = &pendingRefresh{done: make(chan struct{})}
		qc.first = f
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			rctx, cancel := context.WithTimeout(c.closeCtx, 10*time.Second)
			f.err = c.refresh(rctx, queue, qc, false)
			cancel()
			if f.err != nil {
				qc.mu.Lock()
				if qc.first == f {
					qc.first = nil
				}
				qc.mu.Unlock()
			}
			close(f.done)
		}()
	}
	qc.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (qc *queueControl) isPaused() bool {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	return qc.paused
}

// addReceiver registers the cancel of a driver Receive about to start; it
// returns false, registering nothing, when the queue is paused.
func (qc *queueControl) addReceiver(cancel context.CancelCauseFunc) (uint64, bool) {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	if qc.paused {
		return 0, false
	}
	qc.nextKey++
	qc.receivers[qc.nextKey] = cancel
	return qc.nextKey, true
}

func (qc *queueControl) removeReceiver(key uint64) {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	delete(qc.receivers, key)
}

// stopReceiversLocked ends the driver Receive calls in progress: the queue
// was paused.
func (qc *queueControl) stopReceiversLocked() {
	for key, cancel := range qc.receivers {
		cancel(errPaused)
		delete(qc.receivers, key)
	}
}

func (qc *queueControl) isCancelled(id string) bool {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	return qc.cancelled[id]
}

// watch registers d so a cancel seen later closes its Cancelled channel.
func (c *Client) watch(qc *queueControl, d *Delivery) {
	if c.lister == nil {
		return
	}
	qc.mu.Lock()
	qc.watches[d.ID] = d
	if qc.cancelled[d.ID] {
		d.markCancelled()
	}
	qc.mu.Unlock()
	// The refresher may have ended between the Receive and now, seeing
	// neither a receiver nor a watched delivery.
	c.ensureRefresher(d.Queue, qc)
}

// settled forgets d after its settlement and, when it had been cancelled,
// deletes the cancel mark.
func (c *Client) settled(d *Delivery) {
	if d.flowSlot != "" {
		c.flowFree(d.Queue, c.control(d.Queue), []pooledSlot{{name: d.flowSlot, until: d.flowUntil}})
		d.flowSlot = ""
	}
	if c.lister == nil {
		return
	}
	qc := c.control(d.Queue)
	qc.mu.Lock()
	if qc.watches[d.ID] == d {
		delete(qc.watches, d.ID)
	}
	was := qc.cancelled[d.ID]
	delete(qc.cancelled, d.ID)
	qc.mu.Unlock()
	if was || d.isCancelled() {
		c.dropCancelMark(d.Queue, d.ID)
	}
}

func (c *Client) dropCancelMark(queue, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.closeCtx), 10*time.Second)
	defer cancel()
	if err := c.marker.MarkDelete(ctx, queue, markCancelPrefix+id); err != nil {
		c.opts.logger.Debug("fila: deleting a cancel mark failed; it expires on its own", slog.String("queue", queue), slog.String("id", id), slog.Any("error", err))
	}
}

// QueuePause pauses queue: within twice the control interval (see
// WithControlInterval) no client of the broker hands out its messages, in
// any process. Enqueue goes on working; deliveries already handed out stay
// leased and are settled as usual. Pausing a paused queue changes nothing.
// Drivers without marks return ErrUnsupported.
func (c *Client) QueuePause(ctx context.Context, queue string) error {
	return c.setPause(ctx, queue, true)
}

// QueueResume undoes QueuePause: receivers of this client start again at
// once, those of other clients within the control interval and one read of
// the marks. Resuming a queue that is not paused changes nothing.
func (c *Client) QueueResume(ctx context.Context, queue string) error {
	return c.setPause(ctx, queue, false)
}

func (c *Client) setPause(ctx context.Context, queue string, pause bool) error {
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	if c.marker == nil {
		return &UnsupportedError{Driver: c.name, Capability: "pausing queues (marks)"}
	}
	err := c.call(ctx, func(ctx context.Context) error {
		if pause {
			_, err := c.marker.MarkSet(ctx, queue, markPause, time.Time{}, false)
			return err
		}
		return c.marker.MarkDelete(ctx, queue, markPause)
	})
	if err != nil {
		return err
	}
	qc := c.control(queue)
	qc.mu.Lock()
	qc.setPausedLocked(pause)
	qc.mu.Unlock()
	return nil
}

// QueuePaused reports whether queue is paused.
func (c *Client) QueuePaused(ctx context.Context, queue string) (bool, error) {
	if err := ValidateQueueName(queue); err != nil {
		return false, err
	}
	if c.marker == nil {
		return false, &UnsupportedError{Driver: c.name, Capability: "pausing queues (marks)"}
	}
	var paused bool
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		paused, err = c.marker.MarkGet(ctx, queue, markPause)
		return err
	})
	return paused, err
}

// MessageCancel cancels the message id of queue. A message that is ready
// or delayed is never handed out: the first client to claim it
// dead-letters it with reason ReasonCancelled instead (so until then it
// counts as ready or delayed in QueueStats; replay it from the dead
// letters to run it after all). A message that is leased runs on: within
// the control interval the holder's Delivery.Cancelled channel closes (the
// worker cancels the handler's context), and its Retry or Release
// dead-letters it and returns ErrCancelled instead of retrying; an Ack
// still acks it. A cancel waits up to CancelHold for its message; an
// unknown id is not an error. Drivers that cannot list marks return
// ErrUnsupported.
func (c *Client) MessageCancel(ctx context.Context, queue, id string) error {
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	if id == "" || len(id) > 128 || !printable(id) {
		return invalidf("message id %.40q must be 1 to 128 printable bytes", id)
	}
	if c.lister == nil {
		return &UnsupportedError{Driver: c.name, Capability: "cancelling messages (listing marks)"}
	}
	err := c.call(ctx, func(ctx context.Context) error {
		_, err := c.marker.MarkSet(ctx, queue, markCancelPrefix+id, time.Now().Add(CancelHold), false)
		return err
	})
	if err != nil {
		return err
	}
	qc := c.control(queue)
	qc.mu.Lock()
	qc.cancelled[id] = true
	if d := qc.watches[id]; d != nil {
		d.markCancelled()
	}
	qc.mu.Unlock()
	return nil
}

// cancelledNow reports, with a fresh read, whether d was cancelled.
func (c *Client) cancelledNow(ctx context.Context, d *Delivery) (bool, error) {
	if c.lister == nil {
		return false, nil
	}
	if d.isCancelled() {
		return true, nil
	}
	return c.marker.MarkGet(ctx, d.Queue, markCancelPrefix+d.ID)
}

// deadCancelled dead-letters a claimed message that was cancelled before
// it was handed out.
func (c *Client) deadCancelled(ctx context.Context, queue string, bd *backend.Delivery) {
	ref := backend.Ref{Queue: queue, ID: bd.ID, Receipt: bd.Receipt}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	reason := withError(bd.LastError, bd.Attempt-1, time.Now(), ReasonCancelled)
	err := c.drv.Dead(ctx, ref, reason, bd.Attempt-1)
	log := c.opts.logger.With(slog.String("queue", queue), slog.String("kind", bd.Kind), slog.String("id", bd.ID))
	switch {
	case err == nil:
		log.Info("fila: cancelled message dead-lettered")
		qc := c.control(queue)
		qc.mu.Lock()
		delete(qc.cancelled, bd.ID)
		qc.mu.Unlock()
		c.dropCancelMark(queue, bd.ID)
	case errors.Is(err, ErrLeaseLost):
	default:
		log.Error("fila: dead-lettering a cancelled message failed; it is tried again when its lease expires", slog.Any("error", err))
	}
}

// holdUnique claims the unique-period marks of the messages of a batch that
// have UniqueFor. held[i] is true for a message whose key is held (by an
// earlier message, for its period); claimed lists the marks this call
// created, to release when the message is not stored after all.
func (c *Client) holdUnique(ctx context.Context, queue string, msgs []Message, now time.Time) (held []bool, claimed []int, err error) {
	for i := range msgs {
		if msgs[i].UniqueFor <= 0 {
			continue
		}
		if held == nil {
			held = make([]bool, len(msgs))
		}
		ok, err := c.marker.MarkSet(ctx, queue, markUniquePrefix+msgs[i].DedupKey, now.Add(msgs[i].UniqueFor), true)
		if err != nil {
			c.releaseUnique(queue, msgs, claimed)
			return nil, nil, err
		}
		if ok {
			claimed = append(claimed, i)
		} else {
			held[i] = true
		}
	}
	return held, claimed, nil
}

// releaseUnique deletes the unique-period marks of msgs[idx].
func (c *Client) releaseUnique(queue string, msgs []Message, idx []int) {
	if len(idx) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.closeCtx), 10*time.Second)
	defer cancel()
	for _, i := range idx {
		if err := c.marker.MarkDelete(ctx, queue, markUniquePrefix+msgs[i].DedupKey); err != nil {
			c.opts.logger.Warn("fila: releasing a unique period after a failed enqueue failed; the key stays held until the period ends",
				slog.String("queue", queue), slog.String("dedup_key", msgs[i].DedupKey), slog.Any("error", err))
		}
	}
}
