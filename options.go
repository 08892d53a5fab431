package fila

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/fila-go/fila/backend"
)

// Defaults used when an Option does not say otherwise.
const (
	DefaultLease        = 30 * time.Second
	DefaultMaxAttempts  = 10
	DefaultMaxBodyBytes = 256 << 10
	// MaxReceive is the most messages one Receive may ask for.
	MaxReceive = 1000
	// MaxBatch is the most messages one EnqueueBatch may carry.
	MaxBatch = 10000
)

// Limits, enforced once by the Client for every driver. They are what every
// broker can carry, so a message valid on one broker is valid on all of them
// and a queue can move between brokers (see the package documentation).
const (
	MaxQueueNameLen = 128
	MaxKindLen      = 255
	// MaxHeaderKeyLen is AMQP's limit on a field name.
	MaxHeaderKeyLen = 255
	MaxHeaderBytes  = 16 << 10 // keys and values together
	MaxDedupKeyLen  = 512
	// MaxPriority is the highest Message.Priority; 0 is the lowest and
	// the default.
	MaxPriority    = backend.MaxPriority
	MaxReasonBytes = 16 << 10 // longer reasons are truncated, not refused
	// MaxBodyBytes is the largest limit WithMaxBodyBytes can set: a MongoDB
	// document holds at most 16 MiB, body and metadata together.
	MaxBodyBytes = 15 << 20
	// MaxBatchBytes bounds the bodies and headers of one EnqueueBatch or
	// EnqueueTx together (a PostgreSQL parameter holds at most 1 GiB, a
	// Redis argument 512 MiB; well below both).
	MaxBatchBytes = 64 << 20
	// MaxAttemptsLimit is the largest max attempts a message may set.
	MaxAttemptsLimit = 1 << 20
	// MaxDelay is the longest delay (or run-at ahead of now) a message may
	// have.
	MaxDelay = 100 * 365 * 24 * time.Hour
	// MinLease and MaxLease bound every lease, given to Receive or Extend.
	MinLease = time.Millisecond
	MaxLease = 7 * 24 * time.Hour
)

type options struct {
	lease        time.Duration
	maxAttempts  int
	maxBodyBytes int
	logger       *slog.Logger
	// controlInterval is how often pause and cancel marks are read.
	controlInterval time.Duration
}

func defaultOptions() options {
	return options{
		lease:        DefaultLease,
		maxAttempts:  DefaultMaxAttempts,
		maxBodyBytes: DefaultMaxBodyBytes,
		logger:       slog.Default(),

		controlInterval: DefaultControlInterval,
	}
}

// Option configures a Client. An option given a value outside its range
// makes Open and New fail with an ErrInvalid error naming it, instead of
// being ignored.
type Option func(*options) error

// applyOptions returns the defaults with opts applied, or the first bad
// option's error.
func applyOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, f := range opts {
		if f == nil {
			return o, invalidf("nil Option")
		}
		if err := f(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithLease sets the lease used when ReceiveParams.Lease is zero
// (default 30s), between MinLease and MaxLease.
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		if err := validateLease(d); err != nil {
			return fmt.Errorf("WithLease: %w", err)
		}
		o.lease = d
		return nil
	}
}

// WithMaxAttempts sets the max attempts of messages that do not set their own
// (default 10), between 1 and MaxAttemptsLimit.
func WithMaxAttempts(n int) Option {
	return func(o *options) error {
		if n < 1 || n > MaxAttemptsLimit {
			return invalidf("WithMaxAttempts(%d): must be between 1 and %d", n, MaxAttemptsLimit)
		}
		o.maxAttempts = n
		return nil
	}
}

// WithMaxBodyBytes sets the largest body Enqueue accepts (default 256 KiB),
// between 1 and MaxBodyBytes; larger bodies fail with ErrTooLarge.
func WithMaxBodyBytes(n int) Option {
	return func(o *options) error {
		if n < 1 || n > MaxBodyBytes {
			return invalidf("WithMaxBodyBytes(%d): must be between 1 and %d", n, MaxBodyBytes)
		}
		o.maxBodyBytes = n
		return nil
	}
}

// WithLogger sets the logger for the client's own events (dead-lettering on
// max attempts, background failures) and, for a client made by Open, of its
// driver (connection lost and restored, reconnection failures, broker
// warnings) and of the broker's client library where the driver can route
// it. An outage is reported with a bounded number of lines at Info and
// above (see the package documentation). Default slog.Default(); nil is
// ErrInvalid.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return invalidf("WithLogger(nil): pass a logger, or omit the option for slog.Default()")
		}
		o.logger = l
		return nil
	}
}

// WithControlInterval sets how often the client reads the pause and cancel
// marks of the queues it works on (default DefaultControlInterval, 1s),
// between 10ms and 1 minute. It bounds how long a QueuePause or
// MessageCancel made by any process takes to reach this client: twice the
// interval for a pause, the interval for a cancel of a message this client
// holds. Each queue costs one or two small broker reads per interval while
// the client receives from it or holds its messages.
func WithControlInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond || d > time.Minute {
			return invalidf("WithControlInterval(%v): must be between 10ms and 1m", d)
		}
		o.controlInterval = d
		return nil
	}
}
