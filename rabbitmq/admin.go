package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// QueueStats counts queue's messages from passive declares (RabbitMQ's
// message counts) and this instance's own bookkeeping:
//
//   - Ready: the ready counts of the main queue and of the level queues
//     (see levels.go), plus the messages pushed to this instance and not
//     received yet. Messages other instances hold in their buffers are
//     counted by nobody (RabbitMQ sees them as unacked). ReadyByPriority
//     splits it by level: a level's queue, and the pushed messages by the
//     level they carry.
//   - Delayed: the ready counts of the delay queues, of every level, this
//     instance has published to since it started; delay queues only other
//     instances used are not seen, unless the driver has the management
//     API (Options.ManagementURL), which names them all.
//   - Leased: this instance's current leases only.
//   - Dead: the dead-letter queue's count.
//
// On a quiescent queue driven by one instance the counts are exact.
// OldestReadyAt and DeadByKind are not provided. The level queues of
// levels this instance has not used are probed for (a passive declare
// each) at most every levelProbeEvery.
func (d *Driver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return backend.Stats{}, err
	}
	mask, err := d.discoverLevels(ctx, queue, n)
	if err != nil {
		return backend.Stats{}, err
	}
	p := d.existingPuller(queue)
	var cs *chanState
	if p != nil {
		// With no Receive waiting, a full consumer is cancelled first (that
		// strands nothing; see fullLocked), so nothing more comes to it while
		// the counts are read. The next Receive starts a new consumer.
		p.stopIdleConsumer(p.current(), false)
		cs = p.current()
	}
	buckets := d.buckets(queue)
	if d.mgmt != nil {
		// Every delay queue, whoever created it, by name.
		more, err := d.mgmt.delayQueues(ctx, n)
		if err != nil {
			return backend.Stats{}, err
		}
		for _, b := range more {
			if !slices.Contains(buckets, b) {
				buckets = append(buckets, b)
			}
		}
	}
	for try := 0; ; try++ {
		// The broker's counts and this instance's buffer are read at
		// different moments. A message the queue handed to this instance's
		// consumer before the count but that has not arrived yet would be
		// counted nowhere; one handed over after the count would be counted
		// twice once it arrives. Barriers on the consumer's channel before
		// and after the count (see barrier) tell: when no delivery arrived
		// between them, the buffer read after the first matches the count.
		var seen uint64
		st := backend.Stats{ReadyByPriority: make([]int64, backend.MaxPriority+1)}
		if cs != nil {
			if seen, err = p.barrier(ctx, s, cs); err != nil {
				return backend.Stats{}, err
			}
			p.countOwn(&st, cs)
		}
		for l := 0; l <= backend.MaxPriority; l++ {
			if l > 0 && mask&(1<<l) == 0 {
				continue
			}
			c, err := s.count(ctx, n.level(l))
			if err != nil {
				return backend.Stats{}, err
			}
			st.Ready += c
			st.ReadyByPriority[l] += c
		}
		if st.Dead, err = s.count(ctx, n.dead); err != nil {
			return backend.Stats{}, err
		}
		for _, b := range buckets {
			c, err := s.count(ctx, n.delayAt(b.level, b.ms))
			if err != nil {
				return backend.Stats{}, err
			}
			st.Delayed += c
		}
		if cs == nil {
			return st, nil
		}
		after, err := p.barrier(ctx, s, cs)
		if err != nil {
			return backend.Stats{}, err
		}
		if after == seen+1 || try >= 4 { // only the second barrier's own get
			return st, nil
		}
	}
}

// barrierWait bounds how long a barrier waits for deliveries it knows were
// sent: a delivery amqp091 dropped (for a consumer cancelled with credit
// left, which this driver avoids) never arrives.
const barrierWait = 2 * time.Second

// barrier returns, once every delivery the broker sent on cs before it had
// arrived in the buffer, how many deliveries cs has received. It publishes
// a marker message to the session's marker queue and takes it with
// basic.get on cs: delivery tags count every delivery and get of a channel,
// so the marker's tag T says the channel's deliveries are 1..T, and the
// barrier waits until T of them were received. (A synchronous round trip
// alone is not enough: amqp091 queues a delivery internally before the
// driver's consumer goroutine gets it.)
func (p *puller) barrier(ctx context.Context, s *session, cs *chanState) (uint64, error) {
	marker, err := s.markerQueue(ctx)
	if err != nil {
		return 0, err
	}
	if err := s.publish(ctx, []pubItem{{key: marker, msg: amqp.Publishing{}}}); err != nil {
		return 0, mapErr(ctx, "publish a stats marker", err)
	}
	var dv amqp.Delivery
	var ok bool
	if err := cs.call(func() error {
		var err error
		dv, ok, err = cs.ch.Get(marker, true)
		if ok {
			// Recorded under callMu (see sweep).
			p.mu.Lock()
			if p.cs == cs {
				cs.noteTagLocked(dv.DeliveryTag)
			}
			p.mu.Unlock()
		}
		return err
	}); err != nil {
		return 0, mapErr(ctx, "take a stats marker", err)
	}
	timeout := time.NewTimer(barrierWait)
	defer timeout.Stop()
	for {
		p.mu.Lock()
		seen, wake, gone := cs.seen, p.wake, p.cs != cs
		p.mu.Unlock()
		if !ok || gone || seen >= dv.DeliveryTag {
			return seen, nil
		}
		select {
		case <-wake:
		case <-timeout.C:
			return seen, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// countOwn adds the puller's buffered (ready) and leased messages to st.
func (p *puller) countOwn(st *backend.Stats, cs *chanState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs != cs {
		return
	}
	for _, e := range cs.entries {
		switch {
		case e.leased:
			st.Leased++
		case !e.busy:
			st.Ready++
			if st.ReadyByPriority != nil {
				st.ReadyByPriority[levelOf(e.dv.Headers)]++
			}
		}
	}
}

// count returns a queue's ready message count, 0 when it does not exist.
func (s *session) count(ctx context.Context, name string) (int64, error) {
	var n int64
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		n = int64(q.Messages)
		return err
	})
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, mapErr(ctx, "count "+name, err) // n is fn's until fn returns
	}
	return n, nil
}

// deadScan holds a dead-letter queue's messages, taken with basic.get and
// not acked, on a channel of its own. Giving back what was not acked puts it
// in its place (the dead queue is a classic queue, which requeues in the
// original order).
//
// Scans of one queue's dead letters run one at a time, across processes:
// a scan holds the queue's scan lock (lockDeadScan) from before its first
// get until its messages are back, so a listing, replay or purge never sees
// the part another one holds (it waits for it instead). QueueStats' Dead
// count still misses the letters a scan holds while it runs: a passive
// declare counts ready messages only.
type deadScan struct {
	ch      *amqp.Channel
	s       *session
	lock    string // the scan lock's queue, "" when none is held
	unlock  func() // the driver's own lock of the queue's scans
	queue   string
	msgs    []amqp.Delivery
	letters []backend.DeadLetter
}

// scanLockSuffix names a queue's dead-letter scan lock: an exclusive queue
// (P.Q:dead:scan) that the connection of the scan running holds.
const scanLockSuffix = ":scan"

// lockDeadScan takes queue's dead-letter scan lock and returns the channel
// that holds it, waiting while another scan runs or until ctx ends. Within
// the driver a lock of its own serializes the scans (an exclusive queue is
// held per connection, and the driver's scans share one); across
// connections the broker does: declaring the exclusive queue P.Q:dead:scan
// fails with RESOURCE_LOCKED while another connection holds it, and the
// queue goes with that connection if its process dies.
func (d *Driver) lockDeadScan(ctx context.Context, s *session, queue string, n names) (*deadScan, error) {
	unlock, err := d.deadScans.lock(ctx, queue)
	if err != nil {
		return nil, err
	}
	lock := n.dead + scanLockSuffix
	wait := 10 * time.Millisecond
	for {
		ch, err := s.conn.Channel()
		if err != nil {
			unlock()
			return nil, mapErr(ctx, "open channel", err)
		}
		_, err = ch.QueueDeclare(lock, false, false, true, false, amqp.Table{"x-queue-type": "classic"})
		if err == nil {
			return &deadScan{ch: ch, s: s, lock: lock, unlock: unlock, queue: queue}, nil
		}
		_ = ch.Close() // the refusal closed it on the broker already
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != amqp.ResourceLocked {
			unlock()
			return nil, mapErr(ctx, "lock the dead letters for a scan", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			unlock()
			return nil, ctx.Err()
		}
		wait = min(wait*2, 200*time.Millisecond)
	}
}

// scanPrefetch is how many dead letters a scan's consumer has in flight
// beyond those it read.
const scanPrefetch = 256

// scanDead takes queue's scan lock and reads its dead letters, oldest
// first, through a consumer with a window of unacked letters that grows by
// scanPrefetch as they are read:
// as many as the dead queue held when the lock was taken, or fewer when
// enough (nil: never) says after a letter that the caller has what it
// needs. It cancels the consumer before returning; every letter read stays
// unacked until close.
func (d *Driver) scanDead(ctx context.Context, s *session, queue string, n names, enough func(*deadScan) bool) (*deadScan, error) {
	sc, err := d.lockDeadScan(ctx, s, queue, n)
	if err != nil {
		return nil, err
	}
	ch := sc.ch
	q, err := ch.QueueDeclarePassive(n.dead, true, false, false, false, nil)
	if err != nil {
		sc.close()
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return &deadScan{queue: queue}, nil // no dead queue, no dead letters
		}
		return nil, mapErr(ctx, "count dead letters", err)
	}
	// The lock keeps other scans out, so nobody else holds dead letters
	// unacked: the count is every letter there was. Letters added later
	// come after them and are left for the next scan.
	if q.Messages == 0 {
		return sc, nil
	}
	// Nothing is acked while scanning, so the window of unacked letters
	// grows by scanPrefetch each time it is full: a scan that stops early
	// has at most that many letters in flight beyond those it read. The
	// channel-wide (global) limit is the one RabbitMQ lets a channel raise
	// under a running consumer.
	window := scanPrefetch
	if err := ch.Qos(window, 0, true); err != nil {
		sc.close()
		return nil, mapErr(ctx, "scan dead letters", err)
	}
	tag := "fila-scan-" + d.nonce + "-" + strconv.FormatUint(d.seq.Add(1), 36)
	deliveries, err := ch.Consume(n.dead, tag, false, false, false, false, nil)
	if err != nil {
		sc.close()
		return nil, mapErr(ctx, "scan dead letters", err)
	}
	for len(sc.msgs) < q.Messages && (enough == nil || len(sc.letters) == 0 || !enough(sc)) {
		var dv amqp.Delivery
		var ok bool
		select {
		case dv, ok = <-deliveries:
		case <-ctx.Done():
			sc.close()
			return nil, ctx.Err()
		}
		if !ok { // the channel closed, or the broker cancelled the consumer (queue deleted)
			sc.close()
			return nil, mapErr(ctx, "scan dead letters", fmt.Errorf("the dead-letter queue's consumer ended after %d of %d letters", len(sc.msgs), q.Messages))
		}
		adopt(&dv, queue) // the broker dead-lettered a copy itself (a delivery limit)
		sc.msgs = append(sc.msgs, dv)
		m := decode(&dv)
		m.RunAt = time.Time{}
		l := backend.DeadLetter{
			Message:  m,
			Queue:    queue,
			Attempts: int(intHeader(dv.Headers, hAttempts)),
			Reason:   strHeader(dv.Headers, hReason),
		}
		if ms := intHeader(dv.Headers, hDeadAt); ms != 0 {
			l.DeadAt = time.UnixMilli(ms)
		}
		sc.letters = append(sc.letters, l)
		if len(sc.msgs) == window && window < q.Messages {
			window += scanPrefetch
			if err := ch.Qos(window, 0, true); err != nil {
				sc.close()
				return nil, mapErr(ctx, "scan dead letters", err)
			}
		}
	}
	// No more deliveries: what the consumer was sent beyond the letters
	// read stays unacked and goes back, in place, when close nacks them
	// and closes the channel.
	if err := ch.Cancel(tag, false); err != nil {
		sc.close()
		return nil, mapErr(ctx, "scan dead letters", err)
	}
	return sc, nil
}

// close gives back the letters not acked, then releases the scan lock: a
// nack of every outstanding get with requeue, and the lock queue's delete,
// which the broker handles after the nack (one channel's frames are handled
// in order). If the channel failed, closing it requeues the letters, and
// the lock is deleted on the session's control channel (any channel of the
// connection that holds it may).
func (sc *deadScan) close() {
	if sc.ch == nil {
		return
	}
	var err error
	if len(sc.msgs) > 0 {
		// Tag 0 with multiple: every letter outstanding on the channel,
		// those the scan did not read included.
		err = sc.ch.Nack(0, true, true)
	}
	if err == nil {
		_, err = sc.ch.QueueDelete(sc.lock, false, false, false)
	}
	_ = sc.ch.Close()
	if err != nil && sc.s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = sc.s.withCtl(ctx, func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(sc.lock, false, false, false)
			return err
		})
		cancel()
	}
	sc.ch = nil
	sc.unlock()
}

// scanLocks serializes a driver's dead-letter scans per queue.
type scanLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the scan holding it ends
}

// lock waits until no scan of queue holds the lock, or ctx ends, and takes
// it.
func (l *scanLocks) lock(ctx context.Context, queue string) (func(), error) {
	for {
		l.mu.Lock()
		done, busy := l.held[queue]
		if !busy {
			if l.held == nil {
				l.held = map[string]chan struct{}{}
			}
			done = make(chan struct{})
			l.held[queue] = done
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				delete(l.held, queue)
				l.mu.Unlock()
				close(done)
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// selected returns the indexes of the letters f selects.
func (sc *deadScan) selected(f backend.DeadFilter) []int {
	var ids map[string]bool
	if f.IDs != nil {
		ids = make(map[string]bool, len(f.IDs))
		for _, id := range f.IDs {
			ids[id] = true
		}
	}
	var out []int
	for i, l := range sc.letters {
		if (ids == nil || ids[l.ID]) && (f.Kind == "" || l.Kind == f.Kind) {
			out = append(out, i)
		}
	}
	return out
}

// DeadList lists dead letters oldest first (the dead queue's order). It
// consumes the dead queue without acking, up to the letters the page
// needs (past the cursor's letter, one more than the page; every letter
// when p.IDs names one that is not found, or the cursor's letter is gone),
// and gives them all back at the end: a page costs the letters before it,
// read in a stream. The cursor is the id of the last letter of the
// previous page.
func (d *Driver) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return backend.DeadPage{}, err
	}
	sc, err := d.scanDead(ctx, s, queue, n, deadPageRead(p))
	if err != nil {
		return backend.DeadPage{}, err
	}
	defer sc.close()
	var all []backend.DeadLetter
	for _, i := range sc.selected(backend.DeadFilter{Kind: p.Kind, IDs: p.IDs}) {
		l := sc.letters[i]
		if p.WithoutBodies {
			l.Body = nil
		}
		all = append(all, l)
	}
	start := 0
	if p.Cursor != "" {
		start = len(all)
		for i, l := range all {
			if l.ID == p.Cursor {
				start = i + 1
				break
			}
		}
		if start == len(all) { // the cursor's letter is gone: go by id order
			for i, l := range all {
				if l.ID > p.Cursor {
					start = i
					break
				}
			}
		}
	}
	limit := max(p.Limit, 1)
	end := min(start+limit, len(all))
	page := backend.DeadPage{Letters: all[start:end]}
	if end < len(all) && end > start {
		page.Next = all[end-1].ID
	}
	return page, nil
}

// deadPageRead returns the scan's stop condition for a page of p: every
// id of p.IDs found, or, past the cursor's letter, one letter more than the
// page that p.Kind selects.
func deadPageRead(p backend.DeadListParams) func(*deadScan) bool {
	if p.IDs != nil {
		want := make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			want[id] = true
		}
		found := 0
		return func(sc *deadScan) bool {
			if id := sc.letters[len(sc.letters)-1].ID; want[id] {
				want[id] = false // a duplicate id is counted once
				found++
			}
			return found == len(want)
		}
	}
	past, after := p.Cursor == "", 0
	return func(sc *deadScan) bool {
		l := sc.letters[len(sc.letters)-1]
		switch {
		case !past:
			past = l.ID == p.Cursor
		case p.Kind == "" || l.Kind == p.Kind:
			after++
		}
		return after > max(p.Limit, 1)
	}
}

// DeadReplay publishes the selected dead letters back to the main queue of
// their level (confirmed) as fresh messages, attempt count reset and last
// error dropped, then acks them in the dead queue.
func (d *Driver) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	var levels uint8
	replayed, err := d.deadOp(ctx, queue, f, func(s *session, n names, sc *deadScan, sel []int) error {
		items := make([]pubItem, len(sel))
		for j, i := range sel {
			pub := copyOf(&sc.msgs[i])
			for _, k := range []string{hAttempts, hReason, hDeadAt, hRunAt, hLastError} {
				delete(pub.Headers, k)
			}
			l := levelOf(pub.Headers)
			if l > 0 && levels&(1<<l) == 0 {
				if err := s.declareLevel(ctx, queue, n, l); err != nil {
					return err
				}
				levels |= 1 << l
			}
			items[j] = pubItem{key: n.level(l), msg: pub, queue: queue}
		}
		return s.publish(ctx, items)
	})
	if err == nil && levels != 0 {
		d.levelBell(queue)
	}
	return replayed, err
}

// DeadPurge deletes the selected dead letters (all of them with the zero
// filter, by purging the dead queue).
func (d *Driver) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	if f.IDs == nil && f.Kind == "" {
		n, s, err := d.queueSession(ctx, queue)
		if err != nil {
			return 0, err
		}
		var purged int
		err = s.withCtl(ctx, func(ch *amqp.Channel) error {
			var err error
			purged, err = ch.QueuePurge(n.dead, false)
			return err
		})
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return 0, nil
		}
		if err != nil {
			return 0, mapErr(ctx, "purge dead letters", err) // purged is fn's until fn returns
		}
		return purged, nil
	}
	return d.deadOp(ctx, queue, f, func(*session, names, *deadScan, []int) error { return nil })
}

// deadOp scans the dead queue, runs op on the selected letters and acks
// them if it succeeded; the others go back when the scan's channel closes.
func (d *Driver) deadOp(ctx context.Context, queue string, f backend.DeadFilter, op func(*session, names, *deadScan, []int) error) (int, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return 0, err
	}
	sc, err := d.scanDead(ctx, s, queue, n, nil)
	if err != nil {
		return 0, err
	}
	defer sc.close()
	sel := sc.selected(f)
	if len(sel) == 0 {
		return 0, nil
	}
	if err := op(s, n, sc, sel); err != nil {
		return 0, mapErr(ctx, "dead-letter operation", err)
	}
	for _, i := range sel {
		if err := sc.ch.Ack(sc.msgs[i].DeliveryTag, false); err != nil {
			return 0, mapErr(ctx, "ack dead letter", err)
		}
	}
	// A synchronous call after the acks makes sure the broker applied them
	// before the channel closes and requeues the rest.
	if _, err := sc.ch.QueueDeclarePassive(n.dead, true, false, false, false, nil); err != nil {
		return 0, mapErr(ctx, "dead-letter operation", err)
	}
	return len(sel), nil
}

// QueueDelete deletes queue's RabbitMQ topology with every message in it:
// its delay queues (found by probing every possible delay queue name, see
// ReceiveDelayed, so those other instances created go too; a level's only
// where the level's queue exists), the marks recorded in its mark
// registries and the registries (see marks.go), the main queue and the
// level queues, the router exchanges (levels.go), and the dead-letter
// queue and exchange. Deleting what does not exist is not an error
// (queue.delete and exchange.delete of a missing name succeed).
//
// Then every driver instance of this process on the same broker, vhost and
// prefix (this one included) forgets the queue: its declarations (the next
// call declares the topology again, so the queue can be used at once), the
// delay queues it knew for stats, and its consumer channel for the queue,
// which is closed with its buffered messages and leases (settling those
// returns ErrLeaseLost). Instances in other processes learn of it when the
// broker cancels their consumer of the deleted queue (basic.cancel), which
// has them drop that channel the same way.
func (d *Driver) QueueDelete(ctx context.Context, queue string) error {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	// Whatever happens below, nothing cached about the queue can be trusted
	// any more: dropping it costs at most a declaration.
	defer d.broadcastDeleted(queue, n)
	// Every possible delay queue name is deleted, whoever created it:
	// queue.delete of a queue that does not exist succeeds, so the names
	// go out without waiting for each reply, on one channel (a passive
	// probe of each name would cost a channel per missing queue). Delay
	// queues go first: their messages dead-letter into the main queue,
	// which must not be declared again meanwhile and catch them.
	buckets := allBuckets()
	// Every level queue is probed for, whoever made it (a passive declare
	// each): a level without a queue has no delay queues either.
	levels, err := s.existingLevels(ctx, n)
	if err != nil {
		return err
	}
	levels |= d.levelMask(queue)
	// The queue's marks are found in its mark registries (see marks.go);
	// the registries go after them, so a failure below leaves them to a
	// retry.
	marks, err := s.recordedMarks(ctx, n)
	if err != nil {
		return err
	}
	err = s.withCtl(ctx, func(ch *amqp.Channel) error {
		for l := 0; l <= backend.MaxPriority; l++ {
			if l > 0 && levels&(1<<l) == 0 {
				continue
			}
			for _, ms := range buckets {
				if _, err := ch.QueueDelete(n.delayAt(l, ms), false, false, true); err != nil {
					return err
				}
			}
		}
		for _, mq := range marks {
			if _, err := ch.QueueDelete(mq, false, false, true); err != nil {
				return err
			}
		}
		// The first reply waited for comes after every delete above.
		names := []string{n.main, n.dead, n.markRegistry(false), n.markRegistry(true)}
		for l := 1; l <= backend.MaxPriority; l++ {
			if levels&(1<<l) != 0 {
				names = append(names, n.level(l))
			}
		}
		for _, name := range names {
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				return err
			}
		}
		// The router goes with a subscription's bindings to it, and its
		// P.Q:sub:H exchanges (auto-delete) with them.
		for _, ex := range []string{n.router(), n.routerAE(), n.dead} {
			if err := ch.ExchangeDelete(ex, false, false); err != nil {
				return err
			}
		}
		return nil
	})
	return mapErr(ctx, "delete queue", err)
}
