package worker

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
	"github.com/fila-go/fila/internal/outagelog"
)

// settleTimeout bounds each settlement call (Ack, Retry, Dead, Release) and
// each heartbeat. Settlements run on a context detached from Run's, so a job
// finishing during shutdown is still settled.
const settleTimeout = 10 * time.Second

// Receive error backoff: a failing Receive (broker down) is retried after
// receiveRetryMin, doubling up to receiveRetryMax.
const (
	receiveRetryMin = 100 * time.Millisecond
	receiveRetryMax = 2 * time.Second
)

// Worker receives messages from its queues and runs the handler registered
// for each message's kind, applying the outcome policy (see the package
// documentation). Create one with New, register handlers with Handle,
// HandleFunc or the generic Handle function, then call Run.
type Worker struct {
	c   *fila.Client
	cfg Config
	log *slog.Logger

	schedules []*schedule    // Config.Periodic, checked
	marker    backend.Marker // the driver's marks, with schedules
	dedup     bool           // the driver enforces dedup keys

	mu       sync.RWMutex
	handlers map[string]Handler // wrapped with the middleware
	unknown  Handler            // wrapped with the middleware

	started atomic.Bool
	active  atomic.Int64 // running jobs
	// pool holds Config.Concurrency's shared slots; nil without it.
	pool *pool
	// runID is the Run's random id (its presence and throughput records);
	// tp sums its jobs' outcomes, nil when nothing is recorded. Both are
	// set by Run before any job starts.
	runID string
	tp    *throughputRecorder
}

// New returns a Worker that receives from c with cfg. It checks cfg and fills
// in its defaults.
func New(c *fila.Client, cfg Config) (*Worker, error) {
	if c == nil {
		return nil, errors.New("worker: client is nil")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	schedules, err := parsePeriodic(cfg.Periodic)
	if err != nil {
		return nil, err
	}
	var marker backend.Marker
	if len(schedules) > 0 {
		if marker, err = checkMarker(c); err != nil {
			return nil, err
		}
	}
	d, dedup := c.Driver().(backend.Deduper)
	if cfg.Heartbeat >= cfg.Lease {
		cfg.Logger.Warn("fila worker: heartbeat interval is not below the lease; long jobs will lose their leases",
			slog.Duration("heartbeat", cfg.Heartbeat), slog.Duration("lease", cfg.Lease))
	}
	unknown := cfg.UnknownKind
	if unknown == nil {
		unknown = HandlerFunc(deadUnknown)
	}
	var shared *pool
	if cfg.Concurrency > 0 {
		shared = newPool(cfg.Concurrency, cfg.Queues)
	}
	return &Worker{
		pool:     shared,
		c:        c,
		cfg:      cfg,
		log:      cfg.Logger,
		handlers: map[string]Handler{},
		unknown:  chain(unknown, cfg.Middleware),

		schedules: schedules,
		marker:    marker,
		dedup:     dedup && d.DedupKeys(),
	}, nil
}

func deadUnknown(_ context.Context, d *fila.Delivery) error {
	return Permanent(fmt.Errorf("worker: no handler registered for kind %q", d.Kind))
}

// Handle registers h for messages of kind. It panics if kind is empty, h is
// nil or kind already has a handler, like http.ServeMux. Handlers may be
// registered while the worker runs.
func (w *Worker) Handle(kind string, h Handler) {
	if kind == "" {
		panic("worker: Handle with an empty kind")
	}
	if h == nil {
		panic("worker: Handle with a nil handler for kind " + kind)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.handlers[kind]; dup {
		panic("worker: Handle called twice for kind " + kind)
	}
	w.handlers[kind] = chain(h, w.cfg.Middleware)
}

// HandleFunc registers f for messages of kind; see Handle.
func (w *Worker) HandleFunc(kind string, f func(ctx context.Context, d *fila.Delivery) error) {
	if f == nil {
		panic("worker: HandleFunc with a nil function for kind " + kind)
	}
	w.Handle(kind, HandlerFunc(f))
}

func (w *Worker) handler(kind string) Handler {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if h, ok := w.handlers[kind]; ok {
		return h
	}
	return w.unknown
}

// Run receives and runs jobs, and enqueues the runs of Config.Periodic,
// until ctx ends, then shuts down gracefully: it stops receiving and
// scheduling, lets running jobs finish for up to Config.ShutdownGrace, then
// cancels their contexts (cause ErrShutdown) and waits for them to
// return. Messages received but not started are released at once for other
// consumers, never acked. Acks of finished jobs still pending are stored
// before Run returns. Run returns only when every goroutine it started has
// ended.
//
// Run returns nil after a shutdown caused by ctx. It returns an error when a
// queue cannot be received from for good (the client was closed: ErrClosed;
// invalid settings: ErrInvalid) or a periodic run finds the client closed,
// after the same graceful shutdown. Transient receive errors are logged and
// retried with backoff. A Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	// Jobs keep ctx's values but not its cancellation: they end by the
	// shutdown grace, not at once.
	jobBase, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	recvCtx, stopRecv := context.WithCancelCause(ctx)
	defer stopRecv(nil)

	w.prepareRecords()
	var (
		jobs    sync.WaitGroup
		loops   sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	ackers := make(map[string]*acker, len(w.cfg.Queues))
	for queue, qc := range w.cfg.Queues {
		ackers[queue] = newAcker(w, jobBase, qc.Concurrency)
	}
	for queue, qc := range w.cfg.Queues {
		loops.Add(1)
		go func() {
			defer loops.Done()
			if err := w.receiveLoop(recvCtx, jobBase, queue, qc.Concurrency, ackers[queue], &jobs); err != nil {
				errOnce.Do(func() { runErr = err })
				stopRecv(err)
			}
		}()
	}
	if len(w.schedules) > 0 {
		loops.Add(1)
		go func() {
			defer loops.Done()
			w.runScheduler(recvCtx, func(err error) {
				errOnce.Do(func() { runErr = err })
				stopRecv(err)
			})
		}()
	}
	ps := w.startPresence(ctx)
	defer ps.stop()
	loops.Wait() // every receive loop has ended: no more jobs start

	grace := max(w.cfg.ShutdownGrace, 0)
	if n := w.active.Load(); n > 0 {
		w.log.Info("fila worker: stopping; waiting for running jobs", slog.Int64("running", n), slog.Duration("grace", grace))
	}
	done := make(chan struct{})
	go func() { jobs.Wait(); close(done) }()
	t := time.NewTimer(grace)
	select {
	case <-done:
		t.Stop()
	case <-t.C:
		w.log.Warn("fila worker: shutdown grace period over; cancelling running jobs", slog.Int64("running", w.active.Load()))
		hardStop(ErrShutdown)
		<-done
	}
	// No job is left to hand over an ack: store the pending ones.
	for _, ak := range ackers {
		ak.stop()
	}
	for _, ak := range ackers {
		ak.wait()
	}
	return runErr
}

// receiveLoop receives from queue into free slots until ctx ends. It returns
// an error only when receiving fails for good.
func (w *Worker) receiveLoop(ctx, jobBase context.Context, queue string, concurrency int, ak *acker, jobs *sync.WaitGroup) error {
	// slots holds one token per running job; only this goroutine adds
	// tokens, so the free count only grows while it waits in Receive.
	slots := make(chan struct{}, concurrency)
	retry := receiveRetryMin
	// A broker outage is logged with a bounded number of lines.
	outage := outagelog.New(w.log)
	// While the loop is about to claim, the acker leaves the queued acks
	// to it (see acker).
	defer ak.setHandoff(false)
	// short: the last receive returned fewer messages than it asked for.
	short := false
	defer func() {
		if w.pool != nil {
			w.pool.idle(queue)
		}
	}()
	// free gives back n slots taken for a receive that did not fill them.
	free := func(n int) {
		for range n {
			<-slots
			if w.pool != nil {
				w.pool.release(queue, 1)
			}
		}
	}
	for {
		ak.setHandoff(true)
		select {
		case slots <- struct{}{}: // wait for one free slot
		case <-ctx.Done():
			return nil
		}
		// Then every free slot at once: a receive fills them all. Shared
		// slots come from the pool, as many as were assigned to the queue
		// (one after a receive that came back short).
		n := 1
		if w.pool != nil {
			got, err := w.pool.acquire(ctx, queue, min(fila.MaxReceive, 1+concurrency-len(slots)), !short)
			if err != nil {
				<-slots
				return nil
			}
			for ; n < got; n++ {
				slots <- struct{}{} // never blocks: acquire gave no more than there is room for
			}
		} else {
			for n < fila.MaxReceive && len(slots) < concurrency {
				slots <- struct{}{} // never blocks: only this goroutine adds, and there is room
				n++
			}
		}
		p := fila.ReceiveParams{Max: n, Lease: w.cfg.Lease}
		var (
			ds  []*fila.Delivery
			err error
		)
		if batch := ak.take(false); len(batch) > 0 {
			ds, err = ak.ackReceive(batch, queue, p)
		}
		if err == nil && len(ds) == 0 {
			ak.setHandoff(false) // the Receive may wait long
			ds, err = w.c.Receive(ctx, queue, p)
		}
		if err != nil {
			free(n)
			ak.setHandoff(false)
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, fila.ErrClosed) || errors.Is(err, fila.ErrInvalid) {
				w.log.Error("fila worker: receive failed for good; stopping", slog.String("queue", queue), slog.Any("error", err))
				return fmt.Errorf("worker: receive from %q: %w", queue, err)
			}
			outage.Down("fila worker: receive failed; retrying", slog.String("queue", queue),
				slog.Any("error", err), slog.Duration("retry_in", retry))
			if !sleep(ctx, retry) {
				return nil
			}
			retry = min(retry*2, receiveRetryMax)
			continue
		}
		retry = receiveRetryMin
		outage.Up("fila worker: receiving works again", slog.String("queue", queue))
		free(n - len(ds)) // Client.Receive returns no more than the Max we asked
		if short = len(ds) < n; short && w.pool != nil {
			w.pool.short(queue)
		}
		if ctx.Err() != nil {
			// Shutdown began while these were being received: give them
			// back at once rather than start them.
			w.release(queue, ds)
			free(len(ds))
			return nil
		}
		for _, d := range ds {
			jobs.Add(1)
			w.active.Add(1)
			go func() {
				defer func() { free(1); w.active.Add(-1); jobs.Done() }()
				w.runJob(jobBase, d, ak)
			}()
		}
	}
}

// release gives received but unstarted deliveries back without acking them.
func (w *Worker) release(queue string, ds []*fila.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for _, d := range ds {
		if err := d.Release(ctx); err != nil && !errors.Is(err, fila.ErrLeaseLost) {
			w.log.Warn("fila worker: releasing an unstarted message failed; it comes back when its lease expires",
				slog.String("queue", queue), slog.String("kind", d.Kind), slog.String("id", d.ID), slog.Any("error", err))
		}
	}
	w.log.Debug("fila worker: released unstarted messages at shutdown", slog.String("queue", queue), slog.Int("count", len(ds)))
}

// sleep waits for d or ctx's end and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
