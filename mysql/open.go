package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

func init() {
	fila.Register("mysql", Open)
}

// URL parameters read by Fila itself. Every other query parameter goes to
// go-sql-driver/mysql as a DSN parameter (tls, timeout, readTimeout,
// charset, …; a name it does not know is set as a server variable at
// connection start); an unknown fila_ parameter is an ErrInvalid error.
const (
	// ParamPrefix sets Options.Prefix ("fila_").
	ParamPrefix = "fila_prefix"
	// ParamMigrate sets Options.Migrate (false).
	ParamMigrate = "fila_migrate"
	// ParamPollInterval sets Options.PollInterval (250ms), as a Go
	// duration.
	ParamPollInterval = "fila_poll_interval"
	// ParamMaxConns bounds the connections of the driver's pool
	// (sql.DB.SetMaxOpenConns; default DefaultMaxConns).
	ParamMaxConns = "fila_max_conns"
)

// DefaultMaxConns is the default bound on the connections of a driver
// opened from a URL (fila_max_conns). A blocked Receive holds no
// connection while it waits.
const DefaultMaxConns = 20

const paramPrefix = "fila_"

// Open opens a driver from a mysql:// URL. It owns its database handle:
// Close closes it. fila.Open calls it for that scheme. The driver, and
// go-sql-driver's own log lines, log to oo.Logger (nil: slog.Default()).
//
//	mysql://user:pass@host:3306/db?tls=true&fila_migrate=true
func Open(ctx context.Context, u *url.URL, oo backend.OpenOptions) (_ backend.Driver, err error) {
	defer func() { err = backend.RedactError(err, u) }()
	o, maxConns, cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	o.Logger = oo.Logger
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg.Logger = libLogger{o.Logger.With(slog.String("driver", "mysql"))}
	// The driver's connections run at READ COMMITTED from the start, so
	// its transactions need no SET TRANSACTION first: MySQL names the
	// variable transaction_isolation, MariaDB before 11.1 tx_isolation,
	// and a server refuses the name it does not know at connection start.
	// A URL that sets either keeps its own level, and the driver then asks
	// for READ COMMITTED on each of its transactions.
	vars := []string{"transaction_isolation", "tx_isolation"}
	if _, rest, _ := backend.SplitQuery(u.RawQuery, paramPrefix); hasParam(rest, "transaction_isolation") || hasParam(rest, "tx_isolation") {
		vars = []string{""}
	}
	for i, v := range vars {
		c := cfg.Clone()
		if v != "" {
			if c.Params == nil {
				c.Params = map[string]string{}
			}
			c.Params[v] = "'READ-COMMITTED'"
		}
		conn, err := gomysql.NewConnector(c)
		if err != nil {
			return nil, backend.Invalidf("mysql URL: %v", err)
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		o.sessionReadCommitted = v != ""
		d, err := newDriver(ctx, db, true, o)
		if err == nil {
			return d, nil
		}
		db.Close()
		if i+1 == len(vars) || !isUnknownVariable(err, v) {
			return nil, err
		}
	}
	panic("unreachable")
}

// isUnknownVariable reports MySQL's error 1193 naming variable v.
func isUnknownVariable(err error, v string) bool {
	var me *mysqlError
	return errors.As(err, &me) && me.Number == erUnknownSysVar && strings.Contains(me.Message, v)
}

// parseURL splits u into Fila's options and go-sql-driver's configuration.
func parseURL(u *url.URL) (Options, int, *gomysql.Config, error) {
	own, restRaw, err := backend.SplitQuery(u.RawQuery, paramPrefix)
	if err != nil {
		return Options{}, 0, nil, fmt.Errorf("mysql URL: %w", err)
	}
	p := backend.NewURLParams(&url.URL{RawQuery: own.Encode()})
	var o Options
	o.Prefix = p.String(ParamPrefix, DefaultPrefix)
	o.Migrate = p.Bool(ParamMigrate, false)
	o.PollInterval = p.Duration(ParamPollInterval, 0)
	maxConns := p.Int(ParamMaxConns, DefaultMaxConns)
	if err := p.Done(); err != nil {
		return Options{}, 0, nil, err
	}
	if p.Has(ParamPollInterval) && o.PollInterval == 0 {
		return Options{}, 0, nil, backend.Invalidf("URL parameter %s must be positive", ParamPollInterval)
	}
	if maxConns < 1 {
		return Options{}, 0, nil, backend.Invalidf("URL parameter %s must be at least 1", ParamMaxConns)
	}
	if err := validatePrefix(o.Prefix); err != nil {
		return Options{}, 0, nil, err
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if dbName == "" || strings.Contains(dbName, "/") {
		return Options{}, 0, nil, backend.Invalidf("mysql URL: name one database in the path, as in mysql://user@host:3306/app")
	}
	// ParseDSN checks and applies go-sql-driver's parameters; the
	// credentials are set afterwards so they never pass through a string
	// an error could quote.
	rest := strings.Join(restRaw, "&")
	cfg, err := gomysql.ParseDSN("tcp(" + net.JoinHostPort(host, port) + ")/" + url.PathEscape(dbName) + "?" + rest)
	if err != nil {
		return Options{}, 0, nil, backend.Invalidf("mysql URL: %v", err)
	}
	cfg.DBName = dbName
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if !hasParam(restRaw, "interpolateParams") {
		// One round trip a statement instead of two (prepare, execute).
		// go-sql-driver falls back to a prepared statement by itself for
		// a statement that would not fit a packet (a large body), which
		// then travels as long data.
		cfg.InterpolateParams = true
	}
	if !hasParam(restRaw, "maxAllowedPacket") {
		// The server's limit: larger arguments travel as long data, so a
		// message up to fila.MaxBodyBytes fits under the server's default.
		cfg.MaxAllowedPacket = 0
	}
	return o, maxConns, cfg, nil
}

func hasParam(pairs []string, name string) bool {
	for _, pair := range pairs {
		k, _, _ := strings.Cut(pair, "=")
		if k == name {
			return true
		}
	}
	return false
}

// MigrateURL creates or upgrades Fila's tables in the database a mysql://
// URL names (the command "fila schema up" runs it).
func MigrateURL(ctx context.Context, rawURL string) (err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return backend.Invalidf("mysql URL: cannot parse it (%s)", fila.Redact(rawURL))
	}
	defer func() { err = backend.RedactError(err, u) }()
	o, _, cfg, err := parseURL(u)
	if err != nil {
		return err
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return backend.Invalidf("mysql URL: %v", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	return Migrate(ctx, db, o.Prefix)
}

// libLogger routes go-sql-driver's log lines to the driver's logger.
type libLogger struct{ l *slog.Logger }

func (l libLogger) Print(v ...any) {
	l.l.Warn("fila: go-sql-driver/mysql: " + strings.TrimSpace(fmt.Sprint(v...)))
}
