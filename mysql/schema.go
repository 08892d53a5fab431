package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order (files
// named NNNN_description.sql); {{p}} stands for the table-name prefix.
func migrations() []migration.Migration { return migration.Load(migrationFS, "migrations") }

// SchemaVersion is the schema version this package needs: the version of
// its newest embedded migration.
func SchemaVersion() int {
	m := migrations()
	return m[len(m)-1].Version
}

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,31}$`)

// validatePrefix checks a table-name prefix: lower-case letters, digits and
// '_', starting with a letter or '_', at most 32 bytes (MySQL table names
// end at 64).
func validatePrefix(p string) error {
	if !prefixRE.MatchString(p) {
		return backend.Invalidf("mysql table prefix %q must match %s", p, prefixRE)
	}
	return nil
}

// statementsOf splits a migration into its statements: they end with ';'
// at the end of a line. Comment lines are dropped.
func statementsOf(text string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "--") || (t == "" && cur.Len() == 0) {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// lockName is the name of the user-level lock (GET_LOCK) that serializes
// migrators of one prefix in one database.
func lockName(prefix string) string { return "fila_migrate_" + prefix }

// Migrate creates Fila's tables, prefixed with prefix ("" means
// DefaultPrefix), in db's database, or upgrades them to SchemaVersion. Any
// number of processes may run it at once: a user-level lock (GET_LOCK)
// serializes them, and each step runs once. MySQL commits DDL as it runs, so
// a migration interrupted half way is finished by the next run (every step
// is written to be run again).
func Migrate(ctx context.Context, db *sql.DB, prefix string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return mapErr(ctx, "migrate", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", lockName(prefix)).Scan(&got); err != nil {
		return mapErr(ctx, "migrate", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("fila/mysql: migrate: %w: another process held the migration lock %q for 60s; is a migration stuck?", backend.ErrUnavailable, lockName(prefix))
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lockName(prefix)) //nolint:errcheck // the lock also ends with the session
	vt := quoteTable(prefix, "schema")
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+vt+
		" (version INT NOT NULL, name VARCHAR(200) NOT NULL, PRIMARY KEY (version)) ENGINE=InnoDB"); err != nil {
		return mapErr(ctx, "migrate", err)
	}
	have, err := schemaVersion(ctx, conn, prefix)
	if err != nil {
		return err
	}
	for _, m := range migrations() {
		if m.Version <= have {
			continue
		}
		text := strings.ReplaceAll(m.SQL, "{{p}}", prefix)
		for _, stmt := range statementsOf(text) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("fila/mysql: migration %s: %w", m.Name, mapErr(ctx, "migrate", err))
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+vt+" (version, name) VALUES (?, ?)", m.Version, m.Name); err != nil {
			return mapErr(ctx, "migrate", err)
		}
	}
	return nil
}

// queryRower is what schemaVersion reads through: a *sql.DB or *sql.Conn.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion returns the newest migration applied under prefix, 0 when
// none is (or the version table does not exist).
func schemaVersion(ctx context.Context, q queryRower, prefix string) (int, error) {
	var v sql.NullInt64
	err := q.QueryRowContext(ctx, "SELECT MAX(version) FROM "+quoteTable(prefix, "schema")).Scan(&v)
	if err != nil {
		if isNoSuchTable(err) {
			return 0, nil
		}
		return 0, mapErr(ctx, "schema version", err)
	}
	return int(v.Int64), nil
}

// ErrNotMigrated reports that Fila's tables are missing or older than
// SchemaVersion; errors that wrap it also wrap fila.ErrInvalid. Run "fila
// schema up", open with fila_migrate=true, or call Migrate.
var ErrNotMigrated = errors.New("fila/mysql: tables not migrated")

// checkSchema fails, saying what to run, when the tables under prefix are
// not at SchemaVersion.
func checkSchema(ctx context.Context, db *sql.DB, prefix string) error {
	v, err := schemaVersion(ctx, db, prefix)
	if err != nil {
		return err
	}
	want := SchemaVersion()
	switch {
	case v == want:
		return nil
	case v > want:
		return backend.Invalidf("mysql: Fila's tables (prefix %q) are at schema version %d, newer than this build's %d: upgrade Fila", prefix, v, want)
	default:
		return fmt.Errorf("%w: %w: Fila's tables (prefix %q) are at schema version %d, need %d: run \"fila schema up\", add fila_migrate=true to the URL, or call mysql.Migrate",
			backend.ErrInvalid, ErrNotMigrated, prefix, v, want)
	}
}

// quoteTable returns the quoted name of one of Fila's tables.
func quoteTable(prefix, name string) string { return "`" + prefix + name + "`" }

// isNoSuchTable reports MySQL's error 1146, "Table doesn't exist".
func isNoSuchTable(err error) bool {
	var me *mysqlError
	return errors.As(err, &me) && me.Number == 1146
}
