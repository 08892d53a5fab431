package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fila-go/fila"
)

// Defaults used where Config leaves a field zero.
const (
	// DefaultConcurrency is a queue's concurrency when QueueConfig leaves it
	// zero.
	DefaultConcurrency = 10
	// DefaultTimeout bounds a job's run when neither Config nor KindConfig
	// set a timeout.
	DefaultTimeout = time.Minute
	// DefaultShutdownGrace is how long running jobs may go on after Run's
	// context ends.
	DefaultShutdownGrace = 10 * time.Second
)

// Config configures a Worker. Queues or Periodic is required.
type Config struct {
	// Queues maps each queue the worker serves to its settings. Each queue has
	// its own concurrency limit and its own receive loop. It may be empty
	// when Periodic is not: the worker then only enqueues periodic jobs.
	Queues map[string]QueueConfig
	// Concurrency, when above zero, is the most jobs running at once over
	// all of Queues: the queues share that many slots, and while several
	// have work each gets a share in proportion to its QueueConfig.Weight
	// (a queue of weight 3 runs three jobs for each one of a queue of
	// weight 1). A queue also stays within its own QueueConfig.Concurrency.
	// Zero: each queue has its own slots and nothing is shared.
	//
	// Weights are the way out of starvation that strict priorities
	// (fila.Message.Priority) risk: put urgent jobs in a queue of their own
	// with a higher weight, and the others still run. A queue waiting for
	// messages holds one slot while its receive waits, so give Concurrency
	// one slot per queue more than the jobs you want running; New refuses
	// fewer slots than queues.
	Concurrency int

	// Periodic holds the schedules the worker runs: at each tick of a
	// schedule one copy of its message is enqueued, once however many
	// processes run a Worker with that schedule (see "Periodic jobs" in the
	// package documentation). The driver must keep marks (backend.Marker);
	// New refuses the schedules otherwise.
	Periodic []Periodic

	// Lease is how long each received message stays invisible to other
	// consumers before the worker must extend it; default fila.DefaultLease
	// (30s). A job that outlives it is kept leased by heartbeats.
	Lease time.Duration
	// Heartbeat is how often the lease of a running job is extended (by
	// Lease each time); default Lease/3, so a job that runs longer than a
	// third of its lease is extended in the background. Keep it well below
	// Lease. Negative disables heartbeats (a job must then finish within its
	// lease or another consumer may run it too).
	Heartbeat time.Duration

	// Presence is how often the worker renews its presence record in each
	// queue it serves, which PresenceList (and the dashboard, and
	// `fila queue workers`) reads; default DefaultPresence (10s). A record
	// expires three intervals after its last renewal, so a worker that
	// died leaves the list within 30s by default; one that stops deletes
	// its records. At the same renewals the worker writes the throughput
	// records of the minutes that ended (Throughput, ThroughputList).
	// Negative records nothing. Drivers that cannot list marks (RabbitMQ)
	// record nothing either.
	Presence time.Duration

	// Timeout bounds each job's run through its context's deadline; default
	// DefaultTimeout (1m). Negative means no timeout. KindConfig overrides it.
	// A job past its timeout that still has not returned stops being
	// heartbeated, so its lease can expire and another consumer take it.
	Timeout time.Duration
	// MaxAttempts caps the deliveries of every job: a job that fails on its
	// MaxAttempts-th attempt is dead-lettered with its error as the reason.
	// Zero means each message's own limit (fila.Message.MaxAttempts or the
	// client's WithMaxAttempts). The lower of this and the message's limit
	// wins, since the client dead-letters a message delivered past its own
	// limit anyway. KindConfig overrides it.
	MaxAttempts int
	// Backoff computes the delay before retrying a failed job; default
	// DefaultBackoff. KindConfig overrides it.
	Backoff Backoff
	// Kinds holds per-kind overrides of MaxAttempts, Timeout and Backoff.
	Kinds map[string]KindConfig

	// UnknownKind handles messages of kinds no handler was registered for.
	// Nil dead-letters them at once with the reason
	// `worker: no handler registered for kind "K"`. During a rolling deploy,
	// where new kinds can reach old workers, a handler that returns a plain
	// error makes them wait for a newer worker instead (within their max
	// attempts).
	UnknownKind Handler
	// Middleware wraps every handler, UnknownKind included; the first is the
	// outermost.
	Middleware []Middleware

	// Logger receives the worker's own records (job outcomes, receive and
	// settlement failures) and is the base of the per-job logger returned by
	// Logger(ctx); default slog.Default(). Successful jobs log at Debug,
	// retries at Warn, dead letters at Error. Receive failures during a
	// broker outage log a bounded number of lines per queue: a Warn at the
	// first, Debug for the next with a Warn reminder after 1, 2, 4… minutes,
	// an Info when receiving works again.
	Logger *slog.Logger

	// ShutdownGrace is how long running jobs may go on once Run's context
	// ends before their contexts are cancelled; default DefaultShutdownGrace
	// (10s). Negative cancels them at once.
	ShutdownGrace time.Duration

	// OnJobStart is called in the job's goroutine before its handler runs,
	// for metrics. It must be quick and safe for concurrent use.
	OnJobStart func(JobEvent)
	// OnJobEnd is called in the job's goroutine after its outcome was
	// applied (or failed to be), with the duration and the outcome.
	OnJobEnd func(JobEvent)
}

// QueueConfig configures one queue of a Worker.
type QueueConfig struct {
	// Concurrency is the most jobs of this queue running at once; default
	// DefaultConcurrency. The worker receives at most as many messages as it
	// has free slots, so no message waits leased while no goroutine can run
	// it. A job's slot is freed when its handler returns; successes wait for
	// their batched ack outside the limit (see the package documentation).
	Concurrency int
	// Weight is the queue's share of Config.Concurrency's slots against the
	// other queues', while they all have work; default 1. Setting it
	// without Config.Concurrency is an error: without shared slots there is
	// nothing to share.
	Weight int
}

// KindConfig overrides the worker's defaults for one kind of job. Zero
// fields keep the worker's settings.
type KindConfig struct {
	// MaxAttempts caps the deliveries of jobs of this kind (see
	// Config.MaxAttempts).
	MaxAttempts int
	// Timeout bounds each job's run; negative means no timeout.
	Timeout time.Duration
	// Backoff computes the delay before a retry.
	Backoff Backoff
}

// settings are a kind's effective settings.
type settings struct {
	maxAttempts int
	timeout     time.Duration
	backoff     Backoff
}

// withDefaults fills zero fields and checks the config.
func (cfg Config) withDefaults() (Config, error) {
	if len(cfg.Queues) == 0 && len(cfg.Periodic) == 0 {
		return cfg, errors.New("worker: Config.Queues is empty; name at least one queue (or a periodic schedule)")
	}
	if cfg.Concurrency < 0 {
		return cfg, fmt.Errorf("worker: concurrency %d is negative", cfg.Concurrency)
	}
	if cfg.Concurrency > 0 && cfg.Concurrency < len(cfg.Queues) {
		return cfg, fmt.Errorf("worker: Config.Concurrency %d is below the number of queues (%d): each queue waiting for messages holds a shared slot, so give at least one per queue, and more for the jobs", cfg.Concurrency, len(cfg.Queues))
	}
	queues := make(map[string]QueueConfig, len(cfg.Queues))
	for name, qc := range cfg.Queues {
		if err := fila.ValidateQueueName(name); err != nil {
			return cfg, fmt.Errorf("worker: %w", err)
		}
		if qc.Concurrency < 0 {
			return cfg, fmt.Errorf("worker: queue %q: concurrency %d is negative", name, qc.Concurrency)
		}
		if qc.Weight < 0 {
			return cfg, fmt.Errorf("worker: queue %q: weight %d is negative", name, qc.Weight)
		}
		if qc.Weight > 0 && cfg.Concurrency == 0 {
			return cfg, fmt.Errorf("worker: queue %q has a weight, but Config.Concurrency is zero: set it to share slots between the queues by weight", name)
		}
		if qc.Weight == 0 {
			qc.Weight = 1
		}
		if qc.Concurrency == 0 {
			qc.Concurrency = DefaultConcurrency
			if cfg.Concurrency > 0 {
				qc.Concurrency = cfg.Concurrency
			}
		}
		queues[name] = qc
	}
	cfg.Queues = queues
	if cfg.Lease < 0 {
		return cfg, fmt.Errorf("worker: lease %v is negative", cfg.Lease)
	}
	if cfg.Lease == 0 {
		cfg.Lease = fila.DefaultLease
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = cfg.Lease / 3
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Presence == 0 {
		cfg.Presence = DefaultPresence
	}
	if cfg.MaxAttempts < 0 {
		return cfg, fmt.Errorf("worker: max attempts %d is negative", cfg.MaxAttempts)
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	kinds := make(map[string]KindConfig, len(cfg.Kinds))
	for k, kc := range cfg.Kinds {
		if kc.MaxAttempts < 0 {
			return cfg, fmt.Errorf("worker: kind %q: max attempts %d is negative", k, kc.MaxAttempts)
		}
		kinds[k] = kc
	}
	cfg.Kinds = kinds
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	return cfg, nil
}

// settingsFor merges the kind's overrides over the worker's defaults.
func (cfg *Config) settingsFor(kind string) settings {
	s := settings{maxAttempts: cfg.MaxAttempts, timeout: cfg.Timeout, backoff: cfg.Backoff}
	if kc, ok := cfg.Kinds[kind]; ok {
		if kc.MaxAttempts > 0 {
			s.maxAttempts = kc.MaxAttempts
		}
		if kc.Timeout != 0 {
			s.timeout = kc.Timeout
		}
		if kc.Backoff != nil {
			s.backoff = kc.Backoff
		}
	}
	return s
}
