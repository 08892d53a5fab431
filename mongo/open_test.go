package mongo

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
		"mongodb://127.0.0.1:1/?tokne=abc",
		"mongodb+srv://nosuchhost.invalid/?tokne=abc",
		"mongodb://127.0.0.1:1/?maxPoolSize=5&Tokne=abc",
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

// TestOpenNamesUnknownParameters: a parameter neither Fila nor the MongoDB
// driver knows is refused by name, without its value (a misspelt token
// parameter carries a secret) or the URL's password; known MongoDB options,
// whatever their case, and the SRV-only ones on a mongodb+srv URL pass the
// check.
func TestOpenNamesUnknownParameters(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("mongodb://fila:pw-s3cret@127.0.0.1:1/?maxpoolsize=5&tokne=val-s3cret&w=1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Open(ctx, u, backend.OpenOptions{})
	if !errors.Is(err, fila.ErrInvalid) || !strings.Contains(err.Error(), `"tokne"`) {
		t.Errorf("Open with ?tokne=: %v; want ErrInvalid naming \"tokne\"", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open's error shows a secret: %v", err)
	}
	for _, q := range []url.Values{
		{"maxPoolSize": {"5"}, "MAXPOOLSIZE": {"5"}, "retryWrites": {"false"}},
		{"srvMaxHosts": {"2"}, "srvServiceName": {"mongodb"}},
	} {
		if got := unknownParams(q); len(got) > 0 {
			t.Errorf("unknownParams(%v) = %v, want none", q, got)
		}
	}
}

// TestOpenUnresolvableSRV: a mongodb+srv host whose SRV record does not
// resolve is a broker that cannot be reached (ErrUnavailable), not a bad
// URL.
func TestOpenUnresolvableSRV(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, "mongodb+srv://fila:pw-s3cret@nosuchhost.invalid/?fila_database=x")
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of an unresolvable mongodb+srv host succeeded")
	}
	if !errors.Is(err, fila.ErrUnavailable) || errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Open of an unresolvable mongodb+srv host: %v; want ErrUnavailable (not ErrInvalid)", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open's error shows the password: %v", err)
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
