package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/outagelog"
)

// Driver is a Fila driver over one RabbitMQ connection (reconnected
// automatically). It implements backend.Driver, DeadLetterer, StatsReader,
// QueueDeleter, DelayedReceiver, DeadImporter, Marker, Topics, Pinger and
// Namer and Prioritizer (not QueueLister nor MarkLister: AMQP 0-9-1 cannot
// list queues; its TopicSubscriptions returns ErrUnsupported). Build it
// with Open or New; share one per process.
type Driver struct {
	opts   Options
	log    *slog.Logger
	outage *outagelog.Log // the connection's outages

	nonce string        // tells this instance's receipts from others'
	scope string        // broker, vhost and prefix: instances that share queues
	seq   atomic.Uint64 // channel generations and consumer tags
	// nextNode is the index (in nodeURLs) of the node dialled first.
	nextNode atomic.Uint32

	mu      sync.Mutex
	sess    *session      // current connection; nil while reconnecting
	sessCh  chan struct{} // closed when sess is set; replaced when it is lost
	closed  bool
	closeCh chan struct{}
	pullers map[string]*puller
	// delayBuckets remembers, per Fila queue, the delay queues this instance
	// published to, so QueueStats can count their messages.
	delayBuckets map[string]map[bucket]struct{}
	// levels is what this instance knows of each Fila queue's priority
	// levels (see levels.go).
	levels map[string]*levelState
	// deadScans serializes this instance's dead-letter scans per queue (see
	// lockDeadScan).
	deadScans scanLocks
	// mgmt is the management API's client, nil without
	// Options.ManagementURL (management.go).
	mgmt *mgmt

	wg sync.WaitGroup // background goroutines

	creditGrace time.Duration // see creditGrace; tests lengthen it
	// beforeConsume, when set (by tests), runs in a consumer start just
	// before basic.consume.
	beforeConsume func()
	// afterRepublish, when set (by tests), runs in Retry and Dead between the
	// confirm of the copy and the ack of the original.
	afterRepublish func()
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.DeadLetterer = (*Driver)(nil)
	_ backend.StatsReader  = (*Driver)(nil)
	_ backend.QueueDeleter = (*Driver)(nil)
	_ backend.Pinger       = (*Driver)(nil)
	_ backend.Namer        = (*Driver)(nil)
)

// janitorTick is how often leases are checked for expiry and idle buffers
// for give-back.
const janitorTick = 50 * time.Millisecond

// New connects to RabbitMQ with o and returns the driver. The first
// connection is made before New returns, so a wrong URL or credentials fail
// here; later losses are repaired in the background.
func New(ctx context.Context, o Options) (*Driver, error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	m, err := newMgmt(o)
	if err != nil {
		return nil, err
	}
	var nb [6]byte
	_, _ = rand.Read(nb[:])
	d := &Driver{
		mgmt:         m,
		opts:         o,
		log:          o.Logger.With(slog.String("driver", "rabbitmq")),
		outage:       outagelog.New(o.Logger.With(slog.String("driver", "rabbitmq"))),
		nonce:        hex.EncodeToString(nb[:]),
		scope:        scopeOf(o),
		sessCh:       make(chan struct{}),
		closeCh:      make(chan struct{}),
		pullers:      map[string]*puller{},
		delayBuckets: map[string]map[bucket]struct{}{},
		levels:       map[string]*levelState{},
		creditGrace:  creditGrace,
	}
	type result struct {
		s   *session
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := d.dial()
		done <- result{s, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() {
			if r := <-done; r.s != nil {
				_ = r.s.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, d.redact(mapErr(ctx, "connect", r.err))
	}
	d.sess = r.s
	close(d.sessCh)
	register(d)
	d.wg.Add(2)
	go d.supervise(r.s)
	go d.janitor()
	return d, nil
}

// redact removes the URL's credentials from err's message (amqp091 may put
// parts of the URL, such as a key file's path, into its errors).
func (d *Driver) redact(err error) error {
	u, perr := url.Parse(d.opts.URL)
	if perr != nil {
		return err
	}
	return backend.RedactError(err, u)
}

// DriverName returns "rabbitmq".
func (d *Driver) DriverName() string { return "rabbitmq" }

// dial opens a connection and starts watching it.
func (d *Driver) dial() (*session, error) {
	urls := d.nodeURLs()
	start := int(d.nextNode.Load())
	var firstErr error
	for i := range urls {
		at := (start + i) % len(urls)
		cfg := d.dialConfig()
		if cfg.TLSClientConfig != nil {
			cfg.TLSClientConfig = cfg.TLSClientConfig.Clone()
		}
		conn, err := amqp.DialConfig(urls[at], cfg)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		// After this connection is lost, the next node is tried first: the
		// lost one may have died.
		d.nextNode.Store(uint32((at + 1) % len(urls)))
		s := newSession(d, conn)
		d.wg.Add(1)
		go s.watch()
		return s, nil
	}
	return nil, firstErr
}

// nodeURLs returns the URL of every node the driver may connect to: the
// URL's own host first, then Options.Hosts.
func (d *Driver) nodeURLs() []string {
	if len(d.opts.Hosts) == 0 {
		return []string{d.opts.URL}
	}
	u, err := url.Parse(d.opts.URL)
	if err != nil {
		return []string{d.opts.URL}
	}
	out := []string{d.opts.URL}
	for _, h := range d.opts.Hosts {
		nu := *u
		nu.Host = h
		out = append(out, nu.String())
	}
	return out
}

// supervise reconnects with exponential backoff whenever the connection is
// lost, until the driver closes. An outage is logged with a bounded number
// of lines (see package outagelog): a Warn when the connection is lost, the
// failed attempts at Debug with a Warn reminder after 1, 2, 4… minutes, an
// Info when it is back. Pullers reopen their channels, redeclare
// their topology and restart their consumers on the new connection when a
// Receive needs them.
func (d *Driver) supervise(s *session) {
	defer d.wg.Done()
	for {
		select {
		case <-s.dead:
		case <-d.closeCh:
			return
		}
		d.mu.Lock()
		if d.sess == s {
			d.sess = nil
			d.sessCh = make(chan struct{})
		}
		d.mu.Unlock()
		d.outage.Down("rabbitmq: connection lost; reconnecting", slog.Any("error", d.redact(s.err)))
		backoff := 100 * time.Millisecond
		for {
			select {
			case <-d.closeCh:
				return
			default:
			}
			ns, err := d.dial()
			if err == nil {
				d.mu.Lock()
				if d.closed {
					d.mu.Unlock()
					_ = ns.conn.Close()
					return
				}
				d.sess = ns
				close(d.sessCh)
				d.mu.Unlock()
				d.outage.Up("rabbitmq: reconnected")
				s = ns
				break
			}
			d.outage.Down("rabbitmq: reconnect failed", slog.Any("error", d.redact(err)), slog.Duration("retry_in", backoff))
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-d.closeCh:
				t.Stop()
				return
			}
			backoff = min(backoff*2, d.opts.ReconnectMax)
		}
	}
}

// session returns the live connection, waiting for a reconnection up to
// wait (0: until ctx ends).
func (d *Driver) session(ctx context.Context, wait time.Duration) (*session, error) {
	var timeout <-chan time.Time
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, backend.ErrClosed
		}
		s, ready := d.sess, d.sessCh
		d.mu.Unlock()
		if s != nil && !s.isDead() {
			return s, nil
		}
		if timeout == nil && wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ready:
		case <-time.After(10 * time.Millisecond): // the supervisor may not have noticed yet
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.closeCh:
			return nil, backend.ErrClosed
		case <-timeout:
			return nil, fmt.Errorf("%w: no connection after waiting %v", backend.ErrUnavailable, wait)
		}
	}
}

func (d *Driver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// puller returns the consumer side of queue, creating it on first use.
func (d *Driver) puller(queue string) (*puller, error) {
	n, err := d.names(queue)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, backend.ErrClosed
	}
	p := d.pullers[queue]
	if p == nil {
		p = newPuller(d, queue, n)
		d.pullers[queue] = p
	}
	return p, nil
}

// existingPuller returns queue's puller if a Receive made one.
func (d *Driver) existingPuller(queue string) *puller {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pullers[queue]
}

// janitor expires leases and parks idle consumers.
func (d *Driver) janitor() {
	defer d.wg.Done()
	t := time.NewTicker(janitorTick)
	defer t.Stop()
	for {
		select {
		case <-d.closeCh:
			return
		case now := <-t.C:
			d.mu.Lock()
			ps := make([]*puller, 0, len(d.pullers))
			for _, p := range d.pullers {
				ps = append(ps, p)
			}
			d.mu.Unlock()
			for _, p := range ps {
				p.tick(now)
			}
		}
	}
}

// Ping checks that the connection is up and the broker answers.
func (d *Driver) Ping(ctx context.Context) error {
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return err
	}
	return mapErr(ctx, "ping", s.withCtl(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil)
	}))
}

// Close gives the messages buffered for Receive back to their queues, then
// closes the connection. It never acks: leased messages return to their
// queues when the connection closes (RabbitMQ requeues a closed channel's
// unacknowledged messages and counts the delivery in x-delivery-count).
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.closeCh)
	unregister(d)
	d.mgmt.close()
	ps := make([]*puller, 0, len(d.pullers))
	for _, p := range d.pullers {
		ps = append(ps, p)
	}
	s := d.sess
	d.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.shutdown(ctx, s)
		}()
	}
	wg.Wait()
	cancel()
	if s != nil {
		_ = s.conn.Close()
	}
	d.wg.Wait()
	return nil
}

// instances are the open drivers of this process by scope, so that
// QueueDelete can make every instance that uses the queue forget it at once
// (instances in other processes learn of it from the broker's basic.cancel).
var instances = struct {
	mu sync.Mutex
	m  map[string]map[*Driver]struct{}
}{m: map[string]map[*Driver]struct{}{}}

// scopeOf names the queues a driver with o sees: the broker address, the
// vhost and the prefix. Two URLs naming one broker differently (localhost
// and 127.0.0.1) make two scopes; the broker's cancel notification covers
// that case too, a moment later.
func scopeOf(o Options) string {
	u, err := amqp.ParseURI(o.URL)
	if err != nil {
		return o.URL + "\x00" + o.Prefix
	}
	return fmt.Sprintf("%s:%d/%s\x00%s", u.Host, u.Port, u.Vhost, o.Prefix)
}

func register(d *Driver) {
	instances.mu.Lock()
	defer instances.mu.Unlock()
	m := instances.m[d.scope]
	if m == nil {
		m = map[*Driver]struct{}{}
		instances.m[d.scope] = m
	}
	m[d] = struct{}{}
}

func unregister(d *Driver) {
	instances.mu.Lock()
	defer instances.mu.Unlock()
	delete(instances.m[d.scope], d)
	if len(instances.m[d.scope]) == 0 {
		delete(instances.m, d.scope)
	}
}

// broadcastDeleted tells every open instance of this process in d's scope
// (d included) that queue was deleted.
func (d *Driver) broadcastDeleted(queue string, n names) {
	instances.mu.Lock()
	ds := make([]*Driver, 0, len(instances.m[d.scope])+1)
	for o := range instances.m[d.scope] {
		ds = append(ds, o)
	}
	instances.mu.Unlock()
	self := false
	for _, o := range ds {
		self = self || o == d
		o.forgetQueue(queue, n)
	}
	if !self {
		d.forgetQueue(queue, n)
	}
}

// forgetQueue drops what this instance knows about queue after it was
// deleted: its declarations (the next call declares the topology again),
// the delay queues stats count, its levels, and its consumer channel with
// the buffered messages and leases on it (settling those returns
// ErrLeaseLost).
func (d *Driver) forgetQueue(queue string, n names) {
	d.mu.Lock()
	delete(d.delayBuckets, queue)
	delete(d.levels, queue)
	s := d.sess
	p := d.pullers[queue]
	d.mu.Unlock()
	if s != nil {
		s.forget(queue, n)
	}
	if p != nil {
		p.dropChannel(p.current())
	}
}
