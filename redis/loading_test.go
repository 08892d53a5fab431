package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/redis"
)

// TestEnqueueWhileLoadingIsRetryable restarts a private Redis whose data
// takes seconds to load (key-load-delay) and enqueues while it loads: the
// plain-batch path (MULTI/EXEC, where the queued XADD gets LOADING and EXEC
// answers EXECABORT) and the script path must both fail with
// fila.ErrUnavailable, store nothing, and work once loading is done. Receive
// (script and MULTI/EXEC paths) fails with fila.ErrUnavailable too.
func TestEnqueueWhileLoadingIsRetryable(t *testing.T) {
	srv := startPrivateRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw := srv.Client("")
	srv.fill(ctx, raw, 3000)
	c, err := fila.Open(ctx, srv.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	srv.Kill()
	// 1ms per key: about 3s of loading. Events are served every KiB loaded,
	// so clients get LOADING replies meanwhile instead of waiting.
	srv.Start("--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024")
	if err := raw.Ping(ctx).Err(); !isLoading(err) {
		t.Fatalf("PING after the restart: %v; want a LOADING reply (the test needs Redis to be loading)", err)
	}
	_, err = c.Enqueue(ctx, "loading", fila.Message{Kind: "plain"})
	if !errors.Is(err, fila.ErrUnavailable) || !strings.Contains(err.Error(), "LOADING") {
		t.Errorf("plain Enqueue while Redis loads: %v; want fila.ErrUnavailable naming LOADING", err)
	}
	_, err = c.Enqueue(ctx, "loading", fila.Message{Kind: "scripted", Delay: time.Millisecond})
	if !errors.Is(err, fila.ErrUnavailable) {
		t.Errorf("scripted Enqueue while Redis loads: %v; want fila.ErrUnavailable", err)
	}
	for _, max := range []int{1, 20} { // the script path, and the fast path (MULTI/EXEC)
		_, err = c.Receive(ctx, "loading", fila.ReceiveParams{Max: max})
		if !errors.Is(err, fila.ErrUnavailable) {
			t.Errorf("Receive(Max %d) while Redis loads: %v; want fila.ErrUnavailable", max, err)
		}
	}
	if err := raw.Ping(ctx).Err(); !isLoading(err) {
		t.Fatalf("Redis finished loading during the test (%v): make the data set bigger", err)
	}

	// Retrying once loading is over works, and the failed calls stored
	// nothing.
	for {
		_, err = c.Enqueue(ctx, "loading", fila.Message{Kind: "after"})
		if err == nil {
			break
		}
		if !errors.Is(err, fila.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("Enqueue after loading: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := c.QueueStats(ctx, "loading")
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready+st.Delayed != 1 {
		t.Errorf("stats after loading: %+v; want only the message enqueued after loading", st)
	}
}
