package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/postgres"
)

// TestURLParamsPassThrough: the parameters Fila does not own reach the
// server byte for byte (app.note: a custom setting, which takes any text). They were re-encoded with url.Values.Encode, which
// turns a space into '+', and pgx (like libpq) reads '+' literally:
// default_transaction_isolation=repeatable%20read was refused as
// "repeatable+read" (issue 38, item 7a).
func TestURLParamsPassThrough(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	for _, tc := range []struct{ raw, want string }{
		{"a%20b", "a b"},
		{"a+b", "a+b"},
		{"100%25", "100%"},
		{"x%3Dy", "x=y"},
		{"%C3%A9t%C3%A9", "été"},
		{"plain", "plain"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			base, err := url.Parse(testenv.PostgresURL(t))
			if err != nil {
				t.Fatal(err)
			}
			q := base.RawQuery
			if q != "" {
				q += "&"
			}
			// Fila's own parameters before and after the server's.
			base.RawQuery = q + "fila_schema=" + schema + "&app.note=" + tc.raw + "&fila_listen=false"
			drv, err := postgres.Open(ctx, base, backend.OpenOptions{Logger: quietLogger})
			if err != nil {
				t.Fatalf("Open with app.note=%s: %v", tc.raw, err)
			}
			defer drv.Close()
			var got string
			if err := drv.(*postgres.Driver).Pool().QueryRow(ctx, `SELECT current_setting('app.note')`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("app.note=%s reached the server as %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

// TestURLUnknownParamIsInvalid: a parameter that is neither pgx's, Fila's
// nor a server setting is ErrInvalid, not the server's unclassified error
// (issue 38, item 7c); a bad value of a real setting is ErrInvalid too.
func TestURLUnknownParamIsInvalid(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	for _, extra := range []string{"tokne=abc", "statement_timeout=soon"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		u, err := url.Parse(driverURL(t, map[string]string{"fila_schema": schema}))
		if err != nil {
			t.Fatal(err)
		}
		u.RawQuery += "&" + extra
		_, err = postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger})
		cancel()
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open with %s: %v, want ErrInvalid", extra, err)
		}
	}
}
