package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fila-go/fila"
)

// Kind is a typed job: a kind name and the type of its arguments, encoded as
// JSON in the message body. Declare it once and use it on both sides, so the
// producer and the worker agree on the kind and the encoding:
//
//	type SendWelcome struct{ UserID int64 }
//
//	var SendWelcomeJob = worker.Kind[SendWelcome]{Name: "email.welcome"}
//
//	// producer
//	id, err := SendWelcomeJob.Enqueue(ctx, client, "emails", SendWelcome{UserID: 7})
//
//	// worker
//	worker.Handle(w, SendWelcomeJob, func(ctx context.Context, args SendWelcome, d *fila.Delivery) error {
//		return sendWelcome(ctx, args.UserID)
//	})
//
// Put ids in the arguments, not whole objects: a job may run minutes after it
// was enqueued (or run again after a retry), and should read the current
// state rather than a stale copy.
type Kind[T any] struct {
	// Name is the message kind ("email.welcome").
	Name string
}

// EnqueueOption adjusts the message a typed enqueue builds.
type EnqueueOption func(*fila.Message)

// Delay makes the job ready d after enqueue.
func Delay(d time.Duration) EnqueueOption { return func(m *fila.Message) { m.Delay = d } }

// RunAt makes the job ready at t.
func RunAt(t time.Time) EnqueueOption { return func(m *fila.Message) { m.RunAt = t } }

// DedupKey sets the message's dedup key: while a pending job of the queue
// holds key, enqueueing another returns fila.ErrDuplicate.
func DedupKey(key string) EnqueueOption { return func(m *fila.Message) { m.DedupKey = key } }

// Header sets one message header (trace context, tenant).
func Header(key, value string) EnqueueOption {
	return func(m *fila.Message) {
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		m.Headers[key] = value
	}
}

// MaxAttempts sets the message's own max attempts, overriding the client's
// default.
func MaxAttempts(n int) EnqueueOption { return func(m *fila.Message) { m.MaxAttempts = n } }

// Message builds the message for a job with args, without enqueueing it (for
// EnqueueBatch or EnqueueTx with other messages).
func (k Kind[T]) Message(args T, opts ...EnqueueOption) (fila.Message, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return fila.Message{}, fmt.Errorf("worker: encode %s arguments: %w", k.Name, err)
	}
	m := fila.Message{Kind: k.Name, Body: body}
	for _, o := range opts {
		o(&m)
	}
	return m, nil
}

// Enqueue enqueues a job with args in queue and returns its message id.
func (k Kind[T]) Enqueue(ctx context.Context, c *fila.Client, queue string, args T, opts ...EnqueueOption) (string, error) {
	m, err := k.Message(args, opts...)
	if err != nil {
		return "", err
	}
	return c.Enqueue(ctx, queue, m)
}

// EnqueueBatch enqueues one job per element of args in queue, as one batch
// (fila.Client.EnqueueBatch), and returns their ids in order. opts apply to
// every job.
func (k Kind[T]) EnqueueBatch(ctx context.Context, c *fila.Client, queue string, args []T, opts ...EnqueueOption) ([]string, error) {
	msgs := make([]fila.Message, len(args))
	for i := range args {
		m, err := k.Message(args[i], opts...)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return c.EnqueueBatch(ctx, queue, msgs)
}

// EnqueueTx enqueues a job with args inside the caller's transaction tx (for
// PostgreSQL a pgx.Tx), so it commits or rolls back with the caller's own
// writes; see fila.Client.EnqueueTx.
func (k Kind[T]) EnqueueTx(ctx context.Context, c *fila.Client, tx any, queue string, args T, opts ...EnqueueOption) (string, error) {
	m, err := k.Message(args, opts...)
	if err != nil {
		return "", err
	}
	ids, err := c.EnqueueTx(ctx, tx, queue, []fila.Message{m})
	if len(ids) == 1 {
		return ids[0], err
	}
	return "", err
}

// Decode decodes a delivery's body into the job's arguments. Unknown fields
// are ignored, so producers may add fields before workers know them.
func (k Kind[T]) Decode(d *fila.Delivery) (T, error) {
	var args T
	if err := json.Unmarshal(d.Body, &args); err != nil {
		return args, fmt.Errorf("worker: decode %s arguments of message %s: %w", k.Name, d.ID, err)
	}
	return args, nil
}

// Handle registers f as w's handler for jobs of kind k: each message's body
// is decoded into a T before f runs. A body that does not decode is a
// permanent failure (retrying cannot fix it): the message is dead-lettered
// with the decoding error as the reason. It panics like Worker.Handle.
func Handle[T any](w *Worker, k Kind[T], f func(ctx context.Context, args T, d *fila.Delivery) error) {
	if f == nil {
		panic("worker: Handle with a nil function for kind " + k.Name)
	}
	w.Handle(k.Name, HandlerFunc(func(ctx context.Context, d *fila.Delivery) error {
		args, err := k.Decode(d)
		if err != nil {
			return Permanent(err)
		}
		return f(ctx, args, d)
	}))
}
