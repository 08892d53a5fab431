package rabbitmq

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeleteTopicExchange deletes topic's exchanges, for the external tests'
// cleanup: the driver has no call that deletes a topic (a topic is what is
// bound to it), and leftover durable exchanges would pile up on the shared
// test broker. (Subscription exchanges go with their queues.)
func DeleteTopicExchange(ctx context.Context, d *Driver, topic string) error {
	tn, err := d.topicExchanges(topic)
	if err != nil {
		return err
	}
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return err
	}
	defer s.forgetTopic(tn)
	return mapErr(ctx, "delete topic exchanges", s.withCtl(ctx, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDelete(tn.route, false, false); err != nil {
			return err
		}
		return ch.ExchangeDelete(tn.fanout, false, false)
	}))
}

// StopConsumer cancels the consumer of d's puller of queue, as parking an
// idle puller does, and reports whether it had one.
func StopConsumer(d *Driver, queue string) bool {
	p := d.existingPuller(queue)
	if p == nil {
		return false
	}
	p.ensureMu.Lock()
	defer p.ensureMu.Unlock()
	p.mu.Lock()
	cs := p.cs
	had := cs != nil && cs.cons != nil
	p.mu.Unlock()
	if had {
		p.stopConsumer(cs)
	}
	return had
}
