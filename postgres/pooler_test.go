package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/postgres"
)

// TestListenThroughPoolerRefused: with LISTEN on (the default), opening
// through PgBouncer in transaction mode fails with ErrInvalid naming the
// fix, instead of a driver whose receivers would never hear a notification;
// with fila_listen=false the same URL opens.
func TestListenThroughPoolerRefused(t *testing.T) {
	bouncer := testenv.PgBouncerURL(t)
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	u, err := url.Parse(withParams(t, bouncer, map[string]string{"fila_schema": schema}))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("fila_listen")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	d, err := postgres.Open(ctx, u, backend.OpenOptions{})
	if err == nil {
		_ = d.Close()
		t.Fatalf("Open through a transaction pooler with LISTEN on succeeded; want ErrInvalid")
	}
	if !errors.Is(err, fila.ErrInvalid) || !strings.Contains(err.Error(), "fila_listen=false") {
		t.Errorf("Open through a transaction pooler with LISTEN on: %v; want ErrInvalid naming fila_listen=false", err)
	}
	t.Logf("refused after %v: %v", time.Since(start), err)
	q.Set("fila_listen", "false")
	u.RawQuery = q.Encode()
	d, err = postgres.Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open through the pooler with fila_listen=false: %v", err)
	}
	_ = d.Close()
}
