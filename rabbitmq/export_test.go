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
