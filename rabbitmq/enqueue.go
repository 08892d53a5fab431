package rabbitmq

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Enqueue publishes msgs with publisher confirms: ready messages to the main
// queue, delayed ones to the delay queue of their delay (see bucketMS). It
// returns when the broker confirmed every message. A batch is not atomic:
// when the call fails, some of its messages may be stored.
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return nil, err
	}
	if err := s.declare(ctx, queue, n); err != nil {
		return nil, err
	}
	now := time.Now()
	items := make([]pubItem, len(msgs))
	res := make([]backend.EnqueueResult, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		pub := encode(m)
		key := n.main
		if due := m.Due(now); due.After(now) {
			pub.Headers[hRunAt] = due.UnixMilli()
			if key, err = s.delayKey(ctx, queue, n, due.Sub(now)); err != nil {
				return nil, err
			}
		}
		items[i] = pubItem{key: key, msg: pub, queue: queue}
		res[i] = backend.EnqueueResult{ID: m.ID}
	}
	if err := s.publish(ctx, items); err != nil {
		return nil, mapErr(ctx, "enqueue", err)
	}
	return res, nil
}

// delayKey returns the routing key (through the default exchange) that makes
// a message wait remaining: the main queue when nothing is left, else the
// right delay queue, declared if needed.
func (s *session) delayKey(ctx context.Context, queue string, n names, remaining time.Duration) (string, error) {
	ms := bucketMS(remaining)
	if ms == 0 {
		return n.main, nil
	}
	return s.declareDelay(ctx, queue, n, ms)
}

// setRunAt records the run-at a copy must wait for.
func setRunAt(p *amqp.Publishing, at time.Time) {
	p.Headers[hRunAt] = at.UnixMilli()
}
