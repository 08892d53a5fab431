package fila

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fila-go/fila/backend"
)

// Stats are a queue's counts; see QueueStats.
type Stats = backend.Stats

// DeadLetter is a message in a queue's dead-letter store, as DeadList
// returns it.
type DeadLetter struct {
	ID    string
	Queue string
	Kind  string
	// Body is the message's body, byte for byte; never nil.
	Body    []byte
	Headers map[string]string
	// DedupKey is the message's dedup key, if any (DeadReplay drops it).
	DedupKey string
	// MaxAttempts is the message's own max attempts; 0 when it used the
	// client's default.
	MaxAttempts int
	// EnqueuedAt is when the message was first enqueued.
	EnqueuedAt time.Time
	// Priority is the message's level; DeadReplay keeps it.
	Priority int
	// Attempts is the number of deliveries the message had: for one
	// dead-lettered on max attempts, its max attempts (the claim that found
	// it exhausted was not handed out).
	Attempts int
	// Reason is why it was dead-lettered (ReasonMaxAttempts,
	// ReasonCancelled, or the reason given to Delivery.Dead).
	Reason string
	// Errors are the message's errors before Reason, oldest first: the
	// reasons of its latest retries (the last MaxErrorHistory-1 of them,
	// cut to MaxEarlierReasonBytes), each with its attempt and time. Nil
	// when it had none.
	Errors []AttemptError
	// DeadAt is when it was dead-lettered.
	DeadAt time.Time
}

// DeadListParams select and page dead letters.
type DeadListParams struct {
	// Kind, when not empty, keeps only dead letters of that kind.
	Kind string
	// Limit is the most dead letters of a page; 0 means 100. At most
	// MaxReceive; negative is ErrInvalid.
	Limit int
	// Cursor continues a listing from DeadPage.Next; empty starts at the
	// oldest.
	Cursor string
	// IDs, when not nil, keeps only the dead letters with these ids (an
	// empty list selects none): a page that shows one letter reads only
	// that one. At most MaxReceive ids, none empty.
	IDs []string
	// WithoutBodies leaves every letter's Body nil (an empty body that was
	// read is empty, not nil), for a listing that does not show them: drivers that can leave the bodies unread do
	// (PostgreSQL, MongoDB, memory), the others drop them once read.
	WithoutBodies bool
}

// DeadPage is one page of dead letters, oldest first.
type DeadPage struct {
	Letters []DeadLetter
	// Next is the cursor of the following page (DeadListParams.Cursor),
	// empty at the end.
	Next string
}

// DeadFilter selects dead letters for DeadReplay and DeadPurge. The zero
// value selects all of a queue's dead letters; IDs and Kind both narrow it.
// A non-nil empty IDs selects nothing.
type DeadFilter struct {
	IDs  []string
	Kind string
}

// deadLetterFrom converts a driver's dead letter at the API boundary,
// decoding its error history.
func deadLetterFrom(l *backend.DeadLetter) DeadLetter {
	body := l.Body
	if body == nil {
		body = []byte{}
	}
	reason, h := splitErrors(l.Reason)
	var earlier []AttemptError // the last entry is the dead reason itself
	if len(h) > 1 {
		earlier = h[: len(h)-1 : len(h)-1]
	}
	return DeadLetter{
		ID: l.ID, Queue: l.Queue, Kind: l.Kind, Body: body, Headers: l.Headers,
		DedupKey: l.DedupKey, MaxAttempts: l.MaxAttempts, EnqueuedAt: l.EnqueuedAt, Priority: l.Priority,
		Attempts: l.Attempts, Reason: reason, Errors: earlier, DeadAt: l.DeadAt,
	}
}

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
	var s Stats
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		s, err = sr.QueueStats(ctx, queue)
		return err
	})
	return s, err
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
	if len(p.IDs) > MaxReceive {
		return DeadPage{}, invalidf("dead list of %d ids: at most %d", len(p.IDs), MaxReceive)
	}
	var want map[string]bool
	if p.IDs != nil {
		if len(p.IDs) == 0 {
			return DeadPage{}, nil // an explicit empty selection selects nothing
		}
		want = make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			if id == "" {
				return DeadPage{}, invalidf("dead list has an empty id")
			}
			want[id] = true
		}
	}
	var bp backend.DeadPage
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		bp, err = dl.DeadList(ctx, queue, backend.DeadListParams{Kind: p.Kind, Limit: p.Limit, Cursor: p.Cursor,
			IDs: p.IDs, WithoutBodies: p.WithoutBodies})
		return err
	})
	if err != nil {
		return DeadPage{}, err
	}
	page := DeadPage{Letters: make([]DeadLetter, 0, len(bp.Letters)), Next: bp.Next}
	for i := range bp.Letters {
		// A driver that does not filter by id is filtered here.
		if want == nil || want[bp.Letters[i].ID] {
			l := deadLetterFrom(&bp.Letters[i])
			if p.WithoutBodies {
				l.Body = nil // not read; an empty body read is []byte{}
			}
			page.Letters = append(page.Letters, l)
		}
	}
	return page, nil
}

// DeadReplay moves the dead letters f selects back to ready with attempts
// reset (dedup keys are dropped) and returns how many moved.
func (c *Client) DeadReplay(ctx context.Context, queue string, f DeadFilter) (int, error) {
	return c.deadOp(ctx, queue, f, func(ctx context.Context, dl backend.DeadLetterer) (int, error) {
		return dl.DeadReplay(ctx, queue, backend.DeadFilter{IDs: f.IDs, Kind: f.Kind})
	})
}

// DeadPurge deletes the dead letters f selects and returns how many.
func (c *Client) DeadPurge(ctx context.Context, queue string, f DeadFilter) (int, error) {
	return c.deadOp(ctx, queue, f, func(ctx context.Context, dl backend.DeadLetterer) (int, error) {
		return dl.DeadPurge(ctx, queue, backend.DeadFilter{IDs: f.IDs, Kind: f.Kind})
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
	var n int
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = op(ctx, dl)
		return err
	})
	return n, err
}

// Ping checks the broker is reachable, where the driver can tell.
func (c *Client) Ping(ctx context.Context) error {
	return c.call(ctx, func(ctx context.Context) error {
		if p, ok := c.drv.(backend.Pinger); ok {
			return p.Ping(ctx)
		}
		return nil
	})
}

// QueueList returns the names of the queues that hold a message (ready,
// delayed or leased) or a dead letter, sorted; a queue that holds nothing may
// be listed too. The queues in which Fila keeps workflows' bookkeeping are
// not listed (WorkflowList lists the workflows). Drivers that cannot list
// queues (RabbitMQ without its management API, fila_management_url) return
// ErrUnsupported.
func (c *Client) QueueList(ctx context.Context) ([]string, error) {
	qs, err := c.queueListAll(ctx)
	out := qs[:0]
	for _, q := range qs {
		if !strings.HasPrefix(q, workflowQueuePrefix) {
			out = append(out, q)
		}
	}
	return out, err
}

func (c *Client) queueListAll(ctx context.Context) ([]string, error) {
	ql, ok := c.drv.(backend.QueueLister)
	if !ok {
		return nil, &UnsupportedError{Driver: c.name, Capability: "queue listing"}
	}
	var qs []string
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		qs, err = ql.QueueList(ctx)
		return err
	})
	return qs, err
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
// at once. A queue subscribed to topics stays subscribed (TopicUnsubscribe
// ends a subscription), except on RabbitMQ, where the subscription is the
// queue's binding and goes with it. Drivers without the capability return
// ErrUnsupported.
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
	return c.call(ctx, func(ctx context.Context) error { return qd.QueueDelete(ctx, queue) })
}
