package filaotel

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fila-go/fila"
)

// Enqueue enqueues m in queue through c in a producer span ("send QUEUE"),
// with the span's trace context written into the message's headers, using
// the global tracer provider, meter provider and propagator. It is
// New(c).Enqueue; keep an Instrumentation for repeated use.
func Enqueue(ctx context.Context, c *fila.Client, queue string, m fila.Message) (string, error) {
	return New(c).Enqueue(ctx, queue, m)
}

// Enqueue enqueues m in queue in a producer span ("send QUEUE") whose trace
// context is written into the message's headers (the caller's map is not
// modified), so the job's span becomes its child. It counts the message in
// messaging.client.sent.messages.
func (in *Instrumentation) Enqueue(ctx context.Context, queue string, m fila.Message) (string, error) {
	ids, err := in.EnqueueBatch(ctx, queue, []fila.Message{m})
	if len(ids) == 1 {
		return ids[0], err
	}
	return "", err
}

// EnqueueBatch is fila.Client.EnqueueBatch in one producer span, with the
// span's trace context in every message's headers.
func (in *Instrumentation) EnqueueBatch(ctx context.Context, queue string, msgs []fila.Message) ([]string, error) {
	ctx, span := in.startSend(ctx, queue, msgs)
	ids, err := in.c.EnqueueBatch(ctx, queue, in.inject(ctx, msgs))
	in.endSend(ctx, span, queue, msgs, ids, err)
	return ids, err
}

// EnqueueTx is fila.Client.EnqueueTx in one producer span, with the span's
// trace context in every message's headers. The span ends when the enqueue
// returns, before the caller's transaction commits.
func (in *Instrumentation) EnqueueTx(ctx context.Context, tx any, queue string, msgs []fila.Message) ([]string, error) {
	ctx, span := in.startSend(ctx, queue, msgs)
	ids, err := in.c.EnqueueTx(ctx, tx, queue, in.inject(ctx, msgs))
	in.endSend(ctx, span, queue, msgs, ids, err)
	return ids, err
}

// Inject writes the trace context of ctx into m's headers, copying the
// header map first so the caller's map is not modified. Use it to carry a
// trace through a message built elsewhere (a worker.Kind's Message).
func (in *Instrumentation) Inject(ctx context.Context, m *fila.Message) {
	h := make(map[string]string, len(m.Headers)+2)
	maps.Copy(h, m.Headers)
	in.prop.Inject(ctx, propagation.MapCarrier(h))
	if len(h) == 0 {
		return // nothing to carry: keep the message as it was
	}
	m.Headers = h
}

func (in *Instrumentation) inject(ctx context.Context, msgs []fila.Message) []fila.Message {
	out := make([]fila.Message, len(msgs))
	for i := range msgs {
		out[i] = msgs[i]
		in.Inject(ctx, &out[i])
	}
	return out
}

func (in *Instrumentation) startSend(ctx context.Context, queue string, msgs []fila.Message) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		AttrSystem.String(in.system), AttrDestination.String(queue),
		AttrOperationName.String(opSend), AttrOperationType.String(opSend),
	}
	if len(msgs) == 1 {
		attrs = append(attrs, AttrKind.String(msgs[0].Kind))
	} else {
		attrs = append(attrs, AttrBatchCount.Int(len(msgs)))
	}
	return in.tracer.Start(ctx, opSend+" "+queue, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
}

func (in *Instrumentation) endSend(ctx context.Context, span trace.Span, queue string, msgs []fila.Message, ids []string, err error) {
	defer span.End()
	if len(ids) == 1 && ids[0] != "" {
		span.SetAttributes(AttrMessageID.String(ids[0]))
	}
	attrs := []attribute.KeyValue{AttrSystem.String(in.system), AttrDestination.String(queue), AttrOperationName.String(opSend)}
	if err != nil {
		et := enqueueErrorType(err)
		attrs = append(attrs, AttrErrorType.String(et))
		span.SetAttributes(AttrErrorType.String(et))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	in.sent.Add(ctx, int64(len(msgs)), metric.WithAttributes(attrs...))
}
