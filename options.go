package fila

import (
	"log/slog"
	"time"
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
	MaxReasonBytes  = 16 << 10 // longer reasons are truncated, not refused
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

// Option configures a Client.
type Option func(*options)

// WithLease sets the lease used when ReceiveParams.Lease is zero
// (default 30s). Values below 1ms are ignored.
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if d >= MinLease && d <= MaxLease {
			o.lease = d
		}
	}
}

// WithMaxAttempts sets the max attempts of messages that do not set their own
// (default 10). Values below 1 are ignored.
func WithMaxAttempts(n int) Option {
	return func(o *options) {
		if n >= 1 && n <= MaxAttemptsLimit {
			o.maxAttempts = n
		}
	}
}

// WithMaxBodyBytes sets the largest body Enqueue accepts (default 256 KiB);
// larger bodies fail with ErrTooLarge. Values below 1 are ignored; values
// above MaxBodyBytes are lowered to it.
func WithMaxBodyBytes(n int) Option {
	return func(o *options) {
		if n >= 1 {
			o.maxBodyBytes = min(n, MaxBodyBytes)
		}
	}
}

// WithLogger sets the logger for the client's own events (dead-lettering on
// max attempts, background failures) and, for a client made by Open, of its
// driver (connection lost and restored, reconnection failures, broker
// warnings) and of the broker's client library where the driver can route
// it. An outage is reported with a bounded number of lines at Info and
// above (see the package documentation). Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithControlInterval sets how often the client reads the pause and cancel
// marks of the queues it works on (default DefaultControlInterval, 1s). It
// bounds how long a QueuePause or MessageCancel made by any process takes
// to reach this client: twice the interval for a pause, the interval for a
// cancel of a message this client holds. Each queue costs one or two small
// broker reads per interval while the client receives from it or holds its
// messages. Values below 10ms or above 1 minute are ignored.
func WithControlInterval(d time.Duration) Option {
	return func(o *options) {
		if d >= 10*time.Millisecond && d <= time.Minute {
			o.controlInterval = d
		}
	}
}
