package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/fila-go/fila/backend"
)

// Defaults of Options.
const (
	// DefaultDatabase holds Fila's collections when neither Options.Database
	// nor the URL's path names one.
	DefaultDatabase = "fila"
	// DefaultPrefix starts the names of Fila's collections:
	// "fila_messages", "fila_dead" and "fila_marks".
	DefaultPrefix = "fila_"
	// DefaultPollInterval is the longest a blocked Receive waits between
	// checks of its queue when no change stream is available. The wait
	// starts at MinPollInterval and doubles while the queue stays empty.
	DefaultPollInterval = 500 * time.Millisecond
	// MinPollInterval is the first wait of a blocked Receive that polls.
	MinPollInterval = 20 * time.Millisecond
	// SafetyPollInterval is how often a blocked Receive re-checks its queue
	// while a change stream is watching (it also wakes at the next known
	// run-at or lease deadline, and on every change-stream event).
	SafetyPollInterval = 5 * time.Second
)

// Options configure a Driver. The zero value is usable.
type Options struct {
	// Database holds Fila's collections; empty means DefaultDatabase.
	Database string
	// Prefix starts the collection names (Prefix+"messages",
	// Prefix+"dead", Prefix+"marks"); empty means DefaultPrefix. Letters,
	// digits, '_', '-' and '.'.
	Prefix string
	// PollInterval is the longest wait between checks of a blocked Receive
	// when the server has no change streams or they are disabled; zero means
	// DefaultPollInterval. It bounds the wake-up latency of a receiver for
	// messages enqueued by other processes.
	PollInterval time.Duration
	// DisableChangeStreams makes blocked receivers poll even on a replica
	// set.
	DisableChangeStreams bool
	// WriteConcern of every write Fila makes. Nil means majority (with the
	// server's journaling default): an enqueue that returned nil survives a
	// primary failover. A weaker concern such as w:1 is faster but a
	// failover can roll back acknowledged enqueues (messages lost) and acks
	// (messages delivered again).
	WriteConcern *writeconcern.WriteConcern
	// ReadConcern of the reporting reads (stats, dead-letter listing). Nil
	// means majority on a replica set (counts never include writes that
	// could roll back) and local otherwise. Claims and settlements are
	// writes and always act on the primary's current data.
	ReadConcern *readconcern.ReadConcern
	// DisableAtomicBatches stops Enqueue of more than one message from
	// running in a transaction. By default, where the server has
	// transactions, a batch is stored whole or not at all; without
	// transactions (or with this set) a batch that fails half way keeps the
	// messages stored before the failure.
	DisableAtomicBatches bool
	// Logger receives the driver's background events (change-stream
	// failures). Nil means slog.Default().
	Logger *slog.Logger
}

// Capabilities are what the driver detected about the server when it was
// created. The driver picks its mechanisms from them.
type Capabilities struct {
	// ReplicaSet reports a replica set member or a mongos (sharded cluster).
	ReplicaSet bool
	// Transactions reports multi-document transactions: Dead moves a
	// message in one transaction and EnqueueTx works.
	Transactions bool
	// ChangeStreams reports that blocked receivers are woken by a change
	// stream (false when disabled by Options.DisableChangeStreams).
	ChangeStreams bool
	// FerretDB reports that the server is FerretDB rather than MongoDB. The
	// driver does not change its behaviour for it; tests use it to declare
	// what FerretDB v1 lacks (atomic findOneAndUpdate under concurrency).
	FerretDB bool
	// Version is the MongoDB version the server reports.
	Version string
}

// Driver is Fila's MongoDB driver. It implements backend.Driver and the
// optional Deduper, DeadLetterer, StatsReader, TxEnqueuer, DelayedReceiver,
// DeadImporter, QueueLister, QueueDeleter, Marker, MarkLister,
// MessageLister, Pinger and Namer interfaces.
// Create it with New or open it with fila.Open and a mongodb:// or
// mongodb+srv:// URL.
type Driver struct {
	client *gomongo.Client
	owns   bool
	opts   Options
	caps   Capabilities
	log    *slog.Logger
	wc     *writeconcern.WriteConcern

	// msgs and dead serve the hot path: primary, local reads.
	msgs, dead *gomongo.Collection
	// marks holds the queues' marks, with the hot path's options.
	marks *gomongo.Collection
	// watched is the messages collection for the change stream, which
	// only runs with read concern majority.
	watched *gomongo.Collection
	// msgsReport and deadReport serve stats and listings with the
	// configured read concern.
	msgsReport, deadReport *gomongo.Collection

	notify *notifier
	// waits counts the times a Receive went to sleep (tests wait on it).
	waits atomic.Int64

	mu          sync.Mutex
	closed      chan struct{}
	isClosed    bool
	watching    bool
	stopWatch   context.CancelFunc
	background  sync.WaitGroup
	atomicBatch bool
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.Deduper      = (*Driver)(nil)
	_ backend.DeadLetterer = (*Driver)(nil)
	_ backend.StatsReader  = (*Driver)(nil)
	_ backend.TxEnqueuer   = (*Driver)(nil)
	_ backend.Pinger       = (*Driver)(nil)
	_ backend.Namer        = (*Driver)(nil)

	_ backend.DelayedReceiver = (*Driver)(nil)
	_ backend.DeadImporter    = (*Driver)(nil)
	_ backend.QueueLister     = (*Driver)(nil)
	_ backend.QueueDeleter    = (*Driver)(nil)
	_ backend.Marker          = (*Driver)(nil)
	_ backend.MarkLister      = (*Driver)(nil)
)

// New returns a driver over a connected client that the caller owns: Close
// does not disconnect it. New talks to the server (hence ctx): it detects
// what the server supports (hello, buildInfo) and creates Fila's indexes if
// they are missing.
func New(ctx context.Context, client *gomongo.Client, opts Options) (*Driver, error) {
	if client == nil {
		return nil, backend.Invalidf("mongo.New: client is nil")
	}
	return newDriver(ctx, client, false, opts)
}

func newDriver(ctx context.Context, client *gomongo.Client, owns bool, opts Options) (*Driver, error) {
	if opts.Database == "" {
		opts.Database = DefaultDatabase
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.PollInterval < MinPollInterval {
		opts.PollInterval = MinPollInterval
	}
	if err := validateName("database", opts.Database, "/\\. \"$*<>:|?"); err != nil {
		return nil, err
	}
	if err := validateName("collection prefix", opts.Prefix, "$ "); err != nil {
		return nil, err
	}
	d := &Driver{
		client: client,
		owns:   owns,
		opts:   opts,
		log:    opts.Logger,
		notify: newNotifier(),
		closed: make(chan struct{}),
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.log = d.log.With(slog.String("fila_driver", "mongo"))
	caps, err := detect(ctx, client)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			// The server did not answer before ctx ended: keep what the
			// mongo driver last saw of it (a refused connection, no
			// primary) next to the context's error.
			return nil, fmt.Errorf("fila/mongo: connect: %w: %w (%v)", backend.ErrUnavailable, cerr, err)
		}
		return nil, d.mapErr(ctx, err, "detect server features")
	}
	caps.ChangeStreams = caps.ChangeStreams && !opts.DisableChangeStreams
	d.caps = caps
	d.atomicBatch = !opts.DisableAtomicBatches && caps.Transactions

	d.wc = opts.WriteConcern
	if d.wc == nil {
		d.wc = writeconcern.Majority()
	}
	rc := opts.ReadConcern
	if rc == nil {
		rc = readconcern.Local()
		if caps.ReplicaSet {
			rc = readconcern.Majority()
		}
	}
	db := client.Database(opts.Database)
	hot := hotCollection(d.wc)
	report := options.Collection().SetWriteConcern(d.wc).SetReadConcern(rc).SetReadPreference(readpref.Primary())
	d.msgs = db.Collection(opts.Prefix+"messages", hot)
	d.dead = db.Collection(opts.Prefix+"dead", hot)
	d.marks = db.Collection(opts.Prefix+"marks", hot)
	d.watched = db.Collection(opts.Prefix+"messages", options.Collection().SetReadConcern(readconcern.Majority()).SetReadPreference(readpref.Primary()))
	d.msgsReport = db.Collection(opts.Prefix+"messages", report)
	d.deadReport = db.Collection(opts.Prefix+"dead", report)
	if err := d.ensureIndexes(ctx); err != nil {
		return nil, d.mapErr(ctx, err, "create indexes")
	}
	return d, nil
}

// hotCollection are the options of the collections the hot path uses:
// the write concern, local reads of the primary's current data.
func hotCollection(wc *writeconcern.WriteConcern) *options.CollectionOptionsBuilder {
	return options.Collection().SetWriteConcern(wc).SetReadConcern(readconcern.Local()).SetReadPreference(readpref.Primary())
}

func validateName(what, s, bad string) error {
	if strings.ContainsAny(s, bad) || strings.ContainsRune(s, 0) || len(s) > 60 {
		return backend.Invalidf("mongo %s %q: at most 60 characters, none of %q", what, s, bad)
	}
	return nil
}

// detect asks the server what it is.
func detect(ctx context.Context, client *gomongo.Client) (Capabilities, error) {
	var hello struct {
		SetName                      string `bson:"setName"`
		Msg                          string `bson:"msg"`
		LogicalSessionTimeoutMinutes *int64 `bson:"logicalSessionTimeoutMinutes"`
	}
	admin := client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		var se gomongo.ServerError
		if !errors.As(err, &se) {
			return Capabilities{}, err // no answer at all: asking again would wait as long
		}
		// Servers older than 4.4.2 only know isMaster.
		if err2 := admin.RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Decode(&hello); err2 != nil {
			return Capabilities{}, err
		}
	}
	var build bson.M
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build); err != nil {
		return Capabilities{}, err
	}
	var c Capabilities
	c.ReplicaSet = hello.SetName != "" || hello.Msg == "isdbgrid"
	c.Transactions = c.ReplicaSet && hello.LogicalSessionTimeoutMinutes != nil
	c.ChangeStreams = c.ReplicaSet
	c.Version, _ = build["version"].(string)
	for k := range build {
		if strings.HasPrefix(strings.ToLower(k), "ferretdb") {
			c.FerretDB = true
		}
	}
	return c, nil
}

// Capabilities returns what the driver detected about the server.
func (d *Driver) Capabilities() Capabilities { return d.caps }

// Client returns the underlying mongo client.
func (d *Driver) Client() *gomongo.Client { return d.client }

// DriverName returns "mongo".
func (d *Driver) DriverName() string { return "mongo" }

// DedupKeys reports true: dedup keys are enforced by a unique sparse index.
func (d *Driver) DedupKeys() bool { return true }

// Priorities reports true: claims take the higher levels first
// (backend.Prioritizer), by claimIndex.
func (d *Driver) Priorities() bool { return true }

// Ping checks that the primary answers.
func (d *Driver) Ping(ctx context.Context) error {
	return d.mapErr(ctx, d.client.Ping(ctx, readpref.Primary()), "ping")
}

// Close stops the change stream and, when the driver was opened from a URL,
// disconnects the client. It never acks: leased messages come back when
// their leases expire. Blocked Receive calls return backend.ErrClosed.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.isClosed {
		d.mu.Unlock()
		return nil
	}
	d.isClosed = true
	close(d.closed)
	if d.stopWatch != nil {
		d.stopWatch()
	}
	d.mu.Unlock()
	d.background.Wait()
	if !d.owns {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.client.Disconnect(ctx); err != nil {
		return fmt.Errorf("fila/mongo: disconnect: %w", err)
	}
	return nil
}
