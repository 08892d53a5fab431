package postgres

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenerDownPoll bounds a blocked receive's wait while the LISTEN
// connection is down, so a lost notification costs at most this long.
const listenerDownPoll = time.Second

// waiters fans wake-ups out to the receives blocked on each queue. A receive
// takes its queue's channel before it claims; a notification closes the
// channel (and installs a fresh one), so a wake-up that arrives between an
// empty claim and the wait is never lost.
type waiters struct {
	mu sync.Mutex
	m  map[string]*waitSet
	// listening is 1 while the LISTEN connection is up.
	listening atomic.Bool
}

type waitSet struct {
	ch chan struct{}
	n  int
}

func (w *waiters) init() { w.m = map[string]*waitSet{} }

// join registers a receive blocked on queue; call leave when it returns.
func (w *waiters) join(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.m[queue]
	if ws == nil {
		ws = &waitSet{ch: make(chan struct{})}
		w.m[queue] = ws
	}
	ws.n++
}

func (w *waiters) leave(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.m[queue]; ws != nil {
		ws.n--
		if ws.n == 0 {
			delete(w.m, queue)
		}
	}
}

// channel returns the channel the next wake-up of queue closes.
func (w *waiters) channel(queue string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[queue].ch
}

// wake wakes every receive blocked on queue.
func (w *waiters) wake(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.m[queue]; ws != nil {
		close(ws.ch)
		ws.ch = make(chan struct{})
	}
}

// wakeAll wakes every blocked receive (after the LISTEN connection came
// back, when notifications may have been missed).
func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ws := range w.m {
		close(ws.ch)
		ws.ch = make(chan struct{})
	}
}

// startListener starts the LISTEN goroutine once, on the first Receive, so
// producer-only processes hold no extra connection.
func (d *Driver) startListener() {
	d.startOnce.Do(func() {
		d.lmu.Lock()
		defer d.lmu.Unlock()
		if d.closed {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		d.lcancel = cancel
		d.lwg.Add(1)
		go func() {
			defer d.lwg.Done()
			d.runListener(ctx)
		}()
	})
}

// runListener keeps one dedicated connection (not from the pool) listening
// on the schema's channel and wakes the receives of each notified queue. It
// reconnects with capped exponential backoff; after each (re)connect it
// wakes every blocked receive, since notifications sent while it was down
// are lost.
func (d *Driver) runListener(ctx context.Context) {
	cfg := d.pool.Config().ConnConfig
	if d.lconfig != nil {
		cfg = d.lconfig.Copy()
	}
	backoff := 50 * time.Millisecond
	const maxBackoff = 5 * time.Second
	lost := false
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+quoteIdent(d.q.channel))
		}
		if err == nil {
			d.waiters.listening.Store(true)
			d.waiters.wakeAll()
			if lost {
				d.log.Info("fila: LISTEN connection restored")
			}
			lost = false
			backoff = 50 * time.Millisecond
			for {
				var n *pgconn.Notification
				n, err = conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				d.waiters.wake(n.Payload)
			}
			d.waiters.listening.Store(false)
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		if !lost {
			d.log.Warn("fila: LISTEN connection lost; receivers poll until it is back", slog.Any("error", err))
			lost = true
		}
		jitter := time.Duration(rand.Int64N(int64(backoff)/2 + 1))
		t := time.NewTimer(backoff + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
