package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/postgres"
)

// TestOpenUnreachable: fila.Open connects and checks at Open, so an
// unreachable server fails there with fila.ErrUnavailable, within ctx.
func TestOpenUnreachable(t *testing.T) {
	testenv.CheckOpenUnreachable(t, func(hostport string) string {
		return "postgres://postgres@" + hostport + "/test?sslmode=disable"
	})
}

// TestOpenRedactsCredentials: postgres.Open itself (not only fila.Open)
// keeps the URL's credentials out of its errors, including the re-encoded
// spellings pgx puts into its parse errors.
func TestOpenRedactsCredentials(t *testing.T) {
	for _, raw := range []string{
		"postgres://u:S3cretUser@127.0.0.1:1/db?sslkey=/keys/S3cretKey.pem&sslpassword=S3cretPW&sslmode=bogus",
		"postgres://u@127.0.0.1:1/db?password=S3cretPW&sslmode=disable",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = postgres.Open(ctx, u, backend.OpenOptions{})
		cancel()
		if err == nil || strings.Contains(err.Error(), "S3cret") {
			t.Errorf("postgres.Open: %v; want an error without credentials", err)
		}
	}
}

// TestOpenRejectsBadModeParams: a bad fila_mode or fila_rotate_interval
// fails Open with ErrInvalid before anything connects.
func TestOpenRejectsBadModeParams(t *testing.T) {
	for _, q := range []string{"fila_mode=append", "fila_mode=log&fila_rotate_interval=0s",
		"fila_mode=log&fila_rotate_interval=-1s", "fila_rotate_interval=1m"} {
		u, err := url.Parse("postgres://postgres@127.0.0.1:1/test?sslmode=disable&" + q)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = postgres.Open(ctx, u, backend.OpenOptions{})
		cancel()
		if !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("Open with %s: %v; want ErrInvalid", q, err)
		}
	}
}
