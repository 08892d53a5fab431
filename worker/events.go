package worker

import (
	"context"
	"log/slog"
	"time"
)

// Outcome is what the worker did with a finished job.
type Outcome string

// Outcomes of a job, as reported in JobEvent.Outcome.
const (
	// OutcomeAck: the handler returned nil and the message was acked.
	OutcomeAck Outcome = "ack"
	// OutcomeRetry: the handler failed and the message will be delivered
	// again after JobEvent.RetryDelay.
	OutcomeRetry Outcome = "retry"
	// OutcomeDead: the message was dead-lettered with JobEvent.Reason (a
	// permanent error, the last allowed attempt failed, or an unknown kind).
	OutcomeDead Outcome = "dead"
	// OutcomeReleased: the job was interrupted by the worker's shutdown and
	// its message given back at once for another consumer.
	OutcomeReleased Outcome = "released"
	// OutcomeLeaseLost: the lease ended before the outcome could be applied
	// (another consumer may be running the message); nothing was applied.
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeUnsettled: applying the outcome failed (broker unreachable,
	// client closed); the message comes back when its lease expires.
	OutcomeUnsettled Outcome = "unsettled"
	// OutcomeCancelled: the message was cancelled (fila.Client.MessageCancel)
	// while the job ran, the handler's context was cancelled with cause
	// fila.ErrCancelled, and the handler failed: the message was
	// dead-lettered with reason fila.ReasonCancelled, not retried. A
	// handler that succeeds anyway is acked (OutcomeAck).
	OutcomeCancelled Outcome = "cancelled"
)

// JobEvent describes a job starting or ending, for Config.OnJobStart and
// Config.OnJobEnd (metrics such as run time per kind and outcomes per kind).
type JobEvent struct {
	Queue   string
	Kind    string
	ID      string
	Attempt int
	// MaxAttempts is the limit in force for this job.
	MaxAttempts int
	// EnqueuedAt is when the message was first enqueued
	// (fila.Delivery.EnqueuedAt).
	EnqueuedAt time.Time
	// Started is when the handler was called.
	Started time.Time

	// The fields below are set only at the end.

	// Duration is how long the handler ran.
	Duration time.Duration
	// Outcome is what the worker did with the job.
	Outcome Outcome
	// Err is the handler's error (nil when it succeeded); a panic is a
	// *PanicError, a timeout wraps ErrTimeout.
	Err error
	// Reason is the reason recorded with a retry, a release or a dead letter.
	Reason string
	// RetryDelay is the backoff delay of a retry.
	RetryDelay time.Duration
	// SettleErr is the error of applying the outcome, for OutcomeUnsettled
	// and OutcomeLeaseLost.
	SettleErr error
}

type loggerKey struct{}

// Logger returns the logger of the job running under ctx: the worker's
// Config.Logger with the job's queue, kind, id and attempt as attributes.
// Outside a job it returns slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*jobLog); ok {
		return l.get()
	}
	return slog.Default()
}
