package rabbitmq

import (
	"context"
	"errors"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Topics (contract: fan-out). A topic T is two durable exchanges:
//
//   - P.T:topic, a fanout exchange, the entry point: every publish goes to
//     it, one basic.publish per message, with the message's kind as routing
//     key. A subscription without a kind pattern binds its queue's router
//     P.Q:levels to it (key ""): it takes every message.
//   - P.T:route, a topic exchange bound to P.T:topic (an exchange-to-
//     exchange binding, key ""), so it sees every publish and routes it by
//     its key, the kind, in AMQP topic syntax (backend.KindMatch agrees).
//     A subscription with patterns has an exchange of its own, P.Q:sub:H
//     (durable, auto-delete, fanout; names.go), bound to P.T:route once
//     per pattern (the pattern as binding key) and bound itself to the
//     queue's router.
//
// The router (levels.go) puts a copy into the subscription's queue of the
// copy's level: P.Q:pL for a message of level L whose queue exists, P.Q
// otherwise, through its alternate exchange P.Q:levels:0. Subscriptions
// made before levels bound the main queue itself, and get every copy there
// (with its level, but behind level 0's backlog) until subscribed again:
// TopicSubscribe binds the router and removes the main queue's binding.
//
// The broker stores the copies, one per queue whatever the number of
// bindings that match (RabbitMQ collects a publish's destination queues
// as a set). The copies are identical, so a topic publish carries the
// marker header hTopic, and the driver gives each copy its own id
// (backend.CopyID) when it reads the delivery from its queue (see adopt).
//
// The subscription's own exchange is what lets TopicUnsubscribe end it
// without knowing its patterns (AMQP cannot list bindings): deleting the
// exchange deletes every binding to and from it. Being auto-delete, it
// also goes by itself when QueueDelete deletes the queue's router, which
// removes its last binding as a source.
//
// P.T:topic is what the driver declared before it routed by kind, and an
// exchange's type cannot change: keeping it as the entry point keeps
// existing subscriptions (bound to it with "") and publishers working.
//
// A delayed message goes to the exchange at once, with its run-at: each
// subscription's main queue gets its copy now, and the subscription's
// consumer moves the copy to its own delay queue as it does for any message
// that arrives before its run-at (see hop in consume.go). So a subscription
// made during the delay does not get the message, as the contract says, and
// the delay costs each subscription one republish. Nothing after the
// routing reads the routing key: hops, retries and dead letters publish
// through the default exchange or P.Q:dead (a fanout).

var _ backend.Topics = (*Driver)(nil)

// topicSuffix ends a topic's fanout exchange name, routeSuffix its topic
// exchange's. Queue names derived from a Fila queue (names.go) never end
// with them, and a Fila queue's only exchanges are P.Q:dead and
// P.Q:sub:H, so topic exchanges collide with nothing. Both suffixes have
// the same length: topicExchanges checks one name for both.
const (
	topicSuffix = ":topic"
	routeSuffix = ":route"
)

// topicNames are the broker names of one topic.
type topicNames struct {
	fanout string // the entry point, P.T:topic
	route  string // the topic exchange behind it, P.T:route
}

// topicExchanges returns the names of topic's exchanges.
func (d *Driver) topicExchanges(topic string) (topicNames, error) {
	if topic == "" {
		return topicNames{}, backend.Invalidf("empty topic name")
	}
	base := d.opts.Prefix + "." + topic
	name := base + topicSuffix
	if len(name) > maxNameLen {
		return topicNames{}, backend.Invalidf("topic %q: its RabbitMQ exchange name would be %d bytes; RabbitMQ's limit is %d (use a shorter prefix or topic name)", topic, len(name), maxNameLen)
	}
	return topicNames{fanout: name, route: base + routeSuffix}, nil
}

// declareTopic makes sure topic's exchanges and the binding between them
// exist, once per connection. Declaring them again is harmless, so
// connections race freely.
func (s *session) declareTopic(ctx context.Context, tn topicNames) error {
	s.declMu.Lock()
	ok := s.topics[tn.fanout]
	s.declMu.Unlock()
	if ok {
		return nil
	}
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(tn.fanout, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
		if err := ch.ExchangeDeclare(tn.route, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return err
		}
		return ch.ExchangeBind(tn.route, "", tn.fanout, false, nil)
	})
	if err != nil {
		return mapErr(ctx, "declare topic exchanges "+tn.fanout+" and "+tn.route, err)
	}
	s.declMu.Lock()
	s.topics[tn.fanout] = true
	s.declMu.Unlock()
	return nil
}

// forgetTopic drops tn from the declaration cache.
func (s *session) forgetTopic(tn topicNames) {
	s.declMu.Lock()
	delete(s.topics, tn.fanout)
	s.declMu.Unlock()
}

// TopicSubscribe declares queue's topology as its first use does, with its
// router (levels.go), declares topic's exchanges, and binds queue: without
// a pattern its router to the fanout exchange; with one, the queue's
// subscription exchange to the topic exchange, keyed by the pattern, and
// that exchange to the router. It removes the binding of the main queue
// itself that drivers before levels made (a copy of a level would reach
// the queue twice). Binding twice is not an error, nor is unbinding what
// is not bound.
func (d *Driver) TopicSubscribe(ctx context.Context, topic, queue, pattern string) error {
	tn, err := d.topicExchanges(topic)
	if err != nil {
		return err
	}
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		if err := s.declareRouter(ctx, queue, n); err != nil {
			return err
		}
		if err := s.declareTopic(ctx, tn); err != nil {
			return err
		}
		err := s.withCtl(ctx, func(ch *amqp.Channel) error {
			if pattern == "" {
				if err := ch.ExchangeBind(n.router(), "", tn.fanout, false, nil); err != nil {
					return err
				}
				return ch.QueueUnbind(n.main, "", tn.fanout, nil)
			}
			sub := n.topicSub(topic)
			// Durable: its bindings (both ends durable) outlive a broker
			// restart, as the queue does. Auto-delete: it goes with its
			// last binding as a source, the one to the router, when the
			// queue's topology is deleted. Bound to the router first, so
			// that a failure between the two bindings leaves nothing
			// routed to it.
			if err := ch.ExchangeDeclare(sub, amqp.ExchangeFanout, true, true, false, false, nil); err != nil {
				return err
			}
			if err := ch.ExchangeBind(n.router(), "", sub, false, nil); err != nil {
				return err
			}
			if err := ch.QueueUnbind(n.main, "", sub, nil); err != nil {
				return err
			}
			return ch.ExchangeBind(sub, pattern, tn.route, false, nil)
		})
		var ae *amqp.Error
		if try == 0 && errors.As(err, &ae) && ae.Code == amqp.NotFound {
			// The queue, an exchange of the topic or the subscription's
			// exchange was deleted since this connection declared it
			// (another process deleted the queue or unsubscribed it):
			// declare them again.
			s.forget(queue, n)
			s.forgetTopic(tn)
			continue
		}
		return mapErr(ctx, "subscribe "+queue+" to topic "+topic, err)
	}
}

// TopicUnsubscribe ends queue's subscription to topic, every pattern of
// it: it deletes the queue's subscription exchange (with every binding to
// and from it) and removes the bindings of the queue's router, and of its
// main queue (made before levels), to the topic's fanout exchange. The
// queue stays (the portable layer deletes it). A binding, exchange or
// queue that does not exist is not an error: each step runs on a channel
// of its own, which the broker closes when it answers 404.
func (d *Driver) TopicUnsubscribe(ctx context.Context, topic, queue string) error {
	tn, err := d.topicExchanges(topic)
	if err != nil {
		return err
	}
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	for _, step := range []func(ch *amqp.Channel) error{
		func(ch *amqp.Channel) error { return ch.ExchangeDelete(n.topicSub(topic), false, false) },
		func(ch *amqp.Channel) error { return ch.ExchangeUnbind(n.router(), "", tn.fanout, false, nil) },
		func(ch *amqp.Channel) error { return ch.QueueUnbind(n.main, "", tn.fanout, nil) },
	} {
		if err := s.oneShot(ctx, step); err != nil {
			return mapErr(ctx, "unsubscribe "+queue+" from topic "+topic, err)
		}
	}
	return nil
}

// oneShot runs fn on a channel of its own, closed after it; a 404 is not
// an error.
func (s *session) oneShot(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	err = fn(ch)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return nil
	}
	return err
}

// TopicSubscriptions lists topic's subscriptions from its exchanges'
// bindings, which AMQP 0-9-1 cannot list: it asks the management API
// (Options.ManagementURL), and without it returns fila.ErrUnsupported.
func (d *Driver) TopicSubscriptions(ctx context.Context, topic string) ([]backend.Subscription, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	tn, err := d.topicExchanges(topic)
	if err != nil {
		return nil, err
	}
	if d.mgmt == nil {
		return nil, fromManagement("subscription listing", "a subscription is bindings, which AMQP 0-9-1 cannot list")
	}
	fan, err := d.mgmt.bindingsFrom(ctx, tn.fanout)
	if err != nil {
		return nil, err
	}
	route, err := d.mgmt.bindingsFrom(ctx, tn.route)
	if err != nil {
		return nil, err
	}
	return d.subscriptionsFromBindings(fan, route), nil
}

// TopicPublish publishes each message once to topic's fanout exchange,
// keyed by its kind, persistent and mandatory, with publisher confirms, as
// Enqueue publishes to a queue; a delayed message carries its run-at, and
// a message of a level its hPriority header, by which each subscription's
// router picks the queue (see the comment at the top of this file). It returns 0 when the broker
// returned every message unroutable (NO_ROUTE: no subscription takes its
// kind, through either exchange, and nothing was stored), and -1
// otherwise: the broker does not say how many queues a message was routed
// to, only that there was at least one.
func (d *Driver) TopicPublish(ctx context.Context, topic string, msgs []backend.Message) (int, error) {
	tn, err := d.topicExchanges(topic)
	if err != nil {
		return 0, err
	}
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return 0, err
	}
	if err := s.declareTopic(ctx, tn); err != nil {
		return 0, err
	}
	now := time.Now()
	items := make([]pubItem, len(msgs))
	unroutable := make([]bool, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		pub := encode(m)
		pub.Headers[hTopic] = topic
		if due := m.Due(now); due.After(now) {
			setRunAt(&pub, due)
		}
		// The kind (1 to 255 bytes) fits the routing key (an AMQP
		// shortstr, up to 255).
		items[i] = pubItem{exchange: tn.fanout, key: m.Kind, msg: pub, unroutable: &unroutable[i]}
	}
	if err := s.publish(ctx, items); err != nil {
		// Maybe an exchange was deleted behind this connection's back (a
		// publish to a missing exchange closes the channel with 404, which
		// shows as a lost confirm): the next call declares them again, at
		// the cost of a round trip.
		s.forgetTopic(tn)
		return 0, mapErr(ctx, "publish to topic "+topic, err)
	}
	for _, u := range unroutable {
		if !u {
			return -1, nil
		}
	}
	return 0, nil
}
