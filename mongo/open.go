package mongo

import (
	"context"
	"net/url"
	"strings"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

func init() {
	fila.Register("mongodb", Open)
	fila.Register("mongodb+srv", Open)
}

// Open opens a driver from a mongodb:// or mongodb+srv:// URL; fila.Open
// calls it for those schemes. The driver logs to oo.Logger (nil:
// slog.Default()). Query parameters that start with "fila_" are
// Fila's and unknown ones are refused:
//
//   - fila_database: the database of Fila's collections (default: the URL's
//     path, else "fila")
//   - fila_prefix: the collection-name prefix (default "fila_")
//   - fila_poll_interval: the longest poll wait without change streams
//     (default 500ms)
//   - fila_change_streams: false makes receivers poll even on a replica set
//   - fila_atomic_batches: false stores batches without a transaction
//
// Every other parameter goes to the MongoDB driver unchanged (it validates
// them): w, journal, wtimeoutMS and readConcernLevel there replace Fila's
// majority defaults; replicaSet, tls, authSource, maxPoolSize and the rest
// work as documented for MongoDB connection strings. The driver owns the
// client it connects and disconnects it on Close.
func Open(ctx context.Context, u *url.URL, oo backend.OpenOptions) (_ backend.Driver, err error) {
	// Client libraries may put the URL, or parts of it, into their errors.
	defer func() { err = backend.RedactError(err, u) }()
	ours, theirs := url.Values{}, url.Values{}
	for k, v := range u.Query() {
		if strings.HasPrefix(strings.ToLower(k), "fila_") {
			ours[k] = v
		} else {
			theirs[k] = v
		}
	}
	fu := *u
	fu.RawQuery = ours.Encode()
	p := backend.NewURLParams(&fu)
	opts := Options{
		Database:             p.String("fila_database", strings.TrimPrefix(u.Path, "/")),
		Prefix:               p.String("fila_prefix", DefaultPrefix),
		PollInterval:         p.Duration("fila_poll_interval", DefaultPollInterval),
		DisableChangeStreams: !p.Bool("fila_change_streams", true),
		DisableAtomicBatches: !p.Bool("fila_atomic_batches", true),
		Logger:               oo.Logger,
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	mu := *u
	mu.RawQuery = theirs.Encode()
	co := options.Client().ApplyURI(mu.String())
	if err := co.Validate(); err != nil {
		return nil, backend.Invalidf("MongoDB connection string: %v", err)
	}
	opts.WriteConcern = co.WriteConcern
	opts.ReadConcern = co.ReadConcern
	client, err := gomongo.Connect(co)
	if err != nil {
		return nil, backend.Invalidf("MongoDB connection string: %v", err)
	}
	d, err := newDriver(ctx, client, true, opts)
	if err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return d, nil
}
