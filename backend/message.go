package backend

import "time"

// Message is a validated message handed to Driver.Enqueue.
type Message struct {
	// ID is assigned by the portable layer (a time-ordered UUID in text form);
	// drivers store it unchanged and return it in deliveries.
	ID   string
	Kind string
	// Body is never nil in messages handed to a driver (the portable layer
	// guarantees it, so drivers need not check); it may be empty. In the
	// deliveries and dead letters a driver returns, nil also means empty:
	// the portable layer hands out an empty slice.
	Body    []byte
	Headers map[string]string
	// RunAt, when not zero, is the absolute time the message becomes ready.
	RunAt time.Time
	// Delay, used when RunAt is zero, is relative to the broker's clock at
	// enqueue time. Zero means ready at once.
	Delay time.Duration
	// DedupKey, when not empty, must be unique among the queue's pending
	// messages (only passed to drivers that implement Deduper).
	DedupKey string
	// MaxAttempts is the message's own limit; 0 means the client default.
	MaxAttempts int
	// Priority is the message's level, 0 (lowest, the default) to
	// MaxPriority; only drivers that implement Prioritizer get one above
	// 0, and they return it in deliveries and dead letters.
	Priority int
	// EnqueuedAt is the client's clock at enqueue.
	EnqueuedAt time.Time
	// Attempts is the number of deliveries the message already had elsewhere:
	// 0 for a new message; a relay moving a message between brokers carries
	// its count over. A driver stores it as the starting attempt count, so the
	// next delivery's Attempt is Attempts+1.
	Attempts int
}

// Due returns when m becomes ready, given the driver's current time.
func (m *Message) Due(now time.Time) time.Time {
	if !m.RunAt.IsZero() {
		return m.RunAt
	}
	return now.Add(m.Delay)
}

// EnqueueResult is the outcome of one message of an Enqueue call.
type EnqueueResult struct {
	// ID is the stored message's id, or for a duplicate the id of the pending
	// message that holds the dedup key.
	ID string
	// Duplicate reports that nothing was stored for this message because its
	// dedup key was taken (by a pending message or by an earlier message of the
	// same batch).
	Duplicate bool
}

// Delivery is a message handed out under a lease.
type Delivery struct {
	Message
	// Attempt counts deliveries of this message, this one included (1-based).
	Attempt int
	// Receipt identifies this lease (not just the message). Opaque to callers.
	Receipt string
	// Deadline is when the lease ends unless extended.
	Deadline time.Time
	// LastError is the reason given by the latest Retry with one, if any,
	// exactly as Driver.Retry received it (an encoded error history the
	// portable layer decodes; see MaxErrorHistoryBytes).
	LastError string
}

// Ref identifies a delivery to settle: its queue, message id and receipt.
type Ref struct {
	Queue   string
	ID      string
	Receipt string
}

// ReceiveParams are the validated arguments of Driver.Receive.
type ReceiveParams struct {
	// Max is the most messages to return, at least 1.
	Max int
	// Lease is the visibility timeout of each delivery, positive.
	Lease time.Duration
}

// DeadLetter is a message in a queue's dead-letter store.
type DeadLetter struct {
	Message
	Queue string
	// Attempts is the number of deliveries the message had: for a message
	// dead-lettered on max attempts, its max attempts (the claim that found
	// it exhausted was not handed out).
	Attempts int
	// Reason is why it was dead-lettered, exactly as Driver.Dead received
	// it (an encoded error history the portable layer decodes; see
	// MaxErrorHistoryBytes), or as DeadImport stored it.
	Reason string
	// DeadAt is when it was dead-lettered.
	DeadAt time.Time
}

// DeadListParams select and page dead letters.
type DeadListParams struct {
	// Kind, when not empty, keeps only dead letters of that kind.
	Kind string
	// Limit is the page size, at least 1.
	Limit int
	// Cursor continues a listing from DeadPage.Next; empty starts at the oldest.
	Cursor string
	// IDs, when not nil, keeps only the dead letters with these ids (the
	// portable layer passes no empty list). A driver should filter by them
	// where it reads, so a page showing one letter reads one; the portable
	// layer drops any other letter returned.
	IDs []string
	// WithoutBodies asks for letters without their bodies (Body nil), for
	// a listing that does not show them: a driver that can leave them
	// unread should; the portable layer drops any returned.
	WithoutBodies bool
}

// DeadPage is one page of dead letters, oldest first.
type DeadPage struct {
	Letters []DeadLetter
	// Next is the cursor of the following page, empty at the end.
	Next string
}

// DeadFilter selects dead letters for replay or purge. The zero filter
// selects all of the queue's dead letters; IDs and Kind both narrow it.
type DeadFilter struct {
	IDs  []string
	Kind string
}

// Stats are a queue's counts. They are exact on a quiescent queue.
type Stats struct {
	Ready   int64
	Delayed int64
	Leased  int64
	Dead    int64
	// OldestReadyAt is when the oldest ready message became ready (its run-at,
	// or its enqueue time). Zero when no message is ready.
	OldestReadyAt time.Time
	// DeadByKind counts dead letters per kind; nil when the driver cannot tell.
	DeadByKind map[string]int64
	// ReadyByPriority counts the ready messages of each level, indexed by
	// Message.Priority (MaxPriority+1 entries, summing to Ready on a queue
	// nothing changes meanwhile); nil when the driver does not count them.
	ReadyByPriority []int64
}

// OldestReadyAge is the age of the oldest ready message at now, zero when none.
func (s Stats) OldestReadyAge(now time.Time) time.Duration {
	if s.OldestReadyAt.IsZero() {
		return 0
	}
	if d := now.Sub(s.OldestReadyAt); d > 0 {
		return d
	}
	return 0
}
