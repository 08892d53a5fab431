package rabbitmq

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Priorities (backend.Prioritizer). RabbitMQ 3.10's quorum queues have no
// message priorities, so a Fila queue Q has one quorum queue per level:
// level 0 stays in its main queue P.Q, level L (1 to 3) has P.Q:pL,
// declared by the first use of the level (an enqueue, a retry, a replay)
// with its delay queues P.Q:pL:MS beside it. A queue that never uses a
// level has none of them, and its receives take the path they always took.
//
// The consumer side must hand out a higher level first among the ready
// messages, including a message enqueued a moment before the Receive call
// while level 0 has a backlog and messages already pushed to the client.
// A consumer on a level queue cannot promise that: a message the broker
// pushed to it may still be on its way when the call looks at its buffer.
// So the levels above 0 have no consumer. A Receive on a queue with levels
// first asks each level queue, highest first, for its ready count (a
// passive declare, answered from the queue leader's state, which holds
// every enqueue that was confirmed) and takes what is there with
// basic.get, on the puller's channel, where its lease lives like a pushed
// delivery's; only then does it hand out level 0 from the consumer's
// buffer. The count and the get are ordered after every confirmed enqueue,
// so nothing ready at a higher level is passed over. A Receive that finds
// nothing waits on the level-0 consumer as before, and looks at the levels
// again when this driver publishes to one of them and otherwise every
// levelPoll.
//
// A process learns of the levels a queue uses from its own publishes and,
// for the others', by probing the queue's router and then the level
// queues' names (a passive declare each) at most every levelProbeEvery
// while it receives from the queue: one probe for a queue without levels
// nor subscriptions.
//
// Topic copies take their level through the subscription's router
// P.Q:levels (see topic.go): a headers exchange that routes a message
// whose hPriority header is L to P.Q:pL, when Q has that level's queue,
// and every other message to its alternate exchange P.Q:levels:0, bound to
// P.Q. A copy whose level the subscription has no queue for yet lands in
// P.Q; the subscription's consumer hands it out with its level and
// declares the level's queue, so the next copies of that level go to it.

// Priorities reports true: the driver keeps one quorum queue per level and
// takes the higher levels first.
func (d *Driver) Priorities() bool { return true }

var _ backend.Prioritizer = (*Driver)(nil)

const (
	// levelPoll is how often a Receive waiting on a queue with levels
	// looks at them for messages other processes published (this process's
	// publishes wake it at once). All the waiting Receive calls of a
	// puller share one look.
	levelPoll = 100 * time.Millisecond
	// levelProbeEvery is how often a receiving process probes for level
	// queues it does not know of.
	levelProbeEvery = time.Second
)

// levelState is what a driver knows of one Fila queue's levels.
type levelState struct {
	mask     uint8     // bit l: P.Q:pl exists (declared here or found by a probe)
	probedAt time.Time // the last probe for the other levels
	probing  bool      // a probe runs now
	ensuring uint8     // levels ensureLevelAsync declares now
}

// allLevels is the mask of every level above 0.
const allLevels = uint8(1<<(backend.MaxPriority+1)) - 2

// levelMask returns the levels above 0 queue is known to use.
func (d *Driver) levelMask(queue string) uint8 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.levels[queue]; st != nil {
		return st.mask
	}
	return 0
}

// noteLevels records that queue's levels in mask have queues, and tells
// the queue's waiting Receive calls to look at them.
func (d *Driver) noteLevels(queue string, mask uint8) {
	if mask == 0 {
		return
	}
	d.mu.Lock()
	st := d.levels[queue]
	if st == nil {
		st = &levelState{}
		d.levels[queue] = st
	}
	st.mask |= mask
	p := d.pullers[queue]
	d.mu.Unlock()
	if p != nil {
		p.levelBell()
	}
}

// dropLevel forgets level l of queue: its queue was not found.
func (d *Driver) dropLevel(queue string, l int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.levels[queue]; st != nil {
		st.mask &^= 1 << l
	}
}

// levelMaskOf is the mask of the levels of msgs above 0.
func levelMaskOf(msgs []backend.Message) uint8 {
	var m uint8
	for i := range msgs {
		if l := msgs[i].Priority; l > 0 && l <= backend.MaxPriority {
			m |= 1 << l
		}
	}
	return m
}

// maybeDiscover probes, in the background, for the level queues of queue
// this driver does not know of, unless a probe ran in the last
// levelProbeEvery or runs now.
func (d *Driver) maybeDiscover(queue string, n names) {
	if !d.claimProbe(queue) {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		go func() {
			select {
			case <-d.closeCh:
				cancel()
			case <-ctx.Done():
			}
		}()
		d.probeLevels(ctx, queue, n)
	}()
}

// discoverLevels probes for the level queues of queue this driver does
// not know of, unless a probe ran in the last levelProbeEvery or runs now,
// and returns the levels known.
func (d *Driver) discoverLevels(ctx context.Context, queue string, n names) (uint8, error) {
	if d.claimProbe(queue) {
		if err := d.probeLevels(ctx, queue, n); err != nil {
			return 0, err
		}
	}
	return d.levelMask(queue), nil
}

// claimProbe reports whether a probe of queue's levels is due, and if so
// marks it started.
func (d *Driver) claimProbe(queue string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.levels[queue]
	if st == nil {
		st = &levelState{}
		d.levels[queue] = st
	}
	if st.mask == allLevels || st.probing || time.Since(st.probedAt) < levelProbeEvery {
		return false
	}
	st.probing = true
	return true
}

// probeLevels looks for the level queues of queue not known yet, with a
// passive declare of each name. Every level queue is declared after the
// queue's router (declareLevel), so a queue without a router has none: a
// queue that never used a level costs one probe.
func (d *Driver) probeLevels(ctx context.Context, queue string, n names) error {
	known := d.levelMask(queue)
	var found uint8
	err := func() error {
		s, err := d.session(ctx, d.opts.ReconnectWait)
		if err != nil {
			return err
		}
		if known == 0 {
			ok, err := s.exchangeExists(ctx, n.router())
			if err != nil || !ok {
				return err
			}
		}
		for l := 1; l <= backend.MaxPriority; l++ {
			if known&(1<<l) != 0 {
				continue
			}
			ok, err := s.queueExists(ctx, n.level(l))
			if err != nil {
				return err
			}
			if ok {
				found |= 1 << l
			}
		}
		return nil
	}()
	d.mu.Lock()
	if st := d.levels[queue]; st != nil {
		st.probing = false
		if err == nil {
			st.probedAt = time.Now()
		}
	}
	d.mu.Unlock()
	if err != nil {
		if !d.isClosed() && ctx.Err() == nil {
			d.log.Debug("rabbitmq: probing a queue's level queues failed", slog.String("queue", queue), slog.Any("error", err))
		}
		return err
	}
	d.noteLevels(queue, found)
	return nil
}

// existingLevels probes each level queue of n (a passive declare each,
// whatever any cache says) and returns the mask of those that exist.
func (s *session) existingLevels(ctx context.Context, n names) (uint8, error) {
	var m uint8
	for l := 1; l <= backend.MaxPriority; l++ {
		ok, err := s.queueExists(ctx, n.level(l))
		if err != nil {
			return 0, err
		}
		if ok {
			m |= 1 << l
		}
	}
	return m, nil
}

// queueExists reports whether the queue name exists, by a passive declare
// on the session's probe channel (a 404 closes it; the next probe opens
// another).
func (s *session) queueExists(ctx context.Context, name string) (bool, error) {
	err := s.withProbe(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		return err
	})
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return false, nil
	}
	if err != nil {
		return false, mapErr(ctx, "probe queue "+name, err)
	}
	return true, nil
}

// exchangeExists reports whether the exchange name exists, as
// queueExists does for a queue.
func (s *session) exchangeExists(ctx context.Context, name string) (bool, error) {
	err := s.withProbe(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(name, amqp.ExchangeHeaders, true, false, false, false, nil)
	})
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return false, nil
	}
	if err != nil {
		return false, mapErr(ctx, "probe exchange "+name, err)
	}
	return true, nil
}

// levelCache is a session's record of the level topology it declared.
type levelCache struct {
	mu      sync.Mutex
	levels  map[string]bool // level queues declared, by name
	routers map[string]bool // routers declared, by name
}

func (c *levelCache) has(m *map[string]bool, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return (*m)[name]
}

func (c *levelCache) set(m *map[string]bool, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = map[string]bool{}
	}
	(*m)[name] = true
}

// forget drops the records of n's level topology.
func (c *levelCache) forget(n names) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.routers, n.router())
	for l := 1; l <= backend.MaxPriority; l++ {
		delete(c.levels, n.level(l))
	}
}

// declareRouter makes sure queue's router exists, once per connection:
// the alternate exchange P.Q:levels:0 bound to the main queue, and the
// headers exchange P.Q:levels that uses it. Declaring them again is
// harmless, so connections race freely.
func (s *session) declareRouter(ctx context.Context, queue string, n names) error {
	if s.lv.has(&s.lv.routers, n.router()) {
		return nil
	}
	if err := s.declare(ctx, queue, n); err != nil {
		return err
	}
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(n.routerAE(), amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
		if err := ch.QueueBind(n.main, "", n.routerAE(), false, nil); err != nil {
			return err
		}
		return ch.ExchangeDeclare(n.router(), amqp.ExchangeHeaders, true, false, false, false,
			amqp.Table{"alternate-exchange": n.routerAE()})
	})
	if err != nil {
		return mapErr(ctx, "declare exchanges "+n.router()+" and "+n.routerAE(), err)
	}
	s.lv.set(&s.lv.routers, n.router())
	return nil
}

// declareLevel makes sure level l's queue of queue exists, bound to the
// queue's router, once per connection, and records that the queue uses
// the level.
func (s *session) declareLevel(ctx context.Context, queue string, n names, l int) error {
	name := n.level(l)
	if s.lv.has(&s.lv.levels, name) {
		return nil
	}
	if err := s.declareRouter(ctx, queue, n); err != nil {
		return err
	}
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{
			"x-queue-type":           "quorum",
			"x-dead-letter-exchange": n.dead,
		})
		if err != nil {
			return err
		}
		return ch.QueueBind(name, "", n.router(), false, amqp.Table{"x-match": "all", hPriority: int64(l)})
	})
	if err != nil {
		return mapErr(ctx, "declare queue "+name, err)
	}
	s.lv.set(&s.lv.levels, name)
	s.d.noteLevels(queue, 1<<l)
	return nil
}

// ensureLevelAsync declares level l of queue in the background if the
// driver does not know of it: a subscription's consumer found a topic copy
// of that level in the main queue, which P.Q:levels sends there while the
// level has no queue.
func (d *Driver) ensureLevelAsync(queue string, n names, l int) {
	if l <= 0 || d.levelMask(queue)&(1<<l) != 0 {
		return
	}
	d.mu.Lock()
	st := d.levels[queue]
	if st == nil {
		st = &levelState{}
		d.levels[queue] = st
	}
	if d.closed || st.ensuring&(1<<l) != 0 {
		d.mu.Unlock()
		return
	}
	st.ensuring |= 1 << l
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := func() error {
			s, err := d.session(ctx, d.opts.ReconnectWait)
			if err != nil {
				return err
			}
			return s.declareLevel(ctx, queue, n, l)
		}()
		d.mu.Lock()
		if st := d.levels[queue]; st != nil {
			st.ensuring &^= 1 << l
		}
		d.mu.Unlock()
		if err != nil && !d.isClosed() {
			d.log.Warn("rabbitmq: declaring a level queue for topic copies failed", slog.String("queue", queue), slog.Int("level", l), slog.Any("error", err))
		}
	}()
}

// levelBell tells the puller's waiting Receive calls to look at the levels
// at once: this driver published to one of them, or learned of one.
func (p *puller) levelBell() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.levelHint++
	if p.waiters > 0 {
		p.broadcastLocked()
	}
}

// levelBell rings queue's puller's bell, if it has one.
func (d *Driver) levelBell(queue string) {
	if p := d.existingPuller(queue); p != nil {
		p.levelBell()
	}
}

// takeLevels takes up to want ready messages of the levels in mask,
// highest first, and leases them (see the comment at the top of this
// file). more reports that a level still held messages when want was
// reached. A message that reached its level queue before its run-at (a
// delay rounded down to its bucket, or a delayed topic copy) is moved to
// the level's delay queue instead, as hop does for level 0.
func (p *puller) takeLevels(ctx context.Context, mask uint8, want int, lease time.Duration) (out []backend.Delivery, more bool, err error) {
	s, err := p.d.session(ctx, p.d.opts.ReconnectWait)
	if err != nil {
		return nil, false, err
	}
	p.mu.Lock()
	p.levelCheckAt = time.Now()
	p.mu.Unlock()
	var held []heldGet
	for l := backend.MaxPriority; l >= 1 && !more; l-- {
		if mask&(1<<l) == 0 {
			continue
		}
		name := p.n.level(l)
		ready, found, err := p.countLevel(ctx, s, name)
		if err != nil {
			p.release(held)
			return nil, false, err
		}
		if !found {
			p.d.dropLevel(p.queue, l)
			continue
		}
		for ready > 0 {
			if len(held) >= want {
				more = true
				break
			}
			h, ok, err := p.getHeld(ctx, name, false)
			if err != nil {
				p.release(held)
				return nil, false, err
			}
			if !ok {
				break
			}
			ready = int(h.e.dv.MessageCount) // what the queue holds after this one
			if runAt := intHeader(h.e.dv.Headers, hRunAt); runAt > time.Now().UnixMilli() {
				p.d.wg.Add(1)
				go p.hop(h.cs, h.e, time.UnixMilli(runAt))
				continue
			}
			held = append(held, h)
		}
	}
	return p.lease(held, lease), more, nil
}

// countLevel returns the ready count of the level queue name, from a
// passive declare on the puller's count channel, and whether it exists. The
// count channel is not the consumer's: a passive declare of a queue that
// was deleted meanwhile closes its channel, and the consumer's holds the
// leases.
func (p *puller) countLevel(ctx context.Context, s *session, name string) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	p.countMu.Lock()
	defer p.countMu.Unlock()
	if p.countCh == nil || p.countCh.IsClosed() || p.countSess != s {
		if p.countCh != nil {
			_ = p.countCh.Close()
		}
		ch, err := s.conn.Channel()
		if err != nil {
			p.countCh = nil
			return 0, false, mapErr(ctx, "open channel", err)
		}
		p.countCh, p.countSess = ch, s
	}
	q, err := p.countCh.QueueDeclarePassive(name, true, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) {
		p.countCh = nil // closed by the broker; never reused (see withCtl)
		if ae.Code == amqp.NotFound {
			return 0, false, nil
		}
	}
	if err != nil {
		return 0, false, mapErr(ctx, "count "+name, err)
	}
	return q.Messages, true, nil
}
