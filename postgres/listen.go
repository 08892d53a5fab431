package postgres

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fila-go/fila/backend"
)

// listenerDownPoll bounds a blocked receive's wait while the LISTEN
// connection is down, so a lost notification costs at most this long.
const listenerDownPoll = time.Second

// waiters hands wake-ups to the receives of each queue. A notification
// wakes one receive, not all of them: the one that waited longest among those
// without a pending wake-up. A receive that claims a full batch, or leaves
// without using a wake-up it got, passes one on, so a burst of messages
// wakes as many receives as it needs, one claim after another, and a single
// message costs one claim however many receives wait. A receive registers
// before it claims, so a wake-up that arrives between an empty claim and the
// wait stays pending in its channel and is never lost.
type waiters struct {
	mu sync.Mutex
	m  map[string][]*waiter
	// quiet holds, per queue, the mark of its latest claim (see quietMark).
	quiet map[string]*quietMark
	// listening is true while the LISTEN connection is up.
	listening atomic.Bool
	// quietFor overrides quietMax when set (tests).
	quietFor time.Duration
}

// quietMark is set as a claim of a queue starts; a notification of the
// queue (or a LISTEN reconnect) clears clean. When the claim took less than
// it could, it sets due (zero: nothing due) and the mark stays: until a
// notification comes or due passes, another claim would find nothing, and a
// receive waits without one (quietWait). A claim that filled up, failed or
// started while the listener was down removes it.
//
// Every message a claim does not see was committed after its snapshot, so
// its notification, sent after that commit, comes after the claim started;
// leases that expire and timers that come due are in due.
type quietMark struct {
	clean bool
	set   bool // due is set: the claim ended
	due   time.Time
	setAt time.Time // when the claim ended
}

// quietMax bounds how long a quiet mark spares claims: a receive claims
// again once its queue's mark is that old, whatever it says, so a message
// the reasoning above missed (a due time read from a snapshot that did not
// see its timer yet, a notification lost on the way) waits at most that
// long for a short-polling consumer. A consumer polling an idle queue
// claims once per quietMax.
const quietMax = 2 * time.Second

// claimStarting marks queue's claim as starting now and returns the mark,
// or nil when the listener is down.
func (w *waiters) claimStarting(queue string) *quietMark {
	if !w.listening.Load() {
		return nil
	}
	m := &quietMark{clean: true}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.quiet == nil {
		w.quiet = map[string]*quietMark{}
	}
	w.quiet[queue] = m
	return m
}

// claimEnded records the end of the claim that set m: with quiet, the
// claim took less than it could, and due is the queue's next due time
// (zero for none); else the mark goes. A later claim's mark is left alone.
func (w *waiters) claimEnded(queue string, m *quietMark, quiet bool, due time.Time) {
	if m == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.quiet[queue] != m {
		return
	}
	if !quiet || !w.listening.Load() {
		delete(w.quiet, queue)
		return
	}
	m.set, m.due, m.setAt = true, due, time.Now()
}

// quietWait reports whether a claim of queue now would find nothing, and
// then how long until its next due time or the end of the mark's quietMax,
// whichever comes first.
func (w *waiters) quietWait(queue string, now time.Time) (time.Duration, bool) {
	if !w.listening.Load() {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.quiet[queue]
	limit := quietMax
	if w.quietFor > 0 {
		limit = w.quietFor
	}
	if m == nil || !m.clean || !m.set || now.Sub(m.setAt) >= limit {
		return 0, false
	}
	left := limit - now.Sub(m.setAt)
	if m.due.IsZero() {
		return left, true
	}
	if !now.Before(m.due) {
		return 0, false
	}
	return min(m.due.Sub(now), left), true
}

// backlogged reports whether queue's last claim by this driver took all it
// asked for (or failed, or started while the listener was down), or none
// is known: a claim now may well fill up. After a claim that took less, a
// consumer's next claim is better left to its Receive, which claims once a
// notification or a due time comes and then takes everything committed
// meanwhile; an AckReceive that claimed at once took less each time (in a
// fan-out to ten subscriptions, about 4% more rows and 5% more WAL per
// event).
func (w *waiters) backlogged(queue string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.quiet[queue]
	return m == nil || !m.set
}

// noisy clears the mark of queue: something may make a claim find a
// message without a notification (a lease made shorter).
func (w *waiters) noisy(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noisyLocked(queue)
}

// noisyLocked clears the marks of queue (a notification), or of every queue
// (queue "": the listener reconnected, and notifications may be lost).
// Call with mu held.
func (w *waiters) noisyLocked(queue string) {
	if queue == "" {
		for _, m := range w.quiet {
			m.clean = false
		}
		return
	}
	if m := w.quiet[queue]; m != nil {
		m.clean = false
	}
}

// waiter is one registered receive; ch holds at most one pending wake-up.
type waiter struct {
	ch chan struct{}
}

func (w *waiters) init() { w.m = map[string][]*waiter{} }

// join registers a receive of queue; call leave when it returns.
func (w *waiters) join(queue string) *waiter {
	wt := &waiter{ch: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[queue] = append(w.m[queue], wt)
	return wt
}

// leave deregisters wt. A wake-up it holds unused, or passOn (it claimed a
// full batch, so more may wait), wakes another receive of the queue.
func (w *waiters) leave(queue string, wt *waiter, passOn bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.m[queue]
	for i, x := range list {
		if x == wt {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.m, queue)
		return
	}
	w.m[queue] = list
	select {
	case <-wt.ch:
		passOn = true
	default:
	}
	if passOn {
		w.wakeOneLocked(list)
	}
}

// wake wakes one receive of queue.
func (w *waiters) wake(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noisyLocked(queue)
	w.wakeOneLocked(w.m[queue])
}

func (w *waiters) wakeOneLocked(list []*waiter) {
	for _, wt := range list {
		select {
		case wt.ch <- struct{}{}:
			return
		default: // already has a wake-up pending; try the next one
		}
	}
}

// wakeAll wakes every receive (after the LISTEN connection came back, when
// notifications may have been missed).
func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noisyLocked("")
	for _, list := range w.m {
		for _, wt := range list {
			select {
			case wt.ch <- struct{}{}:
			default:
			}
		}
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

// listenCheckWait is how long checkListen waits for its own notification. On
// a direct connection it arrives in milliseconds.
const listenCheckWait = 5 * time.Second

// errListenThroughPooler is the error of a driver whose LISTEN cannot work.
var errListenThroughPooler = backend.Invalidf("postgres: LISTEN does not work through this connection: a notification sent " +
	"to a listening connection never arrived, as behind a pooler in transaction mode (PgBouncer pool_mode=transaction). " +
	"Add fila_listen=false to the URL (receivers then poll), connect to the server directly or through a pooler " +
	"in session mode, or set Options.ListenConfig to a direct connection")

// checkListen proves at open that the LISTEN connection will hear
// notifications: it listens on a channel of its own on a connection made
// as the listener's are, sends a notification on it through the pool, and
// waits for it. Behind a pooler in transaction mode the listening session
// is handed to other clients after the statement, so the notification
// never arrives and receivers would only wake by polling, seconds late:
// Open fails instead, saying what to change.
func (d *Driver) checkListen(ctx context.Context) error {
	cfg := d.pool.Config().ConnConfig
	if d.lconfig != nil {
		cfg = d.lconfig.Copy()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return mapErr(ctx, "check LISTEN", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	channel := "fila_listen_check_" + strconv.FormatUint(rand.Uint64(), 36)
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(channel)); err != nil {
		return mapErr(ctx, "check LISTEN", err)
	}
	if _, err := d.pool.Exec(ctx, d.q.notify, channel, ""); err != nil {
		return mapErr(ctx, "check LISTEN", err)
	}
	wctx, cancel := context.WithTimeout(ctx, listenCheckWait)
	defer cancel()
	if _, err := conn.WaitForNotification(wctx); err != nil {
		if ctx.Err() != nil {
			return mapErr(ctx, "check LISTEN", ctx.Err())
		}
		if wctx.Err() != nil {
			return errListenThroughPooler
		}
		return mapErr(ctx, "check LISTEN", err)
	}
	return nil
}
