package postgres

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Enqueue never calls pg_notify inside its INSERT's transaction:
// PostgreSQL serialises notifying transactions cluster-wide
// (PreCommit_Notify takes a lock that is held through the commit's WAL
// flush), so every other notifying transaction, in this process and in
// others, would wait for that flush. The wake-up is sent after the INSERT
// committed, in a transaction of its own that commits without waiting for
// the WAL flush (a wake-up lost in a crash costs nothing: receivers also
// poll), so the lock is held for microseconds.
//
// Per queue at most maxInFlight notifications are in flight. An Enqueue
// that finds fewer leads: its batch is BEGIN, INSERT, COMMIT and then the
// notification, one round trip on one connection. Enqueues that find the
// limit reached leave the notification out and, once committed, ask for one
// more, which is sent as soon as a notification in flight has ended (by
// the notifier, through the pool). Every committed enqueue is thus followed
// by a notification sent after its commit, and a burst of N concurrent
// enqueues costs about maxInFlight+1 notifications, not N. EnqueueTx keeps
// pg_notify in the caller's transaction, which delivers it at the caller's
// commit.

// maxInFlight is the most notifications of one queue in flight at once.
const maxInFlight = 2

// notifyTimeout bounds one notification.
const notifyTimeout = 5 * time.Second

// notifier coalesces the wake-up notifications of one driver's enqueues.
type notifier struct {
	// send notifies queues in one transaction.
	send func(ctx context.Context, queues []string) error
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// sent counts notifications sent (for tests and diagnostics), one per
	// queue; sends counts the transactions that sent them.
	sent  atomic.Int64
	sends atomic.Int64

	mu sync.Mutex
	// state per queue, absent when no notification is in flight.
	state map[string]*notifyState
}

type notifyState struct {
	inFlight int  // leading enqueues' notifications and the notifier's
	again    bool // a committed enqueue waits for a notification sent after it
}

func (n *notifier) init(send func(ctx context.Context, queues []string) error, log *slog.Logger) {
	n.send, n.log = send, log
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.state = map[string]*notifyState{}
}

// lead reports whether an Enqueue of queue about to start sends the
// notification itself, after its commit; if so it must call leadDone when
// it ends.
func (n *notifier) lead(queue string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.state[queue]
	if s == nil {
		s = &notifyState{}
		n.state[queue] = s
	}
	if s.inFlight >= maxInFlight {
		return false
	}
	s.inFlight++
	return true
}

// leadDone ends a leading Enqueue's notification. notified is false when it
// may have committed messages without sending one: another is sent.
func (n *notifier) leadDone(queue string, notified bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.state[queue]
	if !notified {
		s.again = true
	}
	n.endLocked(queue, s)
}

// kick asks for a notification of each of queues sent after this call. The
// queues with none in flight are notified together, in one transaction: a
// publish to a topic of ten subscriptions sent ten, one after another,
// each a round trip and a commit through the cluster-wide notify lock.
func (n *notifier) kick(queues ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return
	}
	var now []string
	for _, q := range queues {
		s := n.state[q]
		if s != nil && s.inFlight > 0 {
			s.again = true
			continue
		}
		if s == nil {
			s = &notifyState{}
			n.state[q] = s
		}
		s.inFlight++
		now = append(now, q)
	}
	if len(now) > 0 {
		n.wg.Add(1)
		go n.run(now)
	}
}

// endLocked ends one notification in flight: when an enqueue waits for one
// sent after it, the notifier sends it in place of the one that ended.
func (n *notifier) endLocked(queue string, s *notifyState) {
	if s.again && n.ctx.Err() == nil {
		s.again = false
		n.wg.Add(1)
		go n.run([]string{queue})
		return
	}
	s.inFlight--
	if s.inFlight == 0 {
		delete(n.state, queue)
	}
}

// run sends a notification of each of queues, in one transaction, and more
// while enqueues ask for them. Each of queues holds one in-flight count,
// which run gives back.
func (n *notifier) run(queues []string) {
	defer n.wg.Done()
	for len(queues) > 0 {
		ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
		err := n.send(ctx, queues)
		cancel()
		n.sent.Add(int64(len(queues)))
		n.sends.Add(1)
		if err != nil && n.ctx.Err() == nil {
			n.log.Warn("fila/postgres: could not send a wake-up notification; blocked receivers of the queue will find its messages at their next poll",
				slog.Any("queues", queues), slog.Any("error", err))
		}
		var again []string
		n.mu.Lock()
		for _, q := range queues {
			s := n.state[q]
			if s.again && n.ctx.Err() == nil {
				s.again = false
				again = append(again, q)
				continue
			}
			s.inFlight--
			if s.inFlight == 0 {
				delete(n.state, q)
			}
		}
		n.mu.Unlock()
		queues = again
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
