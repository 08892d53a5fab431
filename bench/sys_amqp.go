package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpEnv holds a connection used for cleanup and the prefix of this
// process's queues.
type amqpEnv struct {
	url    string
	conn   *amqp.Connection
	prefix string
}

func newAMQPEnv(_ context.Context, url string) (*amqpEnv, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	return &amqpEnv{url: url, conn: conn, prefix: "benchfila" + randSuffix()}, nil
}

// deleteQueues deletes queues (and exchanges of the same names), ignoring
// missing ones.
func (e *amqpEnv) deleteQueues(names ...string) error {
	var first error
	for _, n := range names {
		ch, err := e.conn.Channel()
		if err != nil {
			return err
		}
		if _, err := ch.QueueDelete(n, false, false, false); err != nil && first == nil {
			var ae *amqp.Error
			if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
				first = err
			}
		}
		_ = ch.Close()
		if ch, err = e.conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(n, false, false)
			_ = ch.Close()
		}
	}
	return first
}

func (e *amqpEnv) filaSystem(ctx context.Context) (*filaSystem, error) {
	url := addParams(e.url, "fila_prefix="+e.prefix)
	s, err := newFilaSystem(ctx, url,
		func(_ context.Context, q string) error {
			main := e.prefix + "." + q
			return e.deleteQueues(main, main+":dead")
		},
		func(context.Context) error { return e.conn.Close() })
	if s != nil {
		// The driver keeps a topic's fanout exchange (P.T:topic) after its
		// last subscription ends; the fanout scenario deletes it.
		s.dropTopic = func(_ context.Context, topic string) error {
			ch, err := e.conn.Channel()
			if err != nil {
				return err
			}
			defer ch.Close()
			return ch.ExchangeDelete(e.prefix+"."+topic+":topic", false, false)
		}
	}
	return s, err
}

// rawAMQP is the raw amqp091 baseline: a durable quorum queue (as Fila
// uses), publishes waited for with publisher confirms, a consumer with
// prefetch equal to the concurrency and one basic.ack per finished job.
type rawAMQP struct {
	env   *amqpEnv
	conn  *amqp.Connection
	pubs  chan *amqp.Channel // publisher channels in confirm mode
	queue string
}

const amqpPublishers = 16

func (e *amqpEnv) rawSystem(context.Context) (*rawAMQP, error) {
	conn, err := amqp.Dial(e.url)
	if err != nil {
		return nil, err
	}
	s := &rawAMQP{env: e, conn: conn, pubs: make(chan *amqp.Channel, amqpPublishers)}
	for range amqpPublishers {
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		s.pubs <- ch
	}
	return s, nil
}

func (s *rawAMQP) Name() string { return "raw amqp091" }

func (s *rawAMQP) Setup(context.Context) error {
	s.queue = "benchraw." + randSuffix()
	ch, err := s.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDeclare(s.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	return err
}

func (s *rawAMQP) Enqueue(ctx context.Context, bodies [][]byte) error {
	ch := <-s.pubs
	defer func() { s.pubs <- ch }()
	confs := make([]*amqp.DeferredConfirmation, 0, len(bodies))
	for _, b := range bodies {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", s.queue, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: b})
		if err != nil {
			return err
		}
		confs = append(confs, c)
	}
	for _, c := range confs {
		ok, err := c.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("publish nacked")
		}
	}
	return nil
}

type amqpConsumer struct {
	ch   *amqp.Channel
	done atomic.Int64
	wg   sync.WaitGroup
	tag  string
}

func (s *rawAMQP) Start(_ context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(concurrency, 0, false); err != nil {
		return nil, err
	}
	c := &amqpConsumer{ch: ch, tag: "c" + randSuffix()}
	deliveries, err := ch.Consume(s.queue, c.tag, false, false, false, false, nil)
	if err != nil {
		return nil, err
	}
	for range concurrency {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for d := range deliveries {
				onStart(d.Body)
				// basic.ack has no reply in AMQP 0-9-1: counted when sent.
				if err := d.Ack(false); err == nil {
					c.done.Add(1)
				}
			}
		}()
	}
	return c, nil
}

func (c *amqpConsumer) Done() int64 { return c.done.Load() }

func (c *amqpConsumer) Stop() error {
	_ = c.ch.Cancel(c.tag, false)
	c.wg.Wait()
	return c.ch.Close()
}

func (s *rawAMQP) Teardown(context.Context) error { return s.env.deleteQueues(s.queue) }

func (s *rawAMQP) Close(context.Context) error { return s.conn.Close() }
