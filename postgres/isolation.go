package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/backend"
)

// isolationParam is the server setting every connection of the driver
// must have at readCommitted.
const (
	isolationParam = "default_transaction_isolation"
	readCommitted  = "read committed"
)

// Every statement and function of both modes is written for READ
// COMMITTED, where each statement sees what committed before it began: the
// log mode's rotation and claims read a fresh snapshot per statement, and
// the skip-locked claims re-check a row a concurrent settlement changed.
// Under a REPEATABLE READ or SERIALIZABLE default (set on a role or a
// database) the log mode lost messages and settled leases twice, so a
// driver never runs on such connections: Open sets the parameter per
// connection where the role's default differs, and New refuses a pool
// whose connections do not have it.

// poolIsolation returns the isolation level a statement of pool runs at;
// its error is pgx's, unmapped.
func poolIsolation(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var iso string
	err := pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation')`).Scan(&iso)
	return iso, err
}

// checkIsolation refuses a pool whose statements do not run at READ
// COMMITTED.
func checkIsolation(ctx context.Context, pool *pgxpool.Pool) error {
	iso, err := poolIsolation(ctx, pool)
	if err != nil {
		return mapErr(ctx, "read the isolation level", err)
	}
	if iso != readCommitted {
		return backend.Invalidf("postgres: the pool's connections run at isolation level %q, and Fila's statements are written for %q: set RuntimeParams[%q] = %q in the pool's connection config (or ALTER ROLE ... SET %s = %q)",
			iso, readCommitted, isolationParam, readCommitted, isolationParam, readCommitted)
	}
	return nil
}

// openPool opens the driver's own pool from cfg at READ COMMITTED. A URL
// that names another default_transaction_isolation is refused. When the
// server's default for the role is another level, the pool is opened again
// with the parameter set at connection start; a pooler that does not pass
// the parameter on (PgBouncer) is an error that says what to do instead.
func openPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	rp := cfg.ConnConfig.RuntimeParams
	if v, ok := rp[isolationParam]; ok && !strings.EqualFold(strings.TrimSpace(v), readCommitted) {
		return nil, backend.Invalidf("postgres URL: %s=%q: Fila's statements are written for %q; leave the parameter out",
			isolationParam, v, readCommitted)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(ctx, "open pool", err)
	}
	iso, err := poolIsolation(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, mapErr(ctx, "read the isolation level", err)
	}
	if iso == readCommitted {
		return pool, nil
	}
	pool.Close()
	if rp == nil {
		rp = map[string]string{}
		cfg.ConnConfig.RuntimeParams = rp
	}
	rp[isolationParam] = readCommitted
	pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(ctx, "open pool", err)
	}
	again, err := poolIsolation(ctx, pool)
	if err != nil {
		pool.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "08P01" {
			return nil, backend.Invalidf("postgres: the role's %s is %q, Fila's statements need %q, and the server (a pooler?) refused to set it per connection: ALTER ROLE ... SET %s = %q for the role the pooler connects as",
				isolationParam, iso, readCommitted, isolationParam, readCommitted)
		}
		return nil, mapErr(ctx, "read the isolation level", err)
	}
	if again != readCommitted { // a pooler that ignores the parameter
		pool.Close()
		return nil, backend.Invalidf("postgres: the connections run at isolation level %q although %s=%q was asked at connection start (a pooler that ignores it?); Fila's statements need %q: ALTER ROLE ... SET %s = %q",
			again, isolationParam, readCommitted, readCommitted, isolationParam, readCommitted)
	}
	return pool, nil
}
