package rabbitmq_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
)

// TestRefusedConnectionIsUnavailable: opening a broker nobody listens for
// fails with fila.ErrUnavailable, the sentinel every driver uses for a
// failure a retry may cure.
func TestRefusedConnectionIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := fila.Open(ctx, "amqp://guest:guest@127.0.0.1:1/")
	if !errors.Is(err, fila.ErrUnavailable) {
		t.Errorf("fila.Open of a closed port: %v; want fila.ErrUnavailable", err)
	}
	u, _ := url.Parse("amqp://guest:guest@127.0.0.1:1/")
	if _, err := rabbitmq.Open(ctx, u, backend.OpenOptions{}); !errors.Is(err, fila.ErrUnavailable) {
		t.Errorf("rabbitmq.Open of a closed port: %v; want fila.ErrUnavailable", err)
	}
}

// TestBrokenConnectionIsUnavailable: calls made after the connection broke
// (through a proxy the test closes; the shared broker is untouched) fail
// with fila.ErrUnavailable, and work again once the broker is reachable.
func TestBrokenConnectionIsUnavailable(t *testing.T) {
	raw := testenv.RabbitMQURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("fila_reconnect_wait", "200ms")
	q.Set("fila_reconnect_max", "100ms")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := uniqueQueue(t)
	testenv.CleanupQueue(t, c, queue)
	if _, err := c.Enqueue(ctx, queue, fila.Message{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	proxy.Break()
	_, err = c.Enqueue(ctx, queue, fila.Message{Kind: "k"})
	if !errors.Is(err, fila.ErrUnavailable) {
		t.Fatalf("Enqueue over a broken connection: %v; want fila.ErrUnavailable", err)
	}
	if err := c.Ping(ctx); !errors.Is(err, fila.ErrUnavailable) {
		t.Errorf("Ping over a broken connection: %v; want fila.ErrUnavailable", err)
	}
	proxy.Restore(t)
	for {
		_, err := c.Enqueue(ctx, queue, fila.Message{Kind: "k"})
		if err == nil {
			break
		}
		if !errors.Is(err, fila.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("Enqueue after the proxy came back: %v", err)
		}
	}
}

// TestDriverLogsThroughWithLogger: a client opened with fila.WithLogger has
// its driver log there (here, the connection lost when the test's proxy
// breaks) rather than to slog.Default().
func TestDriverLogsThroughWithLogger(t *testing.T) {
	u, err := url.Parse(testenv.RabbitMQURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	u.Host = proxy.Addr()
	rec := testenv.NewLogRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u.String(), fila.WithLogger(rec.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	proxy.Break()
	for !rec.Has("connection lost") {
		if ctx.Err() != nil {
			t.Fatalf("the driver did not log the lost connection through the client's logger; it logged:\n%s", rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
