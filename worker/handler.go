package worker

import (
	"context"

	"github.com/fila-go/fila"
)

// Handler runs one job: the work a message of one kind asks for. Work
// returns nil when the job is done (the message is acked), an error to have
// it retried later with backoff, or an error wrapped with [Permanent] to
// dead-letter it at once. Delivery is at least once, so Work must be safe to
// run twice for the same message (check whether the effect already happened
// before applying it).
//
// Work must return when ctx ends: ctx carries the job's timeout, and it is
// cancelled when the lease is lost or the worker's shutdown grace runs out
// (context.Cause tells which: [ErrTimeout], fila.ErrLeaseLost, [ErrShutdown]).
// Work must not settle d itself (Ack, Retry, Dead, Release): the worker does,
// by the outcome policy.
type Handler interface {
	Work(ctx context.Context, d *fila.Delivery) error
}

// HandlerFunc adapts a function to a [Handler], like http.HandlerFunc.
type HandlerFunc func(ctx context.Context, d *fila.Delivery) error

// Work calls f(ctx, d).
func (f HandlerFunc) Work(ctx context.Context, d *fila.Delivery) error { return f(ctx, d) }

// Middleware wraps a Handler with behaviour around every job: logging,
// metrics, tracing, recovering state. Config.Middleware lists them outermost
// first.
type Middleware func(Handler) Handler

// chain wraps h with mws, the first outermost.
func chain(h Handler, mws []Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			h = mws[i](h)
		}
	}
	return h
}
