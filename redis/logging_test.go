package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// TestOutageLogsThroughWithLogger: a client opened with fila.WithLogger
// over a private Redis that the test kills and restarts fails its calls
// with fila.ErrUnavailable meanwhile and recovers by itself; every log line
// of the outage, go-redis's own dial failures included, goes through the
// given logger (at Debug), a bounded number of them at Info and above, and
// nothing reaches the standard log package or standard error.
func TestOutageLogsThroughWithLogger(t *testing.T) {
	srv := startPrivateRedis(t)
	rec := testenv.NewLogRecorder()
	stdlog := testenv.CaptureStdLog(t)
	stderr, stopCapture := testenv.CaptureStderr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, srv.URL(""), fila.WithLogger(rec.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Enqueue(ctx, "outage", fila.Message{Kind: "before"}); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	if _, err := c.Enqueue(ctx, "outage", fila.Message{Kind: "during"}); !errors.Is(err, fila.ErrUnavailable) {
		t.Errorf("Enqueue while Redis is down: %v; want fila.ErrUnavailable", err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	_, err = c.Receive(rctx, "outage", fila.ReceiveParams{Max: 10})
	rcancel()
	if err == nil {
		t.Error("Receive while Redis is down succeeded")
	}

	srv.Start()
	for {
		_, err := c.Enqueue(ctx, "outage", fila.Message{Kind: "after"})
		if err == nil {
			break
		}
		if !errors.Is(err, fila.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("Enqueue after Redis came back: %v", err)
		}
	}
	stopCapture()
	t.Logf("logged:\n%s", rec)

	if s := stderr.String(); s != "" {
		t.Errorf("written to standard error during the outage:\n%s", s)
	}
	if s := stdlog.String(); s != "" {
		t.Errorf("written to the standard log package during the outage:\n%s", s)
	}
	if !rec.Has("go-redis") {
		t.Errorf("go-redis's lines did not reach the client's logger; it got:\n%s", rec)
	}
	if n := rec.Count(slog.LevelInfo); n > 2 {
		t.Errorf("%d lines at Info and above for one outage; want at most 2:\n%s", n, rec)
	}
	for _, r := range rec.Records() {
		if strings.Contains(r.Message, "go-redis") && r.Level != slog.LevelDebug {
			t.Errorf("go-redis line at %v, want Debug: %s", r.Level, r.Message)
		}
	}
}
