package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila"
)

// maxStackBytes bounds the stack kept in a PanicError and its reason.
const maxStackBytes = 4 << 10

// jobLog is a job's logger: the worker's logger with the job's queue, kind,
// id and attempt, built on first use. Most jobs log nothing, and slog's With
// formats the attributes at once (it was about 6-10% of the worker's CPU per
// job in the benchmarks).
type jobLog struct {
	base *slog.Logger
	d    *fila.Delivery
	once sync.Once
	l    *slog.Logger
}

func (j *jobLog) get() *slog.Logger {
	j.once.Do(func() {
		j.l = j.base.With(slog.String("queue", j.d.Queue), slog.String("kind", j.d.Kind),
			slog.String("id", j.d.ID), slog.Int("attempt", j.d.Attempt))
	})
	return j.l
}

// runJob runs one delivery's handler and applies the outcome policy.
//
// A success is handed to ak, which acks it in a batch and then reports the
// job's end; runJob returns at once, freeing the job's slot.
func (w *Worker) runJob(base context.Context, d *fila.Delivery, ak *acker) {
	s := w.cfg.settingsFor(d.Kind)
	maxAttempts := d.MaxAttempts
	if s.maxAttempts > 0 && (maxAttempts <= 0 || s.maxAttempts < maxAttempts) {
		maxAttempts = s.maxAttempts
	}
	log := &jobLog{base: w.log, d: d}

	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	if s.timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeoutCause(ctx, s.timeout, ErrTimeout)
		defer cancelTimeout()
	}
	ctx = context.WithValue(ctx, loggerKey{}, log)

	ev := JobEvent{Queue: d.Queue, Kind: d.Kind, ID: d.ID, Attempt: d.Attempt, MaxAttempts: maxAttempts,
		EnqueuedAt: d.EnqueuedAt, Started: time.Now()}
	if w.cfg.OnJobStart != nil {
		w.cfg.OnJobStart(ev)
	}

	var lost atomic.Bool
	stopHeartbeat := w.heartbeat(ctx, d, log, func() {
		lost.Store(true)
		cancel(fila.ErrLeaseLost)
	})
	if ch := d.Cancelled(); ch != nil {
		// A cancel of the message ends the handler's context; the watch
		// ends with the job (the deferred cancel).
		go func() {
			select {
			case <-ch:
				cancel(fila.ErrCancelled)
			case <-ctx.Done():
			}
		}()
	}
	err := call(ctx, w.handler(d.Kind), d)
	stopHeartbeat()
	ev.Duration = time.Since(ev.Started)

	cause := context.Cause(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(cause, ErrTimeout) {
		err = fmt.Errorf("%w after %v: %w", ErrTimeout, s.timeout, err)
	}
	ev.Err = err

	if lost.Load() {
		ev.Outcome, ev.SettleErr = OutcomeLeaseLost, fila.ErrLeaseLost
		log.get().Warn("fila worker: lease lost while the job ran; its outcome was not applied (another consumer may run it)",
			slog.Duration("duration", ev.Duration), slog.Any("error", err))
		w.end(ev)
		return
	}

	// Decide the outcome, in this order: success, permanent failure,
	// interruption by shutdown, last attempt, retry.
	var settle func(context.Context) error
	switch {
	case err == nil:
		ev.Outcome = OutcomeAck
		ak.add(pendingAck{d: d, ev: ev, log: log})
		return
	case ctx.Err() != nil && errors.Is(cause, fila.ErrCancelled):
		ev.Outcome, ev.Reason = OutcomeCancelled, fila.ReasonCancelled
		settle = func(ctx context.Context) error { return d.Dead(ctx, fila.ReasonCancelled) }
	case IsPermanent(err):
		ev.Outcome, ev.Reason = OutcomeDead, reasonOf(err)
		settle = func(ctx context.Context) error { return d.Dead(ctx, ev.Reason) }
	case ctx.Err() != nil && errors.Is(cause, ErrShutdown):
		ev.Err = fmt.Errorf("%w: %w", ErrShutdown, err)
		ev.Outcome, ev.Reason = OutcomeReleased, reasonOf(ev.Err)
		settle = func(ctx context.Context) error { return d.Retry(ctx, 0, ev.Reason) }
	case maxAttempts > 0 && d.Attempt >= maxAttempts:
		ev.Outcome, ev.Reason = OutcomeDead, reasonOf(err)
		settle = func(ctx context.Context) error { return d.Dead(ctx, ev.Reason) }
	default:
		ev.Outcome, ev.Reason, ev.RetryDelay = OutcomeRetry, reasonOf(err), max(s.backoff(d.Attempt), 0)
		settle = func(ctx context.Context) error { return d.Retry(ctx, ev.RetryDelay, ev.Reason) }
	}

	sctx, scancel := context.WithTimeout(context.WithoutCancel(base), settleTimeout)
	serr := settle(sctx)
	scancel()
	switch {
	case serr == nil:
	case errors.Is(serr, fila.ErrCancelled): // cancelled after the handler returned: Retry dead-lettered it
		ev.Outcome, ev.Reason = OutcomeCancelled, fila.ReasonCancelled
	case errors.Is(serr, fila.ErrLeaseLost):
		ev.Outcome, ev.SettleErr = OutcomeLeaseLost, serr
	default:
		ev.Outcome, ev.SettleErr = OutcomeUnsettled, serr
	}
	w.logEnd(log, ev)
	w.end(ev)
}

func (w *Worker) end(ev JobEvent) {
	w.tp.add(ev, time.Now())
	if w.cfg.OnJobEnd != nil {
		w.cfg.OnJobEnd(ev)
	}
}

func (w *Worker) logEnd(jl *jobLog, ev JobEvent) {
	dur := slog.Duration("duration", ev.Duration)
	if ev.Outcome == OutcomeAck {
		// The common case: do not build the job's logger for a line the
		// handler would drop.
		if jl.base.Enabled(context.Background(), slog.LevelDebug) {
			jl.get().Debug("fila worker: job done", dur)
		}
		return
	}
	log := jl.get()
	switch ev.Outcome {
	case OutcomeRetry:
		attrs := []any{dur, slog.Any("error", ev.Err), slog.Duration("retry_in", ev.RetryDelay)}
		var pe *PanicError
		if errors.As(ev.Err, &pe) {
			attrs = append(attrs, slog.String("stack", string(pe.Stack)))
		}
		log.Warn("fila worker: job failed; retrying", attrs...)
	case OutcomeDead:
		log.Error("fila worker: job dead-lettered", dur, slog.Int("max_attempts", ev.MaxAttempts), slog.String("reason", firstLine(ev.Reason)))
	case OutcomeReleased:
		log.Info("fila worker: job interrupted by shutdown; message released", dur, slog.Any("error", ev.Err))
	case OutcomeCancelled:
		log.Info("fila worker: job cancelled; message dead-lettered as cancelled", dur, slog.Any("error", ev.Err))
	case OutcomeLeaseLost:
		log.Warn("fila worker: lease lost before the outcome was applied (another consumer may run it)", dur, slog.Any("error", ev.Err))
	case OutcomeUnsettled:
		log.Error("fila worker: applying the job's outcome failed; the message comes back when its lease expires",
			dur, slog.Any("error", ev.SettleErr), slog.Any("job_error", ev.Err))
	}
}

// heartbeat extends d's lease every Config.Heartbeat while the job runs. It
// stops when ctx ends (timeout, shutdown, lost lease) or when the returned
// function is called, which waits for an extension in progress. onLost runs
// when the lease is lost. It uses a timer, not a goroutine, so short jobs
// cost no heartbeat at all.
func (w *Worker) heartbeat(ctx context.Context, d *fila.Delivery, log *jobLog, onLost func()) (stop func()) {
	every := w.cfg.Heartbeat
	if every <= 0 {
		return func() {}
	}
	var (
		mu       sync.Mutex
		stopped  bool
		inflight sync.WaitGroup
		timer    *time.Timer
	)
	fire := func() {
		mu.Lock()
		if stopped || ctx.Err() != nil {
			mu.Unlock()
			return
		}
		inflight.Add(1)
		mu.Unlock()
		defer inflight.Done()

		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(every, settleTimeout))
		err := d.Extend(ectx, w.cfg.Lease)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, fila.ErrLeaseLost):
			log.get().Warn("fila worker: lease lost during the job; cancelling it")
			onLost()
			return
		case errors.Is(err, fila.ErrClosed):
			return
		default:
			log.get().Warn("fila worker: extending the lease failed; trying again", slog.Any("error", err))
		}
		mu.Lock()
		if !stopped {
			timer.Reset(every)
		}
		mu.Unlock()
	}
	mu.Lock()
	timer = time.AfterFunc(every, fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		mu.Unlock()
		inflight.Wait()
	}
}

// call runs h, turning a panic into a *PanicError.
func call(ctx context.Context, h Handler, d *fila.Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: trimStack(debug.Stack())}
		}
	}()
	return h.Work(ctx, d)
}

// trimStack drops the frames above the panicking function (debug.Stack, the
// recover closure, runtime.panic) and cuts the rest at maxStackBytes on a
// line boundary.
func trimStack(st []byte) []byte {
	header, rest, ok := bytes.Cut(st, []byte("\n"))
	if !ok {
		return st
	}
	if i := bytes.Index(rest, []byte("\npanic(")); i >= 0 {
		// Skip the panic( line and its file:line line.
		after := rest[i+1:]
		for range 2 {
			if j := bytes.IndexByte(after, '\n'); j >= 0 {
				after = after[j+1:]
			}
		}
		rest = after
	}
	out := append(append(append([]byte{}, header...), '\n'), rest...)
	if len(out) > maxStackBytes {
		cut := out[:maxStackBytes]
		if j := bytes.LastIndexByte(cut, '\n'); j > 0 {
			cut = cut[:j+1]
		}
		out = append(cut, "...additional frames elided...\n"...)
	}
	return out
}

// reasonOf is the reason recorded for a failed job: the error text, and for
// a panic its stack.
func reasonOf(err error) string {
	var pe *PanicError
	if errors.As(err, &pe) {
		return err.Error() + "\n\n" + string(pe.Stack)
	}
	return err.Error()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
