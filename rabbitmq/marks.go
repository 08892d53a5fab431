package rabbitmq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

var _ backend.Marker = (*Driver)(nil)

// Marks (backend.Marker). A mark of Fila queue Q named N is the durable
// classic queue P.Q:mark:H, H being the unpadded base64url SHA-256 of N
// (cut to what fits in RabbitMQ's 255 bytes: 43 characters with the default
// prefix, never fewer than 11). It never holds a message (x-max-length 0).
//
//   - Set with onlyNew declares it with an argument RabbitMQ compares and no
//     other declarer shares (x-dead-letter-routing-key "fila-mark:<random>"):
//     the declare succeeds for the one caller that creates the queue and
//     fails with 406 PRECONDITION_FAILED for everyone else while it exists,
//     atomically across processes.
//   - An expiry is the queue's x-expires (the milliseconds left until
//     until): the broker deletes the queue once it has been unused that
//     long. Passive declares and basic.get count as use and restart that
//     timer, so nothing here uses them on a mark; MarkGet probes with
//     queue.bind instead (to amq.direct, keyed by the mark's own name), which
//     fails with 404 NOT_FOUND for a missing queue and does not touch the
//     queue's timer (checked against RabbitMQ 3.10).
//   - Set without onlyNew deletes the queue and declares it again.
//
// QueueDelete must find the marks of a queue, and AMQP cannot list queues,
// so each mark created is also recorded as a message (its queue name) in a
// registry queue: P.Q:marks for marks without expiry, P.Q:marks:ttl for the
// others, where the record expires (per-message TTL) a minute after its
// mark. See QueueDelete.
const (
	markInfix      = ":mark:"
	markRegistry   = ":marks"     // records of marks without expiry
	markRegistryTT = ":marks:ttl" // records of expiring marks
	// markRecordGrace is how long a registry record outlives its mark.
	markRecordGrace = time.Minute
	// markProbeExchange is the exchange MarkGet binds a mark's queue to:
	// one that always exists.
	markProbeExchange = "amq.direct"
	// markReplaceTries bounds how often MarkSet without onlyNew deletes and
	// declares a mark that others keep creating meanwhile.
	markReplaceTries = 10
)

// mark returns the name of the queue that holds mark name.
func (n names) mark(name string) string {
	sum := sha256.Sum256([]byte(name))
	h := base64.RawURLEncoding.EncodeToString(sum[:])
	base := n.main + markInfix
	if room := maxNameLen - len(base); room < len(h) {
		h = h[:room] // names() keeps room at 11 or more (66 bits)
	}
	return base + h
}

func (n names) markRegistry(expiring bool) string {
	if expiring {
		return n.main + markRegistryTT
	}
	return n.main + markRegistry
}

// MarkSet stores mark name of queue, expiring at until (the zero time:
// never), as a queue of its own (see the comment on markInfix). With
// onlyNew, a declare that RabbitMQ refuses because the mark's queue exists
// means a live mark exists (false): an expired mark's queue is gone once the
// broker's x-expires timer fired, typically within milliseconds of until.
// Without onlyNew it deletes the mark's queue and declares it again. A mark
// it creates is recorded in the queue's mark registry for QueueDelete; if
// that fails, the mark is deleted again and the error returned.
func (d *Driver) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return false, err
	}
	mq := n.mark(name)
	var ttl int64 // ms; 0: no expiry
	if !until.IsZero() {
		ttl = int64((time.Until(until) + time.Millisecond - 1) / time.Millisecond)
		if ttl <= 0 {
			// Expired already: nothing to store, but a live mark must go
			// (or, with onlyNew, stays and wins).
			if onlyNew {
				live, err := s.markExists(ctx, mq)
				return !live, err
			}
			return true, s.deleteMark(ctx, mq)
		}
	}
	for try := 0; ; try++ {
		if !onlyNew {
			if err := s.deleteMark(ctx, mq); err != nil {
				return false, err
			}
		}
		created, err := s.declareMark(ctx, mq, ttl)
		if err != nil {
			return false, err
		}
		if created {
			if err := s.recordMark(ctx, n, mq, ttl); err != nil {
				_ = s.deleteMark(context.WithoutCancel(ctx), mq)
				return false, err
			}
			return true, nil
		}
		if onlyNew {
			return false, nil
		}
		if try+1 >= markReplaceTries {
			return false, fmt.Errorf("%w: rabbitmq: set mark: other clients created it again %d times while it was replaced", backend.ErrUnavailable, markReplaceTries)
		}
	}
}

// MarkGet reports whether mark name of queue exists: whether its queue
// exists, probed with queue.bind (which, unlike a passive declare, does not
// restart the queue's x-expires timer). An expired mark is reported until
// the broker deleted its queue, typically within milliseconds of its expiry.
func (d *Driver) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return false, err
	}
	return s.markExists(ctx, n.mark(name))
}

// MarkDelete deletes the mark's queue; a missing one is not an error. Its
// registry record stays until it expires or QueueDelete.
func (d *Driver) MarkDelete(ctx context.Context, queue, name string) error {
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		return err
	}
	return s.deleteMark(ctx, n.mark(name))
}

// declareMark declares a mark's queue with an owner argument of this call
// alone and reports whether it created it (false: it existed).
func (s *session) declareMark(ctx context.Context, mq string, ttl int64) (bool, error) {
	var nb [12]byte
	_, _ = rand.Read(nb[:])
	args := amqp.Table{
		"x-queue-type":              "classic",
		"x-max-length":              int64(0),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": "fila-mark:" + hex.EncodeToString(nb[:]),
	}
	if ttl > 0 {
		args["x-expires"] = ttl
	}
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(mq, true, false, false, false, args)
		return err
	})
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
		return false, nil
	}
	if err != nil {
		return false, mapErr(ctx, "declare mark "+mq, err)
	}
	return true, nil
}

// markExists probes a mark's queue with queue.bind (see MarkGet). A 404 for
// a queue whose node is down is an outage, not a missing mark.
func (s *session) markExists(ctx context.Context, mq string) (bool, error) {
	err := s.withProbe(ctx, func(ch *amqp.Channel) error {
		return ch.QueueBind(mq, mq, markProbeExchange, false, nil)
	})
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound && !homeNodeDown(err) {
		return false, nil
	}
	if err != nil {
		return false, mapErr(ctx, "probe mark "+mq, err)
	}
	return true, nil
}

func (s *session) deleteMark(ctx context.Context, mq string) error {
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(mq, false, false, false)
		return err
	})
	return mapErr(ctx, "delete mark "+mq, err)
}

// recordMark records a created mark in the queue's mark registry, declaring
// the registry once per connection. A registry another process deleted
// (QueueDelete) meanwhile makes the publish unroutable: it is declared
// again and the record published once more.
func (s *session) recordMark(ctx context.Context, n names, mq string, ttl int64) error {
	reg := n.markRegistry(ttl > 0)
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(mq)}
	if ttl > 0 {
		msg.Expiration = strconv.FormatInt(ttl+markRecordGrace.Milliseconds(), 10)
	}
	for try := 0; ; try++ {
		if err := s.declareRegistry(ctx, reg); err != nil {
			return err
		}
		err := s.publish(ctx, []pubItem{{key: reg, msg: msg}})
		if errors.Is(err, ErrUnroutable) && try == 0 {
			s.declMu.Lock()
			delete(s.registries, reg)
			s.declMu.Unlock()
			continue
		}
		return mapErr(ctx, "record mark", err)
	}
}

// declareRegistry declares a mark registry queue, once per connection.
func (s *session) declareRegistry(ctx context.Context, reg string) error {
	s.declMu.Lock()
	done := s.registries[reg]
	s.declMu.Unlock()
	if done {
		return nil
	}
	err := s.withCtl(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(reg, true, false, false, false, amqp.Table{"x-queue-type": "classic"})
		return err
	})
	if err != nil {
		return mapErr(ctx, "declare mark registry "+reg, err)
	}
	s.declMu.Lock()
	s.registries[reg] = true
	s.declMu.Unlock()
	return nil
}

// recordedMarks reads the mark registries of a queue with basic.get,
// without acking, on a channel of its own each, and returns the distinct
// mark queue names recorded there. Closing the channel puts the records
// back, so they stay until the registries are deleted.
func (s *session) recordedMarks(ctx context.Context, n names) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, reg := range []string{n.markRegistry(false), n.markRegistry(true)} {
		ch, err := s.conn.Channel()
		if err != nil {
			return nil, mapErr(ctx, "open channel", err)
		}
		for {
			if err := ctx.Err(); err != nil {
				_ = ch.Close()
				return nil, err
			}
			dv, ok, err := ch.Get(reg, false)
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound && !homeNodeDown(err) {
				break // no registry, no marks recorded there
			}
			if err != nil {
				_ = ch.Close()
				return nil, mapErr(ctx, "read mark registry "+reg, err)
			}
			if !ok {
				break
			}
			if mq := string(dv.Body); !seen[mq] {
				seen[mq] = true
				out = append(out, mq)
			}
		}
		_ = ch.Close()
	}
	return out, nil
}

// withProbe runs fn on the probe channel (see ctlChan.run), which a probe
// of an absent mark (a 404) closes.
func (s *session) withProbe(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	return s.probe.run(ctx, s.conn, fn)
}
