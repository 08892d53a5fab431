package postgres

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Concurrent Enqueue calls do not call pg_notify inside their INSERTs'
// transactions: PostgreSQL serialises notifying transactions cluster-wide
// (PreCommit_Notify takes a lock that is held through the commit's WAL
// flush), so they would commit one at a time. (An Enqueue alone in flight
// keeps pg_notify in its transaction: one round trip, no one to wait for.)
// Instead the notifier sends the
// wake-up after the INSERT committed, in a transaction of its own that
// commits without waiting for the WAL flush (a wake-up lost in a crash costs
// nothing: receivers also poll), and coalesces: per queue at most one
// notification is in flight, and enqueues that commit while it is in flight
// are covered by one more sent after it. Every committed enqueue is thus
// followed by a notification sent after its commit, and a burst of N
// enqueues costs about two notifications, not N. EnqueueTx keeps pg_notify
// in the caller's transaction, which delivers it at the caller's commit.

// notifyTimeout bounds one notification.
const notifyTimeout = 5 * time.Second

// notifier coalesces the wake-up notifications of one driver's enqueues.
type notifier struct {
	send func(ctx context.Context, queue string) error
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// sent counts notifications sent (for tests and diagnostics).
	sent atomic.Int64

	mu sync.Mutex
	// state per queue: absent when idle, false while one notification is
	// in flight, true when another must follow it.
	state map[string]bool
}

func (n *notifier) init(send func(ctx context.Context, queue string) error, log *slog.Logger) {
	n.send, n.log = send, log
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.state = map[string]bool{}
}

// kick asks for a notification of queue sent after this call.
func (n *notifier) kick(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if again, busy := n.state[queue]; busy {
		if !again {
			n.state[queue] = true
		}
		return
	}
	if n.ctx.Err() != nil {
		return
	}
	n.state[queue] = false
	n.wg.Add(1)
	go n.run(queue)
}

// run sends notifications of queue until no kick asks for another.
func (n *notifier) run(queue string) {
	defer n.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
		err := n.send(ctx, queue)
		cancel()
		n.sent.Add(1)
		if err != nil && n.ctx.Err() == nil {
			n.log.Warn("fila/postgres: could not send a wake-up notification; blocked receivers of the queue will find its messages at their next poll",
				slog.String("queue", queue), slog.Any("error", err))
		}
		n.mu.Lock()
		if n.state[queue] && n.ctx.Err() == nil {
			n.state[queue] = false
			n.mu.Unlock()
			continue
		}
		delete(n.state, queue)
		n.mu.Unlock()
		return
	}
}

// idle reports whether no notification is in flight.
func (n *notifier) idle() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.state) == 0
}

// close stops the notifier and waits for notifications in flight. The
// cancel happens under mu, so a kick either started its goroutine before
// (and Wait waits for it) or sees the cancelled context and starts none.
func (n *notifier) close() {
	n.mu.Lock()
	n.cancel()
	n.mu.Unlock()
	n.wg.Wait()
}
