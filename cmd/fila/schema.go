package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/mysql"
	"github.com/fila-go/fila/postgres"
)

// schemaTimeout bounds a schema migration.
const schemaTimeout = 2 * time.Minute

func newSchemaCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Manage the broker-side schema of drivers that have one",
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Create or upgrade the schema (PostgreSQL and MySQL tables); a no-op for brokers without one",
		Long: `Create or upgrade Fila's schema on the broker. For PostgreSQL this runs the
embedded migrations in the schema named by the URL's fila_schema parameter
(default "fila"); for MySQL and MariaDB, in the URL's database, on the tables
whose names start with its fila_prefix parameter (default "fila_").
Concurrent runs are safe and an up-to-date schema is left unchanged. Redis,
RabbitMQ, MongoDB and the in-memory broker need no schema step: the command
says so and exits 0.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := a.brokerURL()
			if err != nil {
				return err
			}
			return a.schemaUp(cmd.Context(), raw)
		},
	}
	cmd.AddCommand(up)
	return cmd
}

func (a *app) schemaUp(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// Let fila.Open produce its usual explanation.
		_, err := a.openURL(ctx, raw)
		return err
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "postgres", "postgresql":
		schema := u.Query().Get(postgres.ParamSchema)
		if schema == "" {
			schema = postgres.DefaultSchema
		}
		return a.migrateAtOpen(ctx, raw, u, postgres.ParamMigrate,
			fmt.Sprintf("postgres: schema %q is at version %d", schema, postgres.SchemaVersion()))
	case "mysql":
		prefix := u.Query().Get(mysql.ParamPrefix)
		if prefix == "" {
			prefix = mysql.DefaultPrefix
		}
		return a.migrateAtOpen(ctx, raw, u, mysql.ParamMigrate,
			fmt.Sprintf("mysql: tables %q are at version %d", prefix+"*", mysql.SchemaVersion()))
	default:
		c, err := a.openURL(ctx, raw)
		if err != nil {
			return err
		}
		_ = c.Close()
		_, err = fmt.Fprintf(a.stdout, "%s: no schema to migrate (the driver creates what it needs when it connects)\n", scheme)
		return err
	}
}

// migrateAtOpen opens u with its driver's migrate parameter (param) set to
// true, which migrates the URL's schema or tables, closes the client and
// prints done.
func (a *app) migrateAtOpen(ctx context.Context, raw string, u *url.URL, param, done string) error {
	q := u.Query()
	q.Set(param, "true")
	u.RawQuery = q.Encode()
	sctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	c, err := fila.Open(sctx, u.String())
	if err != nil {
		return a.connectErr(ctx, sctx, raw, err)
	}
	_ = c.Close()
	_, err = fmt.Fprintln(a.stdout, done)
	return err
}
