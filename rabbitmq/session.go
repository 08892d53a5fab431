package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// session is one AMQP connection with its control channel (declarations,
// passive declares), its publishing channel and its cache of declared
// topology. When the connection dies the session is dead for good; the
// driver dials a new one.
type session struct {
	d    *Driver
	conn *amqp.Connection
	dead chan struct{} // closed when the connection is closed
	err  error         // why; set before dead is closed

	blockMu sync.Mutex
	blocked chan struct{} // closed while the broker blocks this connection
	reason  string

	ctl ctlChan
	// probe is a control channel of the mark probes alone (a client probes
	// its queues' pause marks once per control interval): they do not wait
	// behind other control calls.
	probe ctlChan

	pub publisher

	declMu   sync.Mutex
	declared map[string]*declCall // main topology, per Fila queue
	delays   map[string]time.Time // delay queue name -> when last declared
	// registries holds the mark registry queues declared (see marks.go).
	registries map[string]bool
	// topics holds the topic exchanges declared (see topic.go).
	topics map[string]bool
	// lv holds the level queues and routers declared (see levels.go).
	lv levelCache

	markerMu sync.Mutex
	marker   string // the stats barrier's queue, once declared
}

type declCall struct {
	done chan struct{}
	err  error
}

func newSession(d *Driver, conn *amqp.Connection) *session {
	s := &session{
		d:        d,
		conn:     conn,
		dead:     make(chan struct{}),
		blocked:  make(chan struct{}),
		declared: map[string]*declCall{},
		delays:   map[string]time.Time{},

		registries: map[string]bool{},
		topics:     map[string]bool{},
		ctl:        newCtlChan(),
		probe:      newCtlChan(),
	}
	s.pub.s = s
	return s
}

// watch follows the connection's blocked/unblocked and close notifications.
func (s *session) watch() {
	defer s.d.wg.Done()
	closes := s.conn.NotifyClose(make(chan *amqp.Error, 1))
	blocks := s.conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	for {
		select {
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			s.setBlocked(b)
		case e, ok := <-closes:
			if ok && e != nil {
				s.err = e
			} else {
				s.err = amqp.ErrClosed
			}
			close(s.dead)
			return
		}
	}
}

func (s *session) setBlocked(b amqp.Blocking) {
	s.blockMu.Lock()
	defer s.blockMu.Unlock()
	if b.Active {
		select {
		case <-s.blocked:
		default:
			s.reason = b.Reason
			close(s.blocked)
			s.d.log.Warn("rabbitmq: the broker blocked publishing on this connection (memory or disk alarm)", slog.String("reason", b.Reason))
		}
		return
	}
	select {
	case <-s.blocked:
		s.blocked = make(chan struct{})
		s.d.log.Info("rabbitmq: the broker unblocked publishing")
	default:
	}
}

// blockedState returns a channel closed while the connection is blocked, and
// the error to report if it is.
func (s *session) blockedState() (<-chan struct{}, error) {
	s.blockMu.Lock()
	defer s.blockMu.Unlock()
	select {
	case <-s.blocked:
		return s.blocked, fmt.Errorf("%w: %s", ErrBlocked, s.reason)
	default:
		return s.blocked, nil
	}
}

func (s *session) blockedErr() error {
	s.blockMu.Lock()
	defer s.blockMu.Unlock()
	return fmt.Errorf("%w: %s", ErrBlocked, s.reason)
}

func (s *session) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

// withCtl runs fn on the control channel (see ctlChan.run).
func (s *session) withCtl(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	return s.ctl.run(ctx, s.conn, fn)
}

// ctlChan is a channel for synchronous control methods (declares, deletes,
// binds, probes), opened on first use and again after a channel error.
// Calls take turns: amqp091 does not match concurrent synchronous replies
// on one channel.
type ctlChan struct {
	turn chan struct{} // holds a token while a call runs
	ch   *amqp.Channel // the open channel, nil when none; the turn's holder's
}

func newCtlChan() ctlChan { return ctlChan{turn: make(chan struct{}, 1)} }

// run runs fn on the channel, opening one if needed, and returns when fn
// does or ctx ends, whichever comes first. amqp091's synchronous methods take
// no context, and a broker can leave one unanswered for good (a cluster
// whose quorum queues could not elect leaders once left every queue.declare
// unanswered, and the calls of a whole test suite waited for them for ten
// minutes): fn runs on a goroutine of its own, and when ctx ends first, run
// returns ctx's error and leaves the channel to that goroutine, which
// closes it once fn returns (the connection's end returns it at the
// latest); the next call opens another. So fn must not write what its
// caller reads after an error, nor state shared beyond the call.
func (c *ctlChan) run(ctx context.Context, conn *amqp.Connection, fn func(ch *amqp.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.turn }()
	type result struct {
		ch  *amqp.Channel
		err error
	}
	done := make(chan result, 1)
	ch := c.ch
	go func() {
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = conn.Channel(); err != nil {
				done <- result{nil, err}
				return
			}
		}
		done <- result{ch, fn(ch)}
	}()
	finish := func(r result) error {
		c.ch = r.ch
		var ae *amqp.Error
		if errors.As(r.err, &ae) {
			// A channel exception (404 of a probe, 406 of a declare) closes
			// the channel on the broker at once, while amqp091 may not have
			// marked it closed yet: a frame sent on it meanwhile makes the
			// broker close the whole connection (504 CHANNEL_ERROR). Never
			// reuse it.
			c.ch = nil
		}
		return r.err
	}
	select {
	case r := <-done:
		return finish(r)
	case <-ctx.Done():
		select {
		case r := <-done: // answered as ctx ended: the outcome is known
			return finish(r)
		default:
		}
		c.ch = nil
		go func() {
			if r := <-done; r.ch != nil {
				_ = r.ch.Close()
			}
		}()
		return ctx.Err()
	}
}

// markerQueue returns the name of the connection's marker queue for stats
// barriers (see puller.barrier): a server-named, exclusive classic queue
// that disappears with the connection, declared on first use.
func (s *session) markerQueue(ctx context.Context) (string, error) {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	if s.marker != "" {
		return s.marker, nil
	}
	var name string
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclare("", false, false, true, false, nil)
		name = q.Name
		return err
	})
	if err != nil {
		return "", mapErr(ctx, "declare the stats marker queue", err)
	}
	s.marker = name
	return s.marker, nil
}

// declare makes sure queue's topology exists, once per connection.
func (s *session) declare(ctx context.Context, queue string, n names) error {
	_, err := s.declareFresh(ctx, queue, n)
	return err
}

// declareFresh is declare that also reports whether this call declared the
// topology (rather than finding it in the cache).
func (s *session) declareFresh(ctx context.Context, queue string, n names) (fresh bool, err error) {
	s.declMu.Lock()
	c := s.declared[queue]
	if c == nil {
		fresh = true
		c = &declCall{done: make(chan struct{})}
		s.declared[queue] = c
		s.declMu.Unlock()
		c.err = s.declareTopology(ctx, n)
		if c.err != nil {
			s.declMu.Lock()
			delete(s.declared, queue)
			s.declMu.Unlock()
		}
		close(c.done)
	} else {
		s.declMu.Unlock()
	}
	select {
	case <-c.done:
		return fresh, c.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// forget drops queue from the declaration cache, after a sign that its
// topology was deleted.
func (s *session) forget(queue string, n names) {
	s.declMu.Lock()
	defer s.declMu.Unlock()
	delete(s.declared, queue)
	delete(s.registries, n.markRegistry(false))
	delete(s.registries, n.markRegistry(true))
	prefix, levels := n.main+delayInfix, n.main+levelInfix
	for name := range s.delays {
		if strings.HasPrefix(name, prefix) || strings.HasPrefix(name, levels) {
			delete(s.delays, name)
		}
	}
	s.lv.forget(n)
}

func (s *session) declareTopology(ctx context.Context, n names) error {
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(n.dead, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
		if _, err := ch.QueueDeclare(n.dead, true, false, false, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(n.dead, "", n.dead, false, nil)
	})
	if err != nil && homeNodeDown(err) {
		// The dead-letter queue is a classic queue: it lives on one node of
		// a cluster. While that node is down it cannot be declared, but it
		// exists: the main queue (replicated) still works, and dead-lettering
		// fails, retryably, until the node is back.
		s.d.log.Warn("rabbitmq: the node holding a dead-letter queue is down; dead-lettering waits for it",
			slog.String("queue", n.dead), slog.Any("error", err))
		err = nil
	}
	if err == nil {
		err = s.withCtl(ctx, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(n.main, true, false, false, false, amqp.Table{
				"x-queue-type":           "quorum",
				"x-dead-letter-exchange": n.dead,
			})
			return err
		})
	}
	return mapErr(ctx, "declare queue "+n.main, err)
}

// homeNodeDown reports whether err is RabbitMQ refusing an operation on a
// classic queue whose node is down ("home node ... is down or
// inaccessible").
func homeNodeDown(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound && strings.Contains(ae.Reason, "is down or inaccessible")
}

// declareDelay makes sure the level-0 delay queue of ms exists and returns
// its name (see declareDelayAt).
func (s *session) declareDelay(ctx context.Context, queue string, n names, ms int64) (string, error) {
	return s.declareDelayAt(ctx, queue, n, 0, ms)
}

// declareDelayAt makes sure the delay queue of ms of level l exists, and
// for a level above 0 the level's queue it dead-letters to, and returns
// its name. Publishing does not renew a queue's x-expires lease, declaring
// does: the queue is declared again when its last declaration is older
// than redeclareDelayAfter.
func (s *session) declareDelayAt(ctx context.Context, queue string, n names, l int, ms int64) (string, error) {
	name := n.delayAt(l, ms)
	s.declMu.Lock()
	last, ok := s.delays[name]
	s.declMu.Unlock()
	if ok && time.Since(last) < redeclareDelayAfter {
		return name, nil
	}
	if l > 0 {
		// Its messages expire into the level's queue, which must exist:
		// a dead-lettered message that finds no queue is dropped.
		if err := s.declareLevel(ctx, queue, n, l); err != nil {
			return "", err
		}
	}
	start := time.Now()
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{
			"x-message-ttl":             ms,
			"x-expires":                 ms + delayExpiry.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": n.level(l),
		})
		return err
	})
	if err != nil {
		return "", mapErr(ctx, "declare delay queue "+name, err)
	}
	s.declMu.Lock()
	s.delays[name] = start
	s.declMu.Unlock()
	s.d.rememberBucket(queue, bucket{level: l, ms: ms})
	return name, nil
}

// bucket is one delay queue of a Fila queue: its level and length.
type bucket struct {
	level int
	ms    int64
}

func (d *Driver) rememberBucket(queue string, b bucket) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.delayBuckets[queue]
	if m == nil {
		m = map[bucket]struct{}{}
		d.delayBuckets[queue] = m
	}
	m[b] = struct{}{}
}

func (d *Driver) buckets(queue string) []bucket {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]bucket, 0, len(d.delayBuckets[queue]))
	for b := range d.delayBuckets[queue] {
		out = append(out, b)
	}
	return out
}

// publisher owns the session's publishing channel, in confirm mode.
type publisher struct {
	s   *session
	mu  sync.Mutex
	st  *pubChan
	seq atomic.Uint64
}

// pubChan is one incarnation of the publishing channel with its
// basic.return bookkeeping.
type pubChan struct {
	ch       *amqp.Channel
	done     chan struct{} // closed when the returns goroutine ends
	barrier  chan chan struct{}
	mu       sync.Mutex
	returned map[string]returned // CorrelationId -> its basic.return
}

// returned is what a basic.return said.
type returned struct {
	code uint16
	text string
}

// reset closes the publishing channel; the next publish opens a new one.
func (p *publisher) reset() {
	p.mu.Lock()
	st := p.st
	p.st = nil
	p.mu.Unlock()
	if st != nil {
		_ = st.ch.Close()
	}
}

func (p *publisher) get() (*pubChan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st != nil && !p.st.ch.IsClosed() {
		return p.st, nil
	}
	ch, err := p.s.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	st := &pubChan{ch: ch, done: make(chan struct{}), barrier: make(chan chan struct{}), returned: map[string]returned{}}
	returns := ch.NotifyReturn(make(chan amqp.Return))
	p.s.d.wg.Add(1)
	go st.handleReturns(p.s.d, returns)
	p.st = st
	return st, nil
}

// handleReturns records basic.returns. RabbitMQ sends a mandatory message's
// basic.return before its basic.ack, and amqp091 hands both over from one
// goroutine in that order, so once a publisher has its confirm, a barrier
// round trip through this goroutine guarantees that any return of its
// messages is recorded.
func (st *pubChan) handleReturns(d *Driver, returns chan amqp.Return) {
	defer d.wg.Done()
	defer close(st.done)
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				return
			}
			st.mu.Lock()
			st.returned[r.CorrelationId] = returned{code: r.ReplyCode, text: r.ReplyText}
			st.mu.Unlock()
		case b := <-st.barrier:
			close(b)
		}
	}
}

// pubItem is one message to publish.
type pubItem struct {
	exchange, key string
	msg           amqp.Publishing
	queue         string // the Fila queue, to forget its topology on a return
	// unroutable, when set, makes a basic.return of the message with
	// NO_ROUTE an answer rather than an error: publish sets it to whether
	// the message was returned so (a topic without subscriptions, see
	// TopicPublish).
	unroutable *bool
}

// publish sends items with publisher confirms and the mandatory flag, then
// waits for every confirm: nil means the broker stored them all. Nacked
// messages (the broker did not store them; RabbitMQ 3.10 nacks publishes to
// a quorum queue that is still starting) are published again a few times.
func (s *session) publish(ctx context.Context, items []pubItem) error {
	backoff := 20 * time.Millisecond
	for try := 0; ; try++ {
		nacked, err := s.publishOnce(ctx, items)
		if err != nil || len(nacked) == 0 {
			return err
		}
		if try >= 1 {
			// A channel that published to a quorum queue while it had no
			// leader (its node died) can go on being nacked after a new
			// leader is elected (RabbitMQ 3.10); a fresh channel is not.
			s.pub.reset()
		}
		if try == 6 {
			return fmt.Errorf("%w: %d of %d messages, %d times", ErrNacked, len(nacked), len(items), try+1)
		}
		again := make([]pubItem, len(nacked))
		for i, j := range nacked {
			again[i] = items[j]
		}
		items = again
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff *= 2
	}
}

// publishOnce publishes items and returns the indexes of the nacked ones.
func (s *session) publishOnce(ctx context.Context, items []pubItem) ([]int, error) {
	blocked, err := s.blockedState()
	if err != nil {
		return nil, err
	}
	st, err := s.pub.get()
	if err != nil {
		return nil, mapErr(ctx, "open publishing channel", err)
	}
	keys := make([]string, len(items))
	dcs := make([]*amqp.DeferredConfirmation, 0, len(items))
	defer func() {
		st.mu.Lock()
		for _, k := range keys {
			delete(st.returned, k)
		}
		st.mu.Unlock()
	}()
	for i := range items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		keys[i] = s.d.nonce + "-" + strconv.FormatUint(s.pub.seq.Add(1), 36)
		msg := items[i].msg
		msg.CorrelationId = keys[i]
		dc, err := st.ch.PublishWithDeferredConfirm(items[i].exchange, items[i].key, true, false, msg)
		if err != nil {
			return nil, mapErr(ctx, "publish", err)
		}
		dcs = append(dcs, dc)
	}
	var nacked []int
	for i, dc := range dcs {
		select {
		case <-dc.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-blocked:
			return nil, s.blockedErr()
		}
		if !dc.Acked() {
			if st.ch.IsClosed() || s.isDead() {
				return nil, fmt.Errorf("%w: the channel closed before the broker confirmed the publish", backend.ErrUnavailable)
			}
			nacked = append(nacked, i)
		}
	}
	b := make(chan struct{})
	select {
	case st.barrier <- b:
		select {
		case <-b:
		case <-st.done:
		}
	case <-st.done:
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, k := range keys {
		r, ok := st.returned[k]
		if u := items[i].unroutable; u != nil && (!ok || r.code == amqp.NoRoute) {
			*u = ok
			continue
		}
		if ok {
			if items[i].queue != "" {
				if n, err := s.d.names(items[i].queue); err == nil {
					s.forget(items[i].queue, n)
				}
			}
			return nil, fmt.Errorf("%w: message %s to %q: %s (%d)", ErrUnroutable, items[i].msg.MessageId, items[i].exchange+items[i].key, r.text, r.code)
		}
	}
	return nacked, nil
}
