package postgres

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/backend"
)

// Defaults of Options.
const (
	// DefaultSchema is the schema Fila's tables live in.
	DefaultSchema = "fila"
	// DefaultSafetyPoll is how often a blocked Receive re-checks its queue
	// when LISTEN is on, in case a notification was lost.
	DefaultSafetyPoll = 30 * time.Second
	// DefaultPollInterval is how often a blocked Receive checks its queue
	// when LISTEN is off.
	DefaultPollInterval = time.Second
)

// Options configure a Driver built with New. The zero value is usable: schema
// "fila", LISTEN on, safety poll 30s, no migration at open.
type Options struct {
	// Schema holds Fila's tables; empty means "fila". Lower-case letters,
	// digits and '_'.
	Schema string
	// Migrate runs Migrate when the driver is created. Without it the driver
	// checks that the schema is at SchemaVersion and fails otherwise.
	Migrate bool
	// DisableListen turns LISTEN/NOTIFY wake-up off: blocked receivers poll
	// every PollInterval instead. Use it behind a pooler in transaction mode
	// (PgBouncer), where LISTEN does not work.
	DisableListen bool
	// PollInterval is how often a blocked Receive re-checks its queue without
	// a notification: the safety poll with LISTEN on (default 30s), the
	// polling period with LISTEN off (default 1s). Messages whose run-at or
	// lease deadline arrives are picked up at that time either way.
	PollInterval time.Duration
	// ListenConfig, when set, is used for the driver's LISTEN connection
	// instead of the pool's connection config: for a pool behind a pooler in
	// transaction mode, point it at the server directly (or at a pooler in
	// session mode).
	ListenConfig *pgx.ConnConfig
	// Logger receives the driver's own events (LISTEN connection lost and
	// restored). Default slog.Default().
	Logger *slog.Logger
	// Mode is the storage mode: ModeSkipLocked (empty means it) or ModeLog.
	// The modes keep their queues in different tables of the schema; move a
	// queue between them with fila migrate.
	Mode string
	// RotateInterval is how long a generation of the log mode's tables
	// takes new rows before rotation (default DefaultRotateInterval).
	RotateInterval time.Duration
	// TopicRetention is how long the log mode keeps a topic's events after
	// their publish, read or not, so that TopicRewind can read them again
	// (default 0: an event goes once every subscription is done with it).
	// The driver that rotates applies its own setting: give every client
	// of a schema the same one.
	TopicRetention time.Duration
}

// Driver is the PostgreSQL driver. Build it with Open (through fila.Open) or
// New; it implements backend.Driver and the optional Deduper, DeadLetterer,
// StatsReader, TxEnqueuer, DelayedReceiver, DeadImporter, QueueLister,
// QueueDeleter, Marker, MarkLister, MessageLister (skip-locked mode only),
// Pinger and Namer interfaces. It is safe for concurrent use.
type Driver struct {
	pool     *pgxpool.Pool
	ownPool  bool
	schema   string
	listen   bool
	poll     time.Duration
	log      *slog.Logger
	lconfig  *pgx.ConnConfig
	q        statements
	waiters  waiters
	notifier notifier

	// done is closed by Close; it ends blocked receives and the listener.
	done      chan struct{}
	doneCtx   context.Context // ends at Close, for statements that outlive their caller's context
	endDone   context.CancelFunc
	closeOnce sync.Once
	startOnce sync.Once
	lwg       sync.WaitGroup
	lcancel   context.CancelFunc
	lmu       sync.Mutex
	closed    bool
	// sleeping counts receives waiting for a wake-up (for tests and
	// diagnostics).
	sleeping atomic.Int64
	// claims counts claim statements run (for tests and diagnostics).
	claims atomic.Int64
	// sizes remembers how many members each claim this driver received
	// returned (log mode), so that the ack of all of them is short.
	sizes claimSizes
	// skipped counts claims a receive did not run, the queue being quiet
	// (for tests and diagnostics).
	skipped atomic.Int64
	// copyPublishes counts publishes written by COPY (for tests).
	copyPublishes atomic.Int64
	// wholeAcks counts claims settled by log_ack_whole (for tests and
	// diagnostics).
	wholeAcks atomic.Int64
	// mode is ModeSkipLocked or ModeLog.
	mode string
	// retention is Options.TopicRetention.
	retention time.Duration
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.Deduper      = (*Driver)(nil)
	_ backend.DeadLetterer = (*Driver)(nil)
	_ backend.StatsReader  = (*Driver)(nil)
	_ backend.TxEnqueuer   = (*Driver)(nil)
	_ backend.Pinger       = (*Driver)(nil)
	_ backend.Namer        = (*Driver)(nil)
	_ backend.QueueLister  = (*Driver)(nil)
	_ backend.QueueDeleter = (*Driver)(nil)
	_ backend.Marker       = (*Driver)(nil)
	_ backend.MarkLister   = (*Driver)(nil)
	_ backend.Prioritizer  = (*Driver)(nil)
)

// New returns a driver over a pool the caller owns (Close does not close it).
// With o.Migrate it migrates the schema first; otherwise it checks the schema
// version. Wrap the driver with fila.New to get a Client.
func New(ctx context.Context, pool *pgxpool.Pool, o Options) (*Driver, error) {
	if pool == nil {
		return nil, backend.Invalidf("postgres.New: pool is nil")
	}
	if err := checkIsolation(ctx, pool); err != nil {
		return nil, err
	}
	return newDriver(ctx, pool, false, o)
}

func newDriver(ctx context.Context, pool *pgxpool.Pool, own bool, o Options) (*Driver, error) {
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := validateSchema(o.Schema); err != nil {
		return nil, err
	}
	if o.PollInterval < 0 {
		return nil, backend.Invalidf("postgres: poll interval %v is negative", o.PollInterval)
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultSafetyPoll
		if o.DisableListen {
			o.PollInterval = DefaultPollInterval
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch o.Mode {
	case "":
		o.Mode = ModeSkipLocked
	case ModeSkipLocked, ModeLog:
	default:
		return nil, backend.Invalidf("postgres: mode %q is not %q or %q", o.Mode, ModeSkipLocked, ModeLog)
	}
	if o.RotateInterval < 0 {
		return nil, backend.Invalidf("postgres: rotate interval %v is negative", o.RotateInterval)
	}
	if o.RotateInterval == 0 {
		o.RotateInterval = DefaultRotateInterval
	}
	if o.TopicRetention < 0 {
		return nil, backend.Invalidf("postgres: topic retention %v is negative", o.TopicRetention)
	}
	if o.TopicRetention > 0 && o.Mode != ModeLog {
		return nil, backend.Invalidf("postgres: topic retention applies to the log mode only (Mode %q)", ModeLog)
	}
	if o.Migrate {
		if err := Migrate(ctx, pool, o.Schema); err != nil {
			return nil, err
		}
	} else if err := checkSchema(ctx, pool, o.Schema); err != nil {
		return nil, err
	}
	d := &Driver{
		pool:      pool,
		ownPool:   own,
		schema:    o.Schema,
		listen:    !o.DisableListen,
		poll:      o.PollInterval,
		lconfig:   o.ListenConfig,
		log:       o.Logger.With(slog.String("driver", "postgres"), slog.String("schema", o.Schema)),
		q:         newStatements(o.Schema),
		done:      make(chan struct{}),
		mode:      o.Mode,
		retention: o.TopicRetention,
	}
	d.doneCtx, d.endDone = context.WithCancel(context.Background())
	if o.Mode == ModeLog {
		d.q = newLogStatements(o.Schema)
		d.log = d.log.With(slog.String("mode", ModeLog))
	}
	if d.listen {
		if err := d.checkListen(ctx); err != nil {
			return nil, err
		}
	}
	d.waiters.init()
	d.notifier.init(func(ctx context.Context, queues []string) error {
		_, err := d.pool.Exec(ctx, d.q.notifyMany, d.q.channel, queues)
		return err
	}, d.log)
	if o.Mode == ModeLog {
		d.lwg.Add(1)
		go d.rotate(o.RotateInterval)
	}
	return d, nil
}

// Pool returns the driver's connection pool, for the caller's own queries
// (for example to begin a transaction for Client.EnqueueTx).
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Schema returns the schema the driver's tables live in.
func (d *Driver) Schema() string { return d.schema }

// DriverName returns "postgres".
func (d *Driver) DriverName() string { return "postgres" }

// DedupKeys reports true: dedup keys are enforced by a unique index.
func (d *Driver) DedupKeys() bool { return true }

// Priorities reports whether d honours message levels
// (backend.Prioritizer): both modes do, the skip-locked mode since schema
// version 17 (a column of the claim index), the log mode since version 18
// (a stream per level).
func (d *Driver) Priorities() bool { return true }

// Ping checks the server is reachable.
func (d *Driver) Ping(ctx context.Context) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	return mapErr(ctx, "ping", d.pool.Ping(ctx))
}

func (d *Driver) isClosed() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Close stops the LISTEN connection, ends blocked receives with ErrClosed
// and, when the driver opened the pool itself, closes the pool. It never
// acks: messages leased through this driver come back when their leases
// expire. Closing twice is harmless.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.lmu.Lock()
		d.closed = true
		close(d.done)
		d.endDone()
		cancel := d.lcancel
		d.lmu.Unlock()
		if cancel != nil {
			cancel()
		}
		d.lwg.Wait()
		d.notifier.close()
		if d.ownPool {
			d.pool.Close()
		}
	})
	return nil
}
