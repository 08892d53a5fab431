package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order (files
// named NNNN_description.sql); {{schema}} stands for the quoted schema name.
func migrations() []migration.Migration { return migration.Load(migrationFS, "migrations") }

// SchemaVersion is the schema version this package needs: the version of its
// newest embedded migration.
func SchemaVersion() int {
	m := migrations()
	return m[len(m)-1].Version
}

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// validateSchema checks a schema name: lower-case letters, digits and '_',
// starting with a letter or '_', at most 48 bytes (so it can be inlined as a
// quoted identifier and the notification channel name stays short).
func validateSchema(s string) error {
	if !schemaRE.MatchString(s) {
		return backend.Invalidf("postgres schema name %q must match %s", s, schemaRE)
	}
	return nil
}

// migrationLockKey is the advisory lock key that serializes migrators of one
// schema (in any database of the server; collisions only serialize).
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("fila.migrate:" + schema))
	return int64(h.Sum64())
}

// Migrate creates or upgrades Fila's tables in schema (created if missing) to
// SchemaVersion. It is safe to run concurrently from several processes: the
// migrators serialize on an advisory lock and every migration runs, with its
// version row, in one transaction, so each applies exactly once. Running it on
// an up-to-date schema changes nothing. The empty schema means "fila".
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return migrateTo(ctx, pool, schema, SchemaVersion())
}

// migrateTo applies the migrations up to version upTo (tests build older
// schemas with it).
func migrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, upTo int) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validateSchema(schema); err != nil {
		return err
	}
	q := quoteIdent(schema)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return mapErr(ctx, "migrate", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey(schema)); err != nil {
		return mapErr(ctx, "migrate: lock", err)
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+q); err != nil {
		return mapErr(ctx, "migrate: create schema", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return mapErr(ctx, "migrate: create migrations table", err)
	}
	var current int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM "+q+".schema_migrations").Scan(&current); err != nil {
		return mapErr(ctx, "migrate: read version", err)
	}
	for _, m := range migrations() {
		if m.Version <= current || m.Version > upTo {
			continue
		}
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.SQL, "{{schema}}", q)); err != nil {
			return fmt.Errorf("fila/postgres: migration %s: %w", m.Name, mapErr(ctx, "migrate", err))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+q+".schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return mapErr(ctx, "migrate: record version", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return mapErr(ctx, "migrate: commit", err)
	}
	return nil
}

// ErrNotMigrated reports that the schema is missing or older than
// SchemaVersion; the error also matches fila.ErrInvalid. Run Migrate (the
// CLI's "fila schema up"), or open with fila_migrate=true.
var ErrNotMigrated = errors.New("fila/postgres: schema not migrated")

// errNotMigrated explains how to create the schema.
func errNotMigrated(schema string, have int) error {
	return fmt.Errorf("%w: %w: PostgreSQL schema %q is at version %d, this Fila needs version %d: run 'fila schema up' or postgres.Migrate, or add fila_migrate=true to the URL (Options.Migrate) to migrate at open",
		backend.ErrInvalid, ErrNotMigrated, schema, have, SchemaVersion())
}

// checkSchema verifies the schema has been migrated far enough.
func checkSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var v int
	err := pool.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM "+quoteIdent(schema)+".schema_migrations").Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined table / schema
		return errNotMigrated(schema, 0)
	}
	if err != nil {
		return mapErr(ctx, "check schema", err)
	}
	if v < SchemaVersion() {
		return errNotMigrated(schema, v)
	}
	return nil
}

// quoteIdent quotes a validated identifier.
func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// MigrateURL runs Migrate on the server and schema a postgres:// URL names
// (fila_schema, default "fila"), for tools such as a CLI's migrate command.
// Other fila_ parameters are accepted and ignored; pgx's own parameters
// configure the connection.
func MigrateURL(ctx context.Context, rawURL string) (err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return backend.Invalidf("postgres URL does not parse; check its host, port and the percent-encoding of special characters")
	}
	defer func() { err = backend.RedactError(err, u) }()
	o, connString, err := parseURL(u)
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return backend.Invalidf("postgres URL: %v", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return mapErr(ctx, "migrate", err)
	}
	defer pool.Close()
	return Migrate(ctx, pool, o.Schema)
}
