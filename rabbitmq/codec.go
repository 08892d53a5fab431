package rabbitmq

import (
	"bytes"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// How a Fila message is carried in an AMQP message. AMQP properties:
// MessageId = the Fila id, Type = the kind, DeliveryMode = persistent,
// Timestamp = enqueue time (seconds), CorrelationId = a per-publish key
// that matches a basic.return to its publish. Headers (AMQP field table):
const (
	hUser      = "fila-h"           // table: the message's own headers, kept apart from Fila's
	hEnqueued  = "fila-enq"         // int64: enqueue time, Unix milliseconds
	hRunAt     = "fila-run"         // int64: run-at, Unix milliseconds rounded up (delayed and retried messages)
	hAttempts  = "fila-att"         // int64: deliveries before this copy was published
	hMax       = "fila-max"         // int64: the message's own max attempts
	hLastError = "fila-err"         // string: reason of the latest Retry
	hReason    = "fila-reason"      // string: dead-letter reason
	hDeadAt    = "fila-dead-at"     // int64: dead-letter time, Unix milliseconds
	hDelCount  = "x-delivery-count" // set by quorum queues on redelivery
	// hPriority (int64, 1 to backend.MaxPriority; absent at level 0) is the
	// message's level. It goes with every copy the driver publishes (retries,
	// hops, dead letters, replays), and P.Q:levels routes topic copies by
	// it (see levels.go).
	hPriority = "fila-pri"
	// hTopic (string: the topic) marks a message published to a topic's
	// fanout exchange: every subscription queue gets the same bytes, so the
	// copy's own id is made when a delivery is read (see adopt). It starts
	// with "x-", so copyOf drops it from every republish.
	hTopic = "x-fila-topic"
)

// encode builds the AMQP message for m.
func encode(m *backend.Message) amqp.Publishing {
	h := amqp.Table{hEnqueued: m.EnqueuedAt.UnixMilli()}
	if len(m.Headers) > 0 {
		uh := make(amqp.Table, len(m.Headers))
		for k, v := range m.Headers {
			uh[k] = v
		}
		h[hUser] = uh
	}
	if m.MaxAttempts > 0 {
		h[hMax] = int64(m.MaxAttempts)
	}
	if m.Attempts > 0 { // carried over by a relay from another broker
		h[hAttempts] = int64(m.Attempts)
	}
	if m.Priority > 0 {
		h[hPriority] = int64(m.Priority)
	}
	return amqp.Publishing{
		MessageId:    m.ID,
		Type:         m.Kind,
		DeliveryMode: amqp.Persistent,
		Timestamp:    m.EnqueuedAt,
		Body:         m.Body,
		Headers:      h,
	}
}

// copyOf returns a publishing that carries dv's message again, with a copy of
// its headers that the caller may change. Broker-set headers (x-death,
// x-delivery-count, ...) are dropped.
func copyOf(dv *amqp.Delivery) amqp.Publishing {
	h := make(amqp.Table, len(dv.Headers))
	for k, v := range dv.Headers {
		if len(k) >= 2 && k[:2] == "x-" {
			continue
		}
		h[k] = v
	}
	return amqp.Publishing{
		MessageId:       dv.MessageId,
		Type:            dv.Type,
		DeliveryMode:    amqp.Persistent,
		Timestamp:       dv.Timestamp,
		ContentType:     dv.ContentType,
		ContentEncoding: dv.ContentEncoding,
		Body:            dv.Body,
		Headers:         h,
	}
}

// adopt makes a delivery of a topic copy an ordinary message of queue, the
// subscription it was read from: the id becomes CopyID(published id, queue)
// and the marker header goes. Every place that turns a delivery into the
// driver's own record calls it first, so receipts, settlements, republishes,
// dead letters and stats all see the copy's id. A delivery without the
// marker (an ordinary message, or a copy already adopted and republished)
// is left alone.
func adopt(dv *amqp.Delivery, queue string) {
	if _, ok := dv.Headers[hTopic]; !ok {
		return
	}
	delete(dv.Headers, hTopic)
	dv.MessageId = backend.CopyID(dv.MessageId, queue)
}

// priorAttempts is how many deliveries dv's message had before this one:
// those counted before the driver last republished it plus the quorum
// queue's count of failed deliveries since (absent on a first delivery).
func priorAttempts(dv *amqp.Delivery) int {
	return int(intHeader(dv.Headers, hAttempts) + intHeader(dv.Headers, hDelCount))
}

// decode turns a delivery into the message Fila hands out. The body is a
// copy: the driver keeps dv to publish it again (Retry, Dead, give-back),
// and a handler that changes the bytes it got must not change what later
// deliveries carry.
func decode(dv *amqp.Delivery) backend.Message {
	m := backend.Message{
		ID:          dv.MessageId,
		Kind:        dv.Type,
		Body:        bytes.Clone(dv.Body),
		MaxAttempts: int(intHeader(dv.Headers, hMax)),
		Priority:    levelOf(dv.Headers),
	}
	if ms := intHeader(dv.Headers, hEnqueued); ms != 0 {
		m.EnqueuedAt = time.UnixMilli(ms)
	} else {
		m.EnqueuedAt = dv.Timestamp
	}
	if ms := intHeader(dv.Headers, hRunAt); ms != 0 {
		m.RunAt = time.UnixMilli(ms)
	}
	if uh, ok := dv.Headers[hUser].(amqp.Table); ok && len(uh) > 0 {
		m.Headers = make(map[string]string, len(uh))
		for k, v := range uh {
			if s, ok := v.(string); ok {
				m.Headers[k] = s
			}
		}
	}
	return m
}

// levelOf returns the level a message's headers carry, 0 without one;
// a value outside 0..MaxPriority (not the driver's) counts as the nearest
// level.
func levelOf(h amqp.Table) int {
	return int(min(max(intHeader(h, hPriority), 0), backend.MaxPriority))
}

func strHeader(h amqp.Table, k string) string {
	s, _ := h[k].(string)
	return s
}

// intHeader reads an integer header whatever width the encoder chose.
func intHeader(h amqp.Table, k string) int64 {
	switch v := h[k].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case int:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return int64(v)
	case float64:
		return int64(v)
	}
	return 0
}
