package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

func init() {
	fila.Register("postgres", Open)
	fila.Register("postgresql", Open)
}

// URL parameters read by Fila itself. Every other query parameter is passed
// to pgx unchanged (sslmode, pool_max_conns, application_name,
// default_query_exec_mode, ...); an unknown fila_ parameter is an ErrInvalid
// error.
const (
	// ParamSchema sets Options.Schema ("fila").
	ParamSchema = "fila_schema"
	// ParamMigrate sets Options.Migrate (false).
	ParamMigrate = "fila_migrate"
	// ParamListen turns LISTEN/NOTIFY wake-up on or off (true); false sets
	// Options.DisableListen.
	ParamListen = "fila_listen"
	// ParamPollInterval sets Options.PollInterval (30s with LISTEN, 1s
	// without), as a Go duration.
	ParamPollInterval = "fila_poll_interval"
	// ParamMode sets Options.Mode: skiplocked (the default) or log.
	ParamMode = "fila_mode"
	// ParamRotateInterval sets Options.RotateInterval (1m), as a Go
	// duration; log mode only.
	ParamRotateInterval = "fila_rotate_interval"
	// ParamTopicRetention sets Options.TopicRetention (0: none), as a Go
	// duration; log mode only.
	ParamTopicRetention = "fila_topic_retention"
)

const paramPrefix = "fila_"

// Open opens a driver from a postgres:// or postgresql:// URL. It owns its
// pool: Close closes it. fila.Open calls it for those schemes. The driver
// logs to oo.Logger (nil: slog.Default()).
//
//	postgres://user:pass@host:5432/db?sslmode=disable&pool_max_conns=20&fila_schema=jobs&fila_migrate=true
func Open(ctx context.Context, u *url.URL, oo backend.OpenOptions) (_ backend.Driver, err error) {
	// Client libraries may put the URL, or parts of it, into their errors.
	defer func() { err = backend.RedactError(err, u) }()
	o, connString, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	o.Logger = oo.Logger
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, backend.Invalidf("postgres URL: %v", err)
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d, err := newDriver(ctx, pool, true, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// parseURL splits u's query into Fila's options (the fila_ parameters) and
// the connection string handed to pgx (everything else, byte for byte:
// pgx decodes a query as libpq does, where '+' is a plus sign, not a space,
// so re-encoding the parameters would change their values).
func parseURL(u *url.URL) (Options, string, error) {
	own, restRaw, err := backend.SplitQuery(u.RawQuery, paramPrefix)
	if err != nil {
		return Options{}, "", fmt.Errorf("postgres URL: %w", err)
	}
	p := backend.NewURLParams(&url.URL{RawQuery: own.Encode()})
	var o Options
	o.Schema = p.String(ParamSchema, DefaultSchema)
	o.Migrate = p.Bool(ParamMigrate, false)
	o.DisableListen = !p.Bool(ParamListen, true)
	o.PollInterval = p.Duration(ParamPollInterval, 0)
	o.Mode = p.String(ParamMode, ModeSkipLocked)
	o.RotateInterval = p.Duration(ParamRotateInterval, 0)
	o.TopicRetention = p.Duration(ParamTopicRetention, 0)
	if err := p.Done(); err != nil {
		return Options{}, "", err
	}
	if p.Has(ParamPollInterval) && o.PollInterval == 0 {
		return Options{}, "", backend.Invalidf("URL parameter %s must be positive", ParamPollInterval)
	}
	if p.Has(ParamRotateInterval) && o.RotateInterval == 0 {
		return Options{}, "", backend.Invalidf("URL parameter %s must be positive", ParamRotateInterval)
	}
	if o.Mode != ModeSkipLocked && o.Mode != ModeLog {
		return Options{}, "", backend.Invalidf("URL parameter %s is %q; use %s (the default) or %s", ParamMode, o.Mode, ModeSkipLocked, ModeLog)
	}
	if o.RotateInterval != 0 && o.Mode != ModeLog {
		return Options{}, "", backend.Invalidf("URL parameter %s applies to %s=%s only", ParamRotateInterval, ParamMode, ModeLog)
	}
	if p.Has(ParamTopicRetention) && o.TopicRetention <= 0 {
		return Options{}, "", backend.Invalidf("URL parameter %s must be positive", ParamTopicRetention)
	}
	if o.TopicRetention != 0 && o.Mode != ModeLog {
		return Options{}, "", backend.Invalidf("URL parameter %s applies to %s=%s only", ParamTopicRetention, ParamMode, ModeLog)
	}
	if err := validateSchema(o.Schema); err != nil {
		return Options{}, "", err
	}
	cu := *u
	cu.RawQuery = strings.Join(restRaw, "&")
	cu.ForceQuery = false
	return o, cu.String(), nil
}
