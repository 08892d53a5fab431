package rabbitmq_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
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

// TestOutageLogLinesBounded: while the test's proxy to the broker is down,
// the driver retries its connection every 50ms and a Receive keeps waiting;
// all of it is logged through the client's logger, with one Warn when the
// connection is lost and one Info when it is back at Info and above (the
// dozens of failed attempts at Debug), and nothing reaches the standard log
// package or standard error.
func TestOutageLogLinesBounded(t *testing.T) {
	u, err := url.Parse(testenv.RabbitMQURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("fila_reconnect_max", "50ms")
	q.Set("fila_reconnect_wait", "100ms")
	u.RawQuery = q.Encode()
	rec := testenv.NewLogRecorder()
	stdlog := testenv.CaptureStdLog(t)
	stderr, stopCapture := testenv.CaptureStderr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u.String(), fila.WithLogger(rec.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := uniqueQueue(t)
	testenv.CleanupQueue(t, c, queue)
	if _, err := c.Enqueue(ctx, queue, fila.Message{Kind: "before"}); err != nil {
		t.Fatal(err)
	}
	if ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 1}); err != nil || len(ds) != 1 {
		t.Fatalf("Receive before the outage: %v, %v", ds, err)
	} else if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}

	proxy.Break()
	received := make(chan error, 1)
	go func() { // a Receive waiting through the outage
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 1})
		if err == nil && len(ds) == 1 {
			err = ds[0].Ack(ctx)
		}
		received <- err
	}()
	// Let the reconnection fail many times.
	for failures(rec) < 20 {
		if ctx.Err() != nil {
			t.Fatalf("the driver did not retry its connection; it logged:\n%s", rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Enqueue(ctx, queue, fila.Message{Kind: "during"}); !errors.Is(err, fila.ErrUnavailable) {
		t.Errorf("Enqueue during the outage: %v; want fila.ErrUnavailable", err)
	}
	proxy.Restore(t)
	for {
		_, err := c.Enqueue(ctx, queue, fila.Message{Kind: "after"})
		if err == nil {
			break
		}
		if !errors.Is(err, fila.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("Enqueue after the outage: %v", err)
		}
	}
	if err := <-received; err != nil {
		t.Errorf("the Receive waiting through the outage: %v", err)
	}
	stopCapture()
	t.Logf("logged:\n%s", rec)

	if s := stderr.String(); s != "" {
		t.Errorf("written to standard error during the outage:\n%s", s)
	}
	if s := stdlog.String(); s != "" {
		t.Errorf("written to the standard log package during the outage:\n%s", s)
	}
	if !rec.Has("reconnected") {
		t.Errorf("no line says the connection is back:\n%s", rec)
	}
	if n := rec.Count(slog.LevelInfo); n > 4 {
		t.Errorf("%d lines at Info and above for one outage with %d failed reconnections; want at most 4:\n%s", n, failures(rec), rec)
	}
}

// failures counts the failed reconnections logged so far.
func failures(rec *testenv.LogRecorder) int {
	n := 0
	for _, r := range rec.Records() {
		if strings.Contains(r.Message, "reconnect failed") {
			n++
		}
	}
	return n
}
