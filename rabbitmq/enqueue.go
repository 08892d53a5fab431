package rabbitmq

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Enqueue publishes msgs with publisher confirms: ready messages to the main
// queue of their level (P.Q, or P.Q:pL declared by the level's first use;
// see levels.go), delayed ones to the delay queue of their level and delay
// (see bucketMS). It returns when the broker confirmed every message. A
// batch is not atomic: when the call fails, some of its messages may be
// stored.
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return nil, err
	}
	if err := s.declare(ctx, queue, n); err != nil {
		return nil, err
	}
	levels := levelMaskOf(msgs)
	for l := 1; l <= backend.MaxPriority; l++ {
		if levels&(1<<l) != 0 {
			if err := s.declareLevel(ctx, queue, n, l); err != nil {
				return nil, err
			}
		}
	}
	now := time.Now()
	items := make([]pubItem, len(msgs))
	res := make([]backend.EnqueueResult, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		pub := encode(m)
		l := levelOf(pub.Headers)
		key := n.level(l)
		if due := m.Due(now); due.After(now) {
			pub.Headers[hRunAt] = runAtMilli(due)
			if key, err = s.delayKeyAt(ctx, queue, n, l, due); err != nil {
				return nil, err
			}
		}
		items[i] = pubItem{key: key, msg: pub, queue: queue}
		res[i] = backend.EnqueueResult{ID: m.ID}
	}
	if err := s.publish(ctx, items); err != nil {
		return nil, mapErr(ctx, "enqueue", err)
	}
	if levels != 0 {
		d.levelBell(queue)
	}
	return res, nil
}

// delayKey returns the routing key (through the default exchange) that makes
// a message published now wait until due: the main queue when nothing is
// left, else the right delay queue, declared if needed.
//
// A delay queue's TTL runs from the publish, so time spent declaring it (a
// round trip, tens of milliseconds on a busy broker) would make the message
// late by as much: when the declaration took more than delaySlack past what
// the bucket's rounding left, the bucket is picked again for the time left.
// A shorter bucket brings the message to the main queue early, where it
// hops (see hop in consume.go) rather than being handed out early.
func (s *session) delayKey(ctx context.Context, queue string, n names, due time.Time) (string, error) {
	return s.delayKeyAt(ctx, queue, n, 0, due)
}

// delayKeyAt is delayKey for a message of level l: its delay queues
// dead-letter to the level's queue, where it goes when nothing is left.
func (s *session) delayKeyAt(ctx context.Context, queue string, n names, l int, due time.Time) (string, error) {
	for try := 0; ; try++ {
		ms := bucketMS(time.Until(due))
		if ms == 0 {
			if l > 0 {
				if err := s.declareLevel(ctx, queue, n, l); err != nil {
					return "", err
				}
			}
			return n.level(l), nil
		}
		name, err := s.declareDelayAt(ctx, queue, n, l, ms)
		if err != nil {
			return "", err
		}
		late := time.Duration(ms)*time.Millisecond - time.Until(due)
		if late <= delaySlack || try == delayPicks-1 {
			return name, nil
		}
	}
}

// delaySlack is how late delayKey lets a message be by its declarations
// (the bucket's rounding up to whole milliseconds takes up to 1 ms of it),
// and delayPicks how many buckets it tries at most.
const (
	delaySlack = 2 * time.Millisecond
	delayPicks = 3
)

// setRunAt records the run-at a copy must wait for.
func setRunAt(p *amqp.Publishing, at time.Time) {
	p.Headers[hRunAt] = runAtMilli(at)
}

// runAtMilli is a run-at as the fila-run header carries it: Unix
// milliseconds rounded up. Consumers hand a message out once the wall
// clock's whole milliseconds reach the header, so a run-at rounded down
// let a message out up to 1 ms before it (a Watermill test measured a
// redelivery 299.1 ms after a 300 ms nack delay).
func runAtMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}
