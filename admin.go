package fila

import (
	"context"
	"fmt"

	"github.com/fila-go/fila/backend"
)

// Stats are a queue's counts; see QueueStats.
type Stats = backend.Stats

// DeadLetter is a message in a queue's dead-letter store.
type DeadLetter = backend.DeadLetter

// DeadListParams select and page dead letters.
type DeadListParams = backend.DeadListParams

// DeadPage is one page of dead letters, oldest first.
type DeadPage = backend.DeadPage

// DeadFilter selects dead letters for DeadReplay and DeadPurge; the zero
// value selects all of a queue's dead letters.
type DeadFilter = backend.DeadFilter

// QueueStats returns queue's ready, delayed, leased and dead counts and the
// time its oldest ready message became ready. Counts are exact on a quiescent
// queue. Drivers without stats return ErrUnsupported.
func (c *Client) QueueStats(ctx context.Context, queue string) (Stats, error) {
	sr, ok := c.drv.(backend.StatsReader)
	if !ok {
		return Stats{}, &UnsupportedError{Driver: c.name, Capability: "queue stats"}
	}
	if err := ValidateQueueName(queue); err != nil {
		return Stats{}, err
	}
	cctx, leave, err := c.enter(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer leave()
	s, err := sr.QueueStats(cctx, queue)
	return s, c.done(ctx, err)
}

func (c *Client) deadLetterer(queue string) (backend.DeadLetterer, error) {
	dl, ok := c.drv.(backend.DeadLetterer)
	if !ok {
		return nil, &UnsupportedError{Driver: c.name, Capability: "dead-letter management"}
	}
	return dl, ValidateQueueName(queue)
}

// DeadList lists queue's dead letters with their reasons and attempts, oldest
// first, a page at a time (Limit 0 means 100).
func (c *Client) DeadList(ctx context.Context, queue string, p DeadListParams) (DeadPage, error) {
	dl, err := c.deadLetterer(queue)
	if err != nil {
		return DeadPage{}, err
	}
	if p.Limit < 0 || p.Limit > MaxReceive {
		return DeadPage{}, invalidf("dead list limit %d must be between 0 (100) and %d", p.Limit, MaxReceive)
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	cctx, leave, err := c.enter(ctx)
	if err != nil {
		return DeadPage{}, err
	}
	defer leave()
	page, err := dl.DeadList(cctx, queue, p)
	return page, c.done(ctx, err)
}

// DeadReplay moves the dead letters f selects back to ready with attempts
// reset (dedup keys are dropped) and returns how many moved.
func (c *Client) DeadReplay(ctx context.Context, queue string, f DeadFilter) (int, error) {
	return c.deadOp(ctx, queue, f, func(ctx context.Context, dl backend.DeadLetterer) (int, error) {
		return dl.DeadReplay(ctx, queue, f)
	})
}

// DeadPurge deletes the dead letters f selects and returns how many.
func (c *Client) DeadPurge(ctx context.Context, queue string, f DeadFilter) (int, error) {
	return c.deadOp(ctx, queue, f, func(ctx context.Context, dl backend.DeadLetterer) (int, error) {
		return dl.DeadPurge(ctx, queue, f)
	})
}

func (c *Client) deadOp(ctx context.Context, queue string, f DeadFilter, op func(context.Context, backend.DeadLetterer) (int, error)) (int, error) {
	dl, err := c.deadLetterer(queue)
	if err != nil {
		return 0, err
	}
	for _, id := range f.IDs {
		if id == "" {
			return 0, invalidf("dead filter has an empty id")
		}
	}
	if f.IDs != nil && len(f.IDs) == 0 {
		return 0, nil // an explicit empty selection selects nothing
	}
	cctx, leave, err := c.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer leave()
	n, err := op(cctx, dl)
	return n, c.done(ctx, err)
}

// Ping checks the broker is reachable, where the driver can tell.
func (c *Client) Ping(ctx context.Context) error {
	cctx, leave, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	if p, ok := c.drv.(backend.Pinger); ok {
		return c.done(ctx, p.Ping(cctx))
	}
	return nil
}

// QueueList returns the names of the queues that hold a message (ready,
// delayed or leased) or a dead letter, sorted; a queue that holds nothing may
// be listed too. Drivers that cannot list queues (RabbitMQ over AMQP) return
// ErrUnsupported.
func (c *Client) QueueList(ctx context.Context) ([]string, error) {
	ql, ok := c.drv.(backend.QueueLister)
	if !ok {
		return nil, &UnsupportedError{Driver: c.name, Capability: "queue listing"}
	}
	cctx, leave, err := c.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	qs, err := ql.QueueList(cctx)
	return qs, c.done(ctx, err)
}

// QueueDeleteParams tune QueueDelete.
type QueueDeleteParams struct {
	// Force deletes the queue whatever it holds. Without it QueueDelete
	// first reads the queue's stats (it needs a driver with QueueStats) and
	// returns ErrQueueNotEmpty, deleting nothing, when the queue holds a
	// ready, delayed or leased message or a dead letter. The check and the
	// delete are separate steps: a message enqueued between them is deleted.
	Force bool
}

// QueueDelete deletes queue with everything it holds: ready, delayed and
// leased messages, dead letters, dedup keys and the broker's structures for
// it. Deliveries leased from it get ErrLeaseLost when settled. Deleting a
// queue that holds nothing is not an error, and the queue can be used again
// at once. Drivers without the capability return ErrUnsupported.
func (c *Client) QueueDelete(ctx context.Context, queue string, p QueueDeleteParams) error {
	qd, ok := c.drv.(backend.QueueDeleter)
	if !ok {
		return &UnsupportedError{Driver: c.name, Capability: "queue deletion"}
	}
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	if !p.Force {
		if _, ok := c.drv.(backend.StatsReader); !ok {
			return &UnsupportedError{Driver: c.name, Capability: "queue deletion without Force (it needs queue stats)"}
		}
		s, err := c.QueueStats(ctx, queue)
		if err != nil {
			return err
		}
		if n := s.Ready + s.Delayed + s.Leased + s.Dead; n > 0 {
			return fmt.Errorf("%w: %s holds %d ready, %d delayed, %d leased and %d dead (set QueueDeleteParams.Force to delete it anyway)", ErrQueueNotEmpty, queue, s.Ready, s.Delayed, s.Leased, s.Dead)
		}
	}
	cctx, leave, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	return c.done(ctx, qd.QueueDelete(cctx, queue))
}
