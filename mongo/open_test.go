package mongo

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// TestOpenRejectsBadURLs needs no server: bad URLs fail before connecting.
func TestOpenRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"mongodb://127.0.0.1:1/?fila_bogus=1",
		"mongodb://127.0.0.1:1/?fila_poll_interval=soon",
		"mongodb://127.0.0.1:1/?fila_change_streams=maybe",
		"mongodb://127.0.0.1:1/?fila_database=a/b",
		"mongodb://127.0.0.1:1/?fila_prefix=a$b",
		"mongodb://127.0.0.1:1/?maxPoolSize=many",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		drv, err := Open(ctx, u, backend.OpenOptions{})
		cancel()
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open(%s): want ErrInvalid, got %v", raw, err)
		}
		if drv != nil {
			_ = drv.Close()
		}
	}
}

// TestOpenThroughFila opens by URL with fila.Open and round-trips a
// message; the database comes from the URL's path.
func TestOpenThroughFila(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	db := testDatabase(t, s)
	u := driverURL(t, s, nil)
	u.Path = "/" + db
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("fila.Open: %v", err)
	}
	defer c.Close()
	if got := c.Driver().(*Driver).opts.Database; got != db {
		t.Errorf("database %q, want %q from the URL path", got, db)
	}
	q := uniqueQueue("open")
	id, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Body: []byte("hi"), Headers: map[string]string{"a.b": "$c"}})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
	if err != nil || len(ds) != 1 || ds[0].ID != id || string(ds[0].Body) != "hi" || ds[0].Headers["a.b"] != "$c" {
		t.Fatalf("Receive = %+v, %v", ds, err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// TestOpenUnreachable: fila.Open checks the server at Open, so an
// unreachable one fails there with fila.ErrUnavailable, within ctx (server
// selection is shortened so the closed-port case ends on the mongo driver's
// own timeout rather than the test's).
func TestOpenUnreachable(t *testing.T) {
	testenv.CheckOpenUnreachable(t, func(hostport string) string {
		return "mongodb://" + hostport + "/?serverSelectionTimeoutMS=2000"
	})
}
