package filaotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filaotel"
	"github.com/fila-go/fila/worker"
)

// TestTraceThroughBroker enqueues inside a request span and checks that the
// worker's job span is a child of the enqueue span, through a real broker.
func TestTraceThroughBroker(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := open(t, b.url(t))
			q := tempQueue(t, c, "trace")
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			inst := filaotel.New(c, filaotel.WithTracerProvider(tp), filaotel.WithPropagator(propagation.TraceContext{}))

			var rec recorder
			cfg := worker.Config{
				Queues:   map[string]worker.QueueConfig{q: {Concurrency: 1}},
				Lease:    5 * time.Second,
				OnJobEnd: rec.onEnd,
				Logger:   quiet,
			}
			inst.Instrument(&cfg)
			w, err := worker.New(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var inHandler trace.SpanContext
			w.HandleFunc("email.welcome", func(ctx context.Context, d *fila.Delivery) error {
				inHandler = trace.SpanContextFromContext(ctx)
				return nil
			})
			w.HandleFunc("fails", func(ctx context.Context, d *fila.Delivery) error {
				return worker.Permanent(errors.New("no such user"))
			})
			runWorker(t, w)
			t.Cleanup(func() { _, _ = c.DeadPurge(context.Background(), q, fila.DeadFilter{}) })

			// The "request" that enqueues.
			ctx, req := tp.Tracer("test").Start(context.Background(), "POST /signup")
			headers := map[string]string{"tenant": "acme"}
			id, err := inst.Enqueue(ctx, q, fila.Message{Kind: "email.welcome", Headers: headers})
			if err != nil {
				t.Fatal(err)
			}
			req.End()
			if len(headers) != 1 {
				t.Errorf("Enqueue modified the caller's headers: %v", headers)
			}
			// A message enqueued outside any span starts its own trace.
			if _, err := inst.Enqueue(context.Background(), q, fila.Message{Kind: "fails"}); err != nil {
				t.Fatal(err)
			}
			rec.wait(t, 2)

			var send, process, failed sdktrace.ReadOnlySpan
			for _, s := range spans.Ended() {
				if s.Name() == "send "+q && s.Parent().SpanID() == req.SpanContext().SpanID() {
					send = s
				}
			}
			for _, s := range spans.Ended() {
				switch {
				case send == nil || s.Name() != "process "+q:
				case s.Parent().SpanID() == send.SpanContext().SpanID():
					process = s
				default:
					failed = s
				}
			}
			if send == nil || process == nil || failed == nil {
				t.Fatalf("spans: send %v, process %v, failed process %v; all ended: %v", send != nil, process != nil, failed != nil, names(spans.Ended()))
			}
			if send.SpanKind() != trace.SpanKindProducer || process.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("kinds: send %v, process %v", send.SpanKind(), process.SpanKind())
			}
			if process.Parent().SpanID() != send.SpanContext().SpanID() || process.SpanContext().TraceID() != req.SpanContext().TraceID() || !process.Parent().IsRemote() {
				t.Errorf("job span parent %v (remote %v), trace %v; want the send span %v in trace %v",
					process.Parent().SpanID(), process.Parent().IsRemote(), process.SpanContext().TraceID(), send.SpanContext().SpanID(), req.SpanContext().TraceID())
			}
			if inHandler.SpanID() != process.SpanContext().SpanID() {
				t.Errorf("the handler's context carries span %v; want the job span %v", inHandler.SpanID(), process.SpanContext().SpanID())
			}
			attrs := map[string]string{}
			for _, kv := range process.Attributes() {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			if attrs["messaging.message.id"] != id || attrs["messaging.destination.name"] != q || attrs["fila.message.kind"] != "email.welcome" ||
				attrs["messaging.operation.name"] != "process" || attrs["fila.message.attempt"] != "1" || attrs["messaging.system"] == "" {
				t.Errorf("job span attributes: %v", attrs)
			}
			for _, kv := range send.Attributes() {
				if kv.Key == filaotel.AttrMessageID && kv.Value.AsString() != id {
					t.Errorf("send span message id %s; want %s", kv.Value.AsString(), id)
				}
			}
			if failed.Status().Code != codes.Error || failed.SpanContext().TraceID() == req.SpanContext().TraceID() {
				t.Errorf("failed job span: status %+v, trace %v", failed.Status(), failed.SpanContext().TraceID())
			}
		})
	}
}

func names(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name()+"<"+s.Parent().SpanID().String())
	}
	return out
}

func TestEnqueueErrorSpan(t *testing.T) {
	c := open(t, "mem://"+unique("errspan"))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	inst := filaotel.New(c, filaotel.WithTracerProvider(tp), filaotel.WithPropagator(propagation.TraceContext{}))
	if _, err := inst.Enqueue(context.Background(), "q", fila.Message{}); !errors.Is(err, fila.ErrInvalid) {
		t.Fatalf("enqueue without a kind: %v", err)
	}
	ended := spans.Ended()
	if len(ended) != 1 || ended[0].Status().Code != codes.Error {
		t.Fatalf("spans %v", names(ended))
	}
	for _, kv := range ended[0].Attributes() {
		if kv.Key == filaotel.AttrErrorType && kv.Value.AsString() != "invalid" {
			t.Errorf("error.type = %s", kv.Value.AsString())
		}
	}
	// The package-level helper uses the global providers (no-ops here).
	if _, err := filaotel.Enqueue(context.Background(), c, "q", fila.Message{Kind: "k"}); err != nil {
		t.Error(err)
	}
}
