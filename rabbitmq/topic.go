package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Topics (contract: fan-out). A topic T is the durable fanout exchange
// P.T:topic; each subscription binds its queue's main quorum queue to it. A
// publish is one basic.publish per message to the exchange, and the broker
// stores the copies. The copies are identical, so a topic publish carries
// the marker header hTopic, and the driver gives each copy its own id
// (backend.CopyID) when it reads the delivery from its queue (see adopt).
//
// A delayed message goes to the exchange at once, with its run-at: each
// subscription's main queue gets its copy now, and the subscription's
// consumer moves the copy to its own delay queue as it does for any message
// that arrives before its run-at (see hop in consume.go). So a subscription
// made during the delay does not get the message, as the contract says, and
// the delay costs each subscription one republish.

var _ backend.Topics = (*Driver)(nil)

// topicSuffix ends a topic's exchange name. Queue names derived from a Fila
// queue (names.go) never end with it, and a Fila queue's only exchange is
// P.Q:dead, so topic exchanges collide with nothing.
const topicSuffix = ":topic"

// topicExchange returns the name of topic's fanout exchange.
func (d *Driver) topicExchange(topic string) (string, error) {
	if topic == "" {
		return "", backend.Invalidf("empty topic name")
	}
	name := d.opts.Prefix + "." + topic + topicSuffix
	if len(name) > maxNameLen {
		return "", backend.Invalidf("topic %q: its RabbitMQ exchange name would be %d bytes; RabbitMQ's limit is %d (use a shorter prefix or topic name)", topic, len(name), maxNameLen)
	}
	return name, nil
}

// declareTopic makes sure the exchange ex exists, once per connection.
func (s *session) declareTopic(ctx context.Context, ex string) error {
	s.declMu.Lock()
	ok := s.topics[ex]
	s.declMu.Unlock()
	if ok {
		return nil
	}
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(ex, amqp.ExchangeFanout, true, false, false, false, nil)
	})
	if err != nil {
		return mapErr(ctx, "declare topic exchange "+ex, err)
	}
	s.declMu.Lock()
	s.topics[ex] = true
	s.declMu.Unlock()
	return nil
}

// forgetTopic drops ex from the declaration cache.
func (s *session) forgetTopic(ex string) {
	s.declMu.Lock()
	delete(s.topics, ex)
	s.declMu.Unlock()
}

// TopicSubscribe declares queue's topology as its first use does, declares
// topic's exchange, and binds queue's main queue to it. Binding twice is
// not an error.
func (d *Driver) TopicSubscribe(ctx context.Context, topic, queue string) error {
	ex, err := d.topicExchange(topic)
	if err != nil {
		return err
	}
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		if err := s.declare(ctx, queue, n); err != nil {
			return err
		}
		if err := s.declareTopic(ctx, ex); err != nil {
			return err
		}
		err := s.withCtl(ctx, func(ch *amqp.Channel) error {
			return ch.QueueBind(n.main, "", ex, false, nil)
		})
		var ae *amqp.Error
		if try == 0 && errors.As(err, &ae) && ae.Code == amqp.NotFound {
			// The queue or the exchange was deleted since this connection
			// declared it (another process deleted the queue): declare both
			// again.
			s.forget(queue, n)
			s.forgetTopic(ex)
			continue
		}
		return mapErr(ctx, "subscribe "+queue+" to topic "+topic, err)
	}
}

// TopicUnsubscribe removes the binding of queue's main queue to topic's
// exchange. The queue stays (the portable layer deletes it). A binding,
// exchange or queue that does not exist is not an error: the unbind runs
// on a channel of its own, which the broker closes when it answers 404.
func (d *Driver) TopicUnsubscribe(ctx context.Context, topic, queue string) error {
	ex, err := d.topicExchange(topic)
	if err != nil {
		return err
	}
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return mapErr(ctx, "open channel", err)
	}
	defer func() { _ = ch.Close() }()
	err = ch.QueueUnbind(n.main, "", ex, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return nil
	}
	return mapErr(ctx, "unsubscribe "+queue+" from topic "+topic, err)
}

// TopicSubscriptions is not supported: a topic's subscriptions are its
// exchange's bindings, which AMQP 0-9-1 cannot list.
func (d *Driver) TopicSubscriptions(ctx context.Context, topic string) ([]string, error) {
	return nil, fmt.Errorf("%w: rabbitmq: AMQP 0-9-1 cannot list bindings; the driver does not use the management plugin", backend.ErrUnsupported)
}

// TopicPublish publishes each message once to topic's exchange, persistent
// and mandatory, with publisher confirms, as Enqueue publishes to a queue;
// a delayed message carries its run-at (see the comment at the top of this
// file). It returns 0 when the broker returned every message unroutable
// (NO_ROUTE: the topic has no subscriptions, and nothing was stored), and
// -1 otherwise: the broker does not say how many queues a message was
// routed to, only that there was at least one.
func (d *Driver) TopicPublish(ctx context.Context, topic string, msgs []backend.Message) (int, error) {
	ex, err := d.topicExchange(topic)
	if err != nil {
		return 0, err
	}
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return 0, err
	}
	if err := s.declareTopic(ctx, ex); err != nil {
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
		items[i] = pubItem{exchange: ex, msg: pub, unroutable: &unroutable[i]}
	}
	if err := s.publish(ctx, items); err != nil {
		// Maybe the exchange was deleted behind this connection's back (a
		// publish to a missing exchange closes the channel with 404, which
		// shows as a lost confirm): the next call declares it again, at the
		// cost of a round trip.
		s.forgetTopic(ex)
		return 0, mapErr(ctx, "publish to topic "+topic, err)
	}
	for _, u := range unroutable {
		if !u {
			return -1, nil
		}
	}
	return 0, nil
}
