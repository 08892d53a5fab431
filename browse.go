package fila

import (
	"context"
	"time"

	"github.com/fila-go/fila/backend"
)

// MessageState is the state of a pending message: StateReady, StateDelayed
// or StateLeased.
type MessageState = backend.MessageState

// The states MessageList lists.
const (
	// StateReady: claimable now (an expired lease included), as
	// Stats.Ready counts it.
	StateReady = backend.StateReady
	// StateDelayed: waiting for its run-at (a delay, a retry's backoff),
	// as Stats.Delayed counts it.
	StateDelayed = backend.StateDelayed
	// StateLeased: handed out under a lease that has not expired, as
	// Stats.Leased counts it.
	StateLeased = backend.StateLeased
)

// MessageListParams select and page a queue's pending messages.
type MessageListParams struct {
	// State is the state to list: StateReady, StateDelayed or StateLeased.
	// It may be empty only with IDs, which then finds those messages in
	// whatever state they are.
	State MessageState
	// Limit is the page size; 0 means 100, at most MaxReceive.
	Limit int
	// Cursor continues a listing from MessagePage.Next, with the same
	// State.
	Cursor string
	// IDs, when not nil, keeps only the messages with these ids (at most
	// MaxReceive): a search by id. An empty, non-nil list selects nothing.
	IDs []string
	// WithoutBodies leaves Body nil, for a listing that does not show
	// bodies: drivers that can leave them unread do.
	WithoutBodies bool
}

// PendingMessage is a message waiting in its queue or running, as
// MessageList reads it: listing claims nothing and changes nothing.
type PendingMessage struct {
	ID    string
	Queue string
	Kind  string
	// Body is the message's body, byte for byte; nil only with
	// WithoutBodies.
	Body    []byte
	Headers map[string]string
	// DedupKey is the message's dedup key, if any.
	DedupKey string
	// MaxAttempts is the message's own max attempts; 0 when it uses the
	// client's default.
	MaxAttempts int
	// EnqueuedAt is when the message was first enqueued.
	EnqueuedAt time.Time
	// Priority is the message's level.
	Priority int
	// State is the message's state when it was read.
	State MessageState
	// Attempts counts its deliveries so far: for a leased message, the
	// running one included.
	Attempts int
	// Due is when a ready message became ready (its run-at or enqueue
	// time, or its expired lease's deadline), a delayed message's run-at,
	// a leased message's lease deadline.
	Due time.Time
	// LastError is the reason its latest Retry gave, if any.
	LastError string
	// Errors is its error history, oldest first, LastError's entry last,
	// as Delivery.Errors has it. Nil when it has none.
	Errors []AttemptError
}

// MessagePage is one page of pending messages.
type MessagePage struct {
	Messages []PendingMessage
	// Next is the cursor of the following page, empty at the end.
	Next string
}

// MessageList lists a page of queue's pending messages in one state, in
// the driver's order (for ready messages, where the driver can, the order
// Receive hands them out), or finds messages by id. It claims nothing and
// changes nothing; a message that changes state between pages may be
// listed twice or not at all. Drivers that cannot list messages (RabbitMQ:
// a queue's messages are read only by consuming them) return
// ErrUnsupported.
func (c *Client) MessageList(ctx context.Context, queue string, p MessageListParams) (MessagePage, error) {
	ml, ok := c.drv.(backend.MessageLister)
	if !ok {
		return MessagePage{}, &UnsupportedError{Driver: c.name, Capability: "message listing"}
	}
	if err := ValidateQueueName(queue); err != nil {
		return MessagePage{}, err
	}
	switch p.State {
	case StateReady, StateDelayed, StateLeased:
	case "":
		if p.IDs == nil {
			return MessagePage{}, invalidf("message list: name a state (%s, %s or %s) or ids", StateReady, StateDelayed, StateLeased)
		}
	default:
		return MessagePage{}, invalidf("message list: state %q is not %s, %s or %s", p.State, StateReady, StateDelayed, StateLeased)
	}
	if p.Limit < 0 || p.Limit > MaxReceive {
		return MessagePage{}, invalidf("message list limit %d must be between 0 (100) and %d", p.Limit, MaxReceive)
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	if len(p.IDs) > MaxReceive {
		return MessagePage{}, invalidf("message list of %d ids: at most %d", len(p.IDs), MaxReceive)
	}
	var want map[string]bool
	if p.IDs != nil {
		if len(p.IDs) == 0 {
			return MessagePage{}, nil
		}
		want = make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			if id == "" {
				return MessagePage{}, invalidf("message list has an empty id")
			}
			want[id] = true
		}
	}
	var bp backend.MessagePage
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		bp, err = ml.MessageList(ctx, queue, backend.MessageListParams{State: p.State, Limit: p.Limit,
			Cursor: p.Cursor, IDs: p.IDs, WithoutBodies: p.WithoutBodies})
		return err
	})
	if err != nil {
		return MessagePage{}, err
	}
	page := MessagePage{Messages: make([]PendingMessage, 0, len(bp.Messages)), Next: bp.Next}
	for i := range bp.Messages {
		m := &bp.Messages[i]
		if (want != nil && !want[m.ID]) || (p.State != "" && m.State != p.State) {
			continue // a driver that does not filter is filtered here
		}
		lastError, errs := splitErrors(m.LastError)
		pm := PendingMessage{
			ID: m.ID, Queue: queue, Kind: m.Kind, Body: m.Body, Headers: m.Headers, DedupKey: m.DedupKey,
			MaxAttempts: m.MaxAttempts, EnqueuedAt: m.EnqueuedAt, Priority: m.Priority, State: m.State,
			Attempts: m.Attempts, Due: m.Due, LastError: lastError, Errors: errs,
		}
		switch {
		case p.WithoutBodies:
			pm.Body = nil
		case pm.Body == nil:
			pm.Body = []byte{}
		}
		page.Messages = append(page.Messages, pm)
	}
	return page, nil
}
