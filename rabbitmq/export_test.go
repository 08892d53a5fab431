package rabbitmq

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeleteTopicExchange deletes topic's exchange, for the external tests'
// cleanup: the driver has no call that deletes a topic (a topic is what is
// bound to it), and leftover durable exchanges would pile up on the shared
// test broker.
func DeleteTopicExchange(ctx context.Context, d *Driver, topic string) error {
	ex, err := d.topicExchange(topic)
	if err != nil {
		return err
	}
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return err
	}
	defer s.forgetTopic(ex)
	return mapErr(ctx, "delete topic exchange", s.withCtl(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDelete(ex, false, false)
	}))
}
