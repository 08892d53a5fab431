package memory

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

func init() {
	fila.Register("mem", Open)
}

// Broker is an in-process message broker holding any number of queues.
// Drivers opened from one Broker share its queues.
type Broker struct {
	clock Clock

	mu     sync.Mutex
	queues map[string]*queue
	// changed is closed and replaced whenever a message may have become
	// receivable, waking blocked receivers.
	changed chan struct{}
	seq     int64
	tokens  int64
	// marks holds each queue's marks (backend.Marker): name → expiry, the
	// zero time for none.
	marks map[string]map[string]time.Time
}

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Clock is the source of time; default RealClock.
	Clock Clock
}

// NewBroker returns an empty broker.
func NewBroker(opts BrokerOptions) *Broker {
	if opts.Clock == nil {
		opts.Clock = RealClock
	}
	return &Broker{clock: opts.Clock, queues: map[string]*queue{}, marks: map[string]map[string]time.Time{}, changed: make(chan struct{})}
}

// Open returns a new driver instance connected to b. Wrap it with fila.New.
func (b *Broker) Open() *Driver {
	return &Driver{b: b, closed: make(chan struct{})}
}

// Clock returns the broker's clock.
func (b *Broker) Clock() Clock { return b.clock }

var named struct {
	sync.Mutex
	brokers map[string]*Broker
}

// Named returns the process-wide broker of that name, creating it with the
// real clock on first use. mem://NAME URLs open drivers on it; mem:// uses
// the name "default".
func Named(name string) *Broker {
	named.Lock()
	defer named.Unlock()
	if named.brokers == nil {
		named.brokers = map[string]*Broker{}
	}
	b := named.brokers[name]
	if b == nil {
		b = NewBroker(BrokerOptions{})
		named.brokers[name] = b
	}
	return b
}

// Open opens a driver from a mem:// URL (the backend.Opener fila.Open uses
// for the mem scheme): mem://NAME opens a driver on Named(NAME), mem:// on
// Named("default"). The context and options are not used: there is nothing
// to connect to.
func Open(_ context.Context, u *url.URL, _ backend.OpenOptions) (backend.Driver, error) {
	p := backend.NewURLParams(u)
	if err := p.Done(); err != nil {
		return nil, err
	}
	name := u.Host + strings.TrimSuffix(u.Path, "/")
	if name == "" {
		name = "default"
	}
	return Named(name).Open(), nil
}

// wakeLocked wakes every blocked receiver. b.mu must be held.
func (b *Broker) wakeLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *Broker) queueLocked(name string) *queue {
	q := b.queues[name]
	if q == nil {
		q = &queue{msgs: map[string]*msg{}, dedup: map[string]string{}}
		b.queues[name] = q
	}
	return q
}

type queue struct {
	msgs  map[string]*msg   // pending: ready, delayed and leased
	dedup map[string]string // dedup key → id of the pending holder
	dead  []*deadEntry      // oldest first
}

type msg struct {
	backend.Message
	seq       int64
	due       time.Time // when ready (unleased) messages may be claimed
	attempts  int
	token     string // current receipt; empty when not leased
	deadline  time.Time
	lastError string
}

type deadEntry struct {
	backend.DeadLetter
	seq int64
}

// receivableAt is when m can next be claimed: its run-at, or for a leased
// message its deadline — but never before its run-at, which a message taken
// early by ReceiveDelayed keeps.
func (m *msg) receivableAt() time.Time {
	if m.token != "" && m.deadline.After(m.due) {
		return m.deadline
	}
	return m.due
}
