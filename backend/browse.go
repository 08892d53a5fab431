package backend

import (
	"context"
	"time"
)

// MessageState is the state of a pending message, as listed by
// MessageLister.
type MessageState string

// The states of a pending message.
const (
	// StateReady: claimable now (an expired lease included), as
	// Stats.Ready counts it.
	StateReady MessageState = "ready"
	// StateDelayed: not claimable before its run-at (a delay, a retry's
	// backoff), as Stats.Delayed counts it.
	StateDelayed MessageState = "delayed"
	// StateLeased: handed out under a lease that has not expired, as
	// Stats.Leased counts it.
	StateLeased MessageState = "leased"
)

// MessageLister is implemented by drivers that can list a queue's pending
// messages (ready, delayed or leased) without claiming or changing them
// (contract: message-list), for dashboards and the command line. Without
// it, Client.MessageList returns ErrUnsupported.
type MessageLister interface {
	// MessageList returns a page of queue's pending messages in the state
	// p.State, or, with p.State empty (only with p.IDs), the messages
	// p.IDs names whatever their state. A page is in the driver's order,
	// the same for every page of a listing (documented per driver; for
	// ready messages where it can, the order Receive hands them out);
	// p.Cursor continues after the last message of the previous page.
	// Messages that change state between pages may be listed twice or
	// not at all; none is listed twice in one page. A driver that cannot
	// list a state returns an ErrUnsupported error.
	MessageList(ctx context.Context, queue string, p MessageListParams) (MessagePage, error)
}

// MessageListParams select and page pending messages.
type MessageListParams struct {
	// State is the state listed; empty only with IDs.
	State MessageState
	// Limit is the page size, at least 1.
	Limit int
	// Cursor continues a listing from MessagePage.Next; empty starts at
	// the beginning. A cursor is valid only with the State it came from.
	Cursor string
	// IDs, when not nil, keeps only the messages with these ids (the
	// portable layer passes no empty list). A driver should filter by them
	// where it reads; the portable layer drops any other message returned.
	IDs []string
	// WithoutBodies asks for messages without their bodies (Body nil): a
	// driver that can leave them unread should; the portable layer drops
	// any returned.
	WithoutBodies bool
}

// PendingMessage is a message listed by MessageLister.
type PendingMessage struct {
	// Message is the message as enqueued; Attempts counts the deliveries
	// it has had so far (a leased message's current one included).
	Message
	// State is its state when it was read.
	State MessageState
	// Due is when a ready message became ready (its run-at, its enqueue
	// time, or its expired lease's deadline), a delayed message's run-at,
	// a leased message's lease deadline.
	Due time.Time
	// LastError is the reason of its latest Retry with one, if any,
	// exactly as Driver.Retry received it (see Delivery.LastError).
	LastError string
}

// MessagePage is one page of pending messages.
type MessagePage struct {
	Messages []PendingMessage
	// Next is the cursor of the following page, empty at the end.
	Next string
}
