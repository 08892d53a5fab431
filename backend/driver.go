package backend

import (
	"context"
	"log/slog"
	"net/url"
	"time"
)

// Driver is what a broker driver implements. All methods are safe for
// concurrent use; see the package documentation for the guarantees.
type Driver interface {
	// Enqueue stores msgs in queue and returns one result per message, in
	// order. All messages are valid. Drivers store a batch atomically where the
	// broker allows it and document it where it does not.
	Enqueue(ctx context.Context, queue string, msgs []Message) ([]EnqueueResult, error)

	// Receive blocks until at least one message of queue is ready, then claims
	// up to p.Max of them under leases of p.Lease. It returns ctx.Err() when ctx
	// ends while it waits. A claim it has sent to the broker is not abandoned
	// when ctx ends: Receive waits for its answer (under a timeout of its
	// own) and returns what it claimed, which the portable layer hands out
	// (or gives back after Close). It never returns more
	// than p.Max deliveries.
	Receive(ctx context.Context, queue string, p ReceiveParams) ([]Delivery, error)

	// Ack deletes the messages whose receipts are current. errs has one entry
	// per ref: nil, ErrLeaseLost, or another error for that ref alone. err
	// reports a failure of the whole call.
	Ack(ctx context.Context, refs []Ref) (errs []error, err error)

	// Retry ends the lease and makes the message ready again no earlier than
	// delay from now, keeping reason as its last error (an empty reason keeps
	// the previous one). The attempt count is not reset. reason is an opaque
	// string of valid UTF-8 of at most MaxErrorHistoryBytes bytes (the
	// portable layer's encoding of the message's error history): the
	// driver stores it verbatim and returns it unchanged as
	// Delivery.LastError and PendingMessage.LastError.
	Retry(ctx context.Context, ref Ref, delay time.Duration, reason string) error

	// Dead ends the lease and moves the message to the queue's dead-letter
	// store with reason, recording attempts as its attempt count. The
	// portable layer passes the delivery's Attempt for a consumer's Dead,
	// and one less for a claim past max attempts, which was never handed
	// out: a dead letter counts the deliveries its message had. reason is
	// an opaque string of at most MaxErrorHistoryBytes bytes, as Retry's:
	// the driver stores it verbatim and returns it unchanged as
	// DeadLetter.Reason.
	Dead(ctx context.Context, ref Ref, reason string, attempts int) error

	// Extend moves the lease deadline to now + lease and returns it.
	Extend(ctx context.Context, ref Ref, lease time.Duration) (time.Time, error)

	// Close releases the driver's resources. It never acks.
	Close() error
}

// Opener opens a driver from a URL whose scheme it was registered for. Each
// driver package exports its Opener as Open and registers it with
// fila.Register from init. It
// must reject query parameters it does not know with an ErrInvalid error,
// connect to the broker and check that it answers before returning (within
// ctx), and keep the URL's credentials out of its errors (see RedactError).
type Opener func(ctx context.Context, u *url.URL, o OpenOptions) (Driver, error)

// OpenOptions are what the portable layer passes to an Opener besides the
// URL.
type OpenOptions struct {
	// Logger receives every log line of the driver and of the client
	// libraries it uses, as far as they can be routed. fila.Open always
	// passes one (the logger of fila.WithLogger, else slog.Default()); a
	// driver treats nil, from a direct caller, as slog.Default().
	Logger *slog.Logger
}

// MaxPriority is the highest Message.Priority.
const MaxPriority = 3

// MaxErrorHistoryBytes is the longest reason the portable layer passes to
// Driver.Retry and Driver.Dead, in bytes: a message's error history
// (fila.AttemptError), encoded as a 14-byte first line and at most five
// entries of up to 38 bytes of header each, the latest with a reason of
// up to 16 KiB and the four before it with reasons cut to 1 KiB
// (14 + 5×38 + 16,384 + 4×1,024 = 20,684). A driver stores reasons as
// opaque strings of up to this many bytes and returns them byte for byte;
// it never parses them. (A broker that cannot hold a character may store
// another single character in its place, as the postgres driver stores
// NUL as U+FFFD: the encoding counts characters, not bytes, and survives
// it.) Dead letters imported from another broker
// (DeadImporter) and reasons stored by older versions may be plain text
// instead, of any length the other broker allowed.
const MaxErrorHistoryBytes = 14 + 5*38 + 16<<10 + 4<<10

// Prioritizer is implemented by drivers that hand out a queue's ready
// messages of a higher Priority first (contract: priorities), keep a
// message's level through retries, expired leases, dead letters and their
// replay, and return it in deliveries. Without it, enqueueing a message of
// a level above 0 returns ErrUnsupported.
type Prioritizer interface {
	// Priorities reports whether this driver instance honours levels.
	Priorities() bool
}

// Deduper is implemented by drivers that support dedup keys (contract: dedup-keys). Without
// it, enqueueing a message with a dedup key returns ErrUnsupported.
type Deduper interface {
	// DedupKeys reports whether this driver instance enforces dedup keys.
	DedupKeys() bool
}

// DeadLetterer is implemented by drivers that can list, replay and purge dead
// letters (contract: dead-letter-management). Without it those calls return ErrUnsupported; dead letters are
// still kept by Driver.Dead.
type DeadLetterer interface {
	DeadList(ctx context.Context, queue string, p DeadListParams) (DeadPage, error)
	// DeadReplay moves the selected dead letters back to ready with attempts
	// reset and their dedup keys dropped, and returns how many moved.
	DeadReplay(ctx context.Context, queue string, f DeadFilter) (int, error)
	// DeadPurge deletes the selected dead letters and returns how many.
	DeadPurge(ctx context.Context, queue string, f DeadFilter) (int, error)
}

// StatsReader is implemented by drivers that can count a queue's messages
// (contract: stats). Without it, Stats returns ErrUnsupported.
type StatsReader interface {
	QueueStats(ctx context.Context, queue string) (Stats, error)
}

// TxEnqueuer is implemented by drivers that can enqueue inside a transaction
// the caller owns, so the message commits or rolls back with the caller's own
// writes. tx is driver-specific (for PostgreSQL a pgx.Tx); a driver returns an
// ErrInvalid error naming the types it accepts for any other value.
type TxEnqueuer interface {
	EnqueueTx(ctx context.Context, tx any, queue string, msgs []Message) ([]EnqueueResult, error)
}

// Pinger is implemented by drivers that can check the broker is reachable.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Namer is implemented by drivers that report a short name ("postgres") used
// in error messages and logs.
type Namer interface {
	DriverName() string
}

// DelayedReceiver is implemented by drivers that can hand out messages whose
// run-at is still in the future, so a relay can move a whole queue to another
// broker without waiting for its delays. Without it, moving delayed messages
// returns ErrUnsupported.
type DelayedReceiver interface {
	// ReceiveDelayed claims, without blocking, up to p.Max messages of queue
	// whose run-at has not come, leasing them as Receive does (the attempt is
	// incremented and the usual settlements apply). Each delivery's RunAt is
	// the run-at the message had. It returns an empty slice when there are
	// none.
	ReceiveDelayed(ctx context.Context, queue string, p ReceiveParams) ([]Delivery, error)
}

// AckReceiver is implemented by drivers that can settle acks and claim
// the next messages in one round trip. A consumer that acks what it ran
// and then receives again pays one round trip instead of two. Without it,
// fila.Client.AckReceive acks with Ack and claims nothing.
type AckReceiver interface {
	// AckReceive acks refs as Ack does, then claims up to p.Max messages of
	// queue that are ready now, leasing them as Receive does, without
	// waiting for more: it returns no deliveries when none was ready, or
	// when it could not combine the two (refs of other queues, say) and
	// only acked. ackErrs is Ack's per-ref result. A non-nil err with
	// ackErrs nil leaves the acks' outcome unknown, as Ack's error does; a
	// claim whose reply was lost leaves leases that expire.
	AckReceive(ctx context.Context, refs []Ref, queue string, p ReceiveParams) (ackErrs []error, ds []Delivery, err error)
}

// DeadImporter is implemented by drivers that can store dead letters taken
// from another broker, with their reasons, attempts and times. Importing a
// dead letter whose id the queue's dead-letter store already holds changes
// nothing, so a relay that crashed between import and purge can run again.
// Without it, moving dead letters returns ErrUnsupported.
type DeadImporter interface {
	DeadImport(ctx context.Context, queue string, letters []DeadLetter) error
}

// QueueLister is implemented by drivers that can name the queues they hold.
// Without it, Client.QueueList returns ErrUnsupported.
type QueueLister interface {
	// QueueList returns the names of the queues that hold a message (ready,
	// delayed or leased) or a dead letter, sorted. A queue that holds
	// nothing may be listed too.
	QueueList(ctx context.Context) ([]string, error)
}

// QueueDeleter is implemented by drivers that can delete a queue. Without
// it, Client.QueueDelete returns ErrUnsupported.
type QueueDeleter interface {
	// QueueDelete deletes everything queue holds: ready, delayed and leased
	// messages, dead letters, dedup keys and whatever the broker keeps for
	// it. Settling a delivery leased from it before then returns
	// ErrLeaseLost. Deleting a queue that holds nothing is not an error,
	// and the queue can be used again at once.
	QueueDelete(ctx context.Context, queue string) error
}

// Marker is implemented by drivers that can keep small named marks per
// queue in the broker, seen by every client of it. The portable layer builds
// queue pause, periodic jobs and unique-for-a-period dedup keys on them.
// Without it those features return ErrUnsupported.
//
// A mark is a name (1 to MaxMarkName bytes of UTF-8 without NUL, chosen by
// the portable layer) and an expiry. An expired mark does not exist: every
// method treats it as absent, whenever the broker gets round to deleting it.
// Deleting a queue (QueueDeleter) deletes its marks.
type Marker interface {
	// MarkSet creates or replaces mark name of queue, expiring at until (the
	// zero time: never). With onlyNew it creates the mark only when no
	// unexpired mark of that name exists, atomically: of concurrent callers
	// from any number of processes exactly one gets true. It returns whether
	// it stored the mark (always true without onlyNew).
	MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error)
	// MarkGet reports whether an unexpired mark of that name exists.
	MarkGet(ctx context.Context, queue, name string) (bool, error)
	// MarkDelete deletes the mark; deleting one that does not exist is not
	// an error.
	MarkDelete(ctx context.Context, queue, name string) error
}

// MaxMarkName is the longest mark name a Marker must store, in bytes.
const MaxMarkName = 600

// MarkLister is implemented by Markers that can list the marks of a queue.
// Without it, cancelling a message by id returns ErrUnsupported.
type MarkLister interface {
	// MarkList returns the names of queue's unexpired marks that start with
	// prefix, sorted.
	MarkList(ctx context.Context, queue, prefix string) ([]string, error)
}
