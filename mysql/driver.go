package mysql

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/wake"
)

// Defaults of Options.
const (
	// DefaultPrefix starts the names of Fila's tables: fila_messages,
	// fila_dead, fila_marks and fila_schema.
	DefaultPrefix = "fila_"
	// DefaultPollInterval is the longest a blocked Receive waits between
	// checks of its queue. It bounds how late a receiver wakes for a message
	// another process enqueued; enqueues through the same driver wake its
	// receivers at once.
	DefaultPollInterval = 250 * time.Millisecond
	// MinPollInterval is the first wait of a blocked Receive; the wait
	// doubles while the queue stays empty, up to the poll interval.
	MinPollInterval = 10 * time.Millisecond
)

// Options configure a Driver built with New. The zero value is usable.
type Options struct {
	// Prefix starts the names of Fila's tables in the database; empty
	// means DefaultPrefix. Lower-case letters, digits and '_'.
	Prefix string
	// Migrate runs Migrate when the driver is created. Without it the
	// driver checks that the tables are at SchemaVersion and fails
	// otherwise.
	Migrate bool
	// PollInterval is the longest wait between checks of a blocked
	// Receive; zero means DefaultPollInterval. Messages whose run-at or
	// lease deadline arrives are claimed at that time whatever it is.
	PollInterval time.Duration
	// Logger receives the driver's own events. Nil means slog.Default().
	Logger *slog.Logger

	// sessionReadCommitted: the pool's connections start at READ
	// COMMITTED (Open sets it), so transactions need not ask.
	sessionReadCommitted bool
}

// Driver is Fila's MySQL and MariaDB driver. Build it with Open (through
// fila.Open) or New. It implements backend.Driver and the optional
// Prioritizer, Deduper, DeadLetterer, StatsReader, TxEnqueuer,
// DelayedReceiver, AckReceiver, DeadImporter, QueueLister, QueueDeleter,
// Marker, MarkLister, MultiEnqueuer, TxMultiEnqueuer, Pinger and Namer
// interfaces. It is safe for concurrent use.
type Driver struct {
	db     *sql.DB
	ownDB  bool
	prefix string
	poll   time.Duration
	log    *slog.Logger
	q      statements
	// wake wakes this driver's blocked receivers of a queue it wrote to.
	wake wake.Board
	// txOpts are the options of the driver's own transactions: READ
	// COMMITTED, unless the connections start at it.
	txOpts *sql.TxOptions
	// mariadb reports a MariaDB server (else MySQL).
	mariadb bool
	version string

	done      chan struct{}
	closeOnce sync.Once
	// waits counts the times a Receive went to sleep (for tests).
	waits atomic.Int64
	// polls counts the due-time reads of sleeping receives (for tests).
	polls atomic.Int64
}

var (
	_ backend.Driver          = (*Driver)(nil)
	_ backend.Prioritizer     = (*Driver)(nil)
	_ backend.Deduper         = (*Driver)(nil)
	_ backend.DeadLetterer    = (*Driver)(nil)
	_ backend.StatsReader     = (*Driver)(nil)
	_ backend.TxEnqueuer      = (*Driver)(nil)
	_ backend.Pinger          = (*Driver)(nil)
	_ backend.Namer           = (*Driver)(nil)
	_ backend.DelayedReceiver = (*Driver)(nil)
	_ backend.AckReceiver     = (*Driver)(nil)
	_ backend.DeadImporter    = (*Driver)(nil)
	_ backend.QueueLister     = (*Driver)(nil)
	_ backend.QueueDeleter    = (*Driver)(nil)
	_ backend.Marker          = (*Driver)(nil)
	_ backend.MarkLister      = (*Driver)(nil)
	_ backend.MultiEnqueuer   = (*Driver)(nil)
	_ backend.TxMultiEnqueuer = (*Driver)(nil)
)

// New returns a driver over a database handle the caller owns (Close does
// not close it). With o.Migrate it creates or upgrades Fila's tables
// first; otherwise it checks their version. Wrap the driver with fila.New
// to get a Client.
//
// Give db's DSN maxAllowedPacket=0 (the client then uses the server's
// limit, so a 15 MiB message travels as long data rather than failing) and
// parseTime left at its default; Fila reads no DATETIME columns.
func New(ctx context.Context, db *sql.DB, o Options) (*Driver, error) {
	if db == nil {
		return nil, backend.Invalidf("mysql.New: db is nil")
	}
	return newDriver(ctx, db, false, o)
}

func newDriver(ctx context.Context, db *sql.DB, own bool, o Options) (*Driver, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := validatePrefix(o.Prefix); err != nil {
		return nil, err
	}
	if o.PollInterval < 0 {
		return nil, backend.Invalidf("mysql: poll interval %v is negative", o.PollInterval)
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PollInterval < MinPollInterval {
		o.PollInterval = MinPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, mapErr(ctx, "connect", err)
	}
	if o.Migrate {
		if err := Migrate(ctx, db, o.Prefix); err != nil {
			return nil, err
		}
	} else if err := checkSchema(ctx, db, o.Prefix); err != nil {
		return nil, err
	}
	d := &Driver{
		db:      db,
		ownDB:   own,
		prefix:  o.Prefix,
		poll:    o.PollInterval,
		log:     o.Logger.With(slog.String("driver", "mysql"), slog.String("prefix", o.Prefix)),
		q:       newStatements(o.Prefix),
		mariadb: strings.Contains(strings.ToLower(version), "mariadb"),
		version: version,
		done:    make(chan struct{}),
	}
	if !o.sessionReadCommitted {
		d.txOpts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return d, nil
}

// DB returns the driver's database handle, for the caller's own queries
// (for example to begin a transaction for Client.EnqueueTx).
func (d *Driver) DB() *sql.DB { return d.db }

// Prefix returns the prefix of the driver's table names.
func (d *Driver) Prefix() string { return d.prefix }

// ServerVersion returns what the server's VERSION() said at open, such as
// "10.11.6-MariaDB" or "8.4.3".
func (d *Driver) ServerVersion() string { return d.version }

// DriverName returns "mysql".
func (d *Driver) DriverName() string { return "mysql" }

// DedupKeys reports true: dedup keys are enforced by a unique index.
func (d *Driver) DedupKeys() bool { return true }

// Priorities reports true: a message's level is a column of the claim
// index.
func (d *Driver) Priorities() bool { return true }

// Ping checks the server is reachable.
func (d *Driver) Ping(ctx context.Context) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	return mapErr(ctx, "ping", d.db.PingContext(ctx))
}

func (d *Driver) isClosed() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Close ends blocked receives with ErrClosed and, when the driver opened
// the database handle itself, closes it. It never acks: messages leased
// through this driver come back when their leases expire. Closing twice is
// harmless.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		close(d.done)
		d.wake.WakeAll()
		if d.ownDB {
			d.db.Close()
		}
	})
	return nil
}
