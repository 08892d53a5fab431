package mongo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

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
// work as documented for MongoDB connection strings. A parameter the
// MongoDB driver does not know either (which it would ignore) is refused
// with an ErrInvalid error naming it. A mongodb+srv host whose SRV record
// cannot be looked up fails with ErrUnavailable, like an unreachable
// server. The driver owns the client it connects and disconnects it on
// Close.
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
	if unknown := unknownParams(theirs); len(unknown) > 0 {
		return nil, backend.Invalidf("unknown MongoDB URL parameter %s (Fila's start with fila_; the MongoDB driver knows the connection string options of its documentation)",
			strings.Join(unknown, ", "))
	}
	mu := *u
	mu.RawQuery = theirs.Encode()
	co := options.Client().ApplyURI(mu.String())
	if err := co.Validate(); err != nil {
		return nil, uriError(err)
	}
	opts.WriteConcern = co.WriteConcern
	opts.ReadConcern = co.ReadConcern
	client, err := gomongo.Connect(co)
	if err != nil {
		return nil, uriError(err)
	}
	d, err := newDriver(ctx, client, true, opts)
	if err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return d, nil
}

// srvOnly are the connection string options that only a mongodb+srv URL
// may carry.
var srvOnly = []string{"srvmaxhosts", "srvservicename"}

// unknownParams returns the names (as written, sorted) of the parameters
// of q that the MongoDB driver does not know: its connection string parser
// keeps them in ConnString.UnknownOptions and otherwise ignores them, so a
// misspelt option would silently not apply. The parse runs on a
// mongodb:// URL of q alone (without the SRV-only options, which such a
// URL may not carry), so that it looks nothing up in DNS. A parse error
// returns nil: the real parse reports it.
func unknownParams(q url.Values) []string {
	probe := url.Values{}
	for k, v := range q {
		if !slices.Contains(srvOnly, strings.ToLower(k)) {
			probe[k] = v
		}
	}
	if len(probe) == 0 {
		return nil
	}
	cs, err := connstring.Parse("mongodb://localhost/?" + probe.Encode())
	if err != nil {
		return nil
	}
	var out []string
	for k := range probe {
		if _, ok := cs.UnknownOptions[strings.ToLower(k)]; ok {
			out = append(out, fmt.Sprintf("%q", k))
		}
	}
	slices.Sort(out)
	return out
}

// uriError classifies an error of the MongoDB driver's parse of the
// connection string: ErrUnavailable when looking up a mongodb+srv host's
// SRV record failed (DNS not answering, or no such host: the broker cannot
// be reached, as a closed port cannot), ErrInvalid otherwise.
func uriError(err error) error {
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return fmt.Errorf("fila/mongo: looking up the mongodb+srv host: %w: %w", backend.ErrUnavailable, err)
	}
	return backend.Invalidf("MongoDB connection string: %v", err)
}
