package filaotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// Instrumentation traces and measures one client's producers and workers.
// Create it once per client with New and share it; it is safe for
// concurrent use.
type Instrumentation struct {
	c      *fila.Client
	system string
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	duration metric.Float64Histogram
	outcomes metric.Int64Counter
	sent     metric.Int64Counter
}

// New returns the Instrumentation of client c. Instruments that cannot be
// created are reported to otel.Handle and replaced by no-ops, as
// instrumentation libraries do, so New never fails.
func New(c *fila.Client, opts ...Option) *Instrumentation {
	cfg := newConfig(opts)
	meter := cfg.mp.Meter(ScopeName)
	in := &Instrumentation{
		c:      c,
		system: systemOf(c),
		tracer: cfg.tp.Tracer(ScopeName),
		prop:   cfg.prop,
	}
	var err error
	in.duration, err = meter.Float64Histogram(MetricProcessDuration,
		metric.WithUnit("s"),
		metric.WithDescription("Duration of processing operation: how long job handlers ran, per queue and kind."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(err)
		in.duration = noopmetric.Float64Histogram{}
	}
	in.outcomes, err = meter.Int64Counter(MetricJobOutcomes,
		metric.WithUnit("{job}"),
		metric.WithDescription("Finished jobs per queue, kind and outcome (ack, retry, dead, released, lease_lost, unsettled)."))
	if err != nil {
		otel.Handle(err)
		in.outcomes = noopmetric.Int64Counter{}
	}
	in.sent, err = meter.Int64Counter(MetricSentMessages,
		metric.WithUnit("{message}"),
		metric.WithDescription("Number of messages producers attempted to send to the broker."))
	if err != nil {
		otel.Handle(err)
		in.sent = noopmetric.Int64Counter{}
	}
	return in
}

// systemOf is the messaging.system of a client: its driver's name.
func systemOf(c *fila.Client) string {
	if c != nil {
		return c.DriverName()
	}
	return "fila"
}

// Instrument installs the instrumentation in a worker configuration: its
// Middleware first (outermost, so the job span covers the other
// middleware) and OnJobEnd chained after any hook already set.
//
//	cfg := worker.Config{Queues: ...}
//	filaotel.New(client).Instrument(&cfg)
//	w, err := worker.New(client, cfg)
func (in *Instrumentation) Instrument(cfg *worker.Config) {
	cfg.Middleware = append([]worker.Middleware{in.Middleware()}, cfg.Middleware...)
	if prev := cfg.OnJobEnd; prev != nil {
		cfg.OnJobEnd = func(ev worker.JobEvent) {
			prev(ev)
			in.OnJobEnd(ev)
		}
	} else {
		cfg.OnJobEnd = in.OnJobEnd
	}
}

// Middleware returns worker middleware that runs each job in a consumer span
// ("process QUEUE") whose parent is the trace context found in the message's
// headers (so the job's span is a child of the span that enqueued it), and
// records the handler's run time in the messaging.process.duration histogram
// with the queue and kind, and error.type when it failed.
func (in *Instrumentation) Middleware() worker.Middleware {
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, d *fila.Delivery) (err error) {
			ctx, span := in.StartProcess(ctx, d)
			start := time.Now()
			panicked := true
			defer func() {
				dur := time.Since(start)
				attrs := []attribute.KeyValue{
					AttrSystem.String(in.system), AttrDestination.String(d.Queue),
					AttrOperationName.String(opProcess), AttrKind.String(d.Kind),
				}
				if panicked {
					attrs = append(attrs, AttrErrorType.String("panic"))
					span.SetStatus(codes.Error, "handler panicked")
					span.SetAttributes(AttrErrorType.String("panic"))
				} else if err != nil {
					et := jobErrorType(err)
					attrs = append(attrs, AttrErrorType.String(et))
					span.RecordError(err)
					span.SetStatus(codes.Error, firstLine(err.Error()))
					span.SetAttributes(AttrErrorType.String(et))
				}
				in.duration.Record(ctx, dur.Seconds(), metric.WithAttributes(attrs...))
				span.End()
			}()
			err = next.Work(ctx, d)
			panicked = false
			return err
		})
	}
}

// StartProcess starts the consumer span of a delivery, for code that
// receives without package worker. The span's parent is the trace context
// in the delivery's headers; end it when the work is done.
func (in *Instrumentation) StartProcess(ctx context.Context, d *fila.Delivery) (context.Context, trace.Span) {
	ctx = in.Extract(ctx, d)
	return in.tracer.Start(ctx, opProcess+" "+d.Queue,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			AttrSystem.String(in.system), AttrDestination.String(d.Queue),
			AttrOperationName.String(opProcess), AttrOperationType.String(opProcess),
			AttrMessageID.String(d.ID), AttrKind.String(d.Kind), AttrAttempt.Int(d.Attempt),
		))
}

// Extract returns ctx with the trace context carried in d's headers (if
// any) as its remote parent.
func (in *Instrumentation) Extract(ctx context.Context, d *fila.Delivery) context.Context {
	return in.prop.Extract(ctx, propagation.MapCarrier(d.Headers))
}

// OnJobEnd counts the job's outcome per queue and kind; install it as
// worker.Config.OnJobEnd (Instrument does).
func (in *Instrumentation) OnJobEnd(ev worker.JobEvent) {
	in.outcomes.Add(context.Background(), 1, metric.WithAttributes(
		AttrSystem.String(in.system), AttrDestination.String(ev.Queue),
		AttrKind.String(ev.Kind), AttrOutcome.String(string(ev.Outcome))))
}

// jobErrorType classifies a handler's error for error.type.
func jobErrorType(err error) string {
	var pe *worker.PanicError
	switch {
	case worker.IsPermanent(err):
		return "permanent"
	case errors.As(err, &pe):
		return "panic"
	case errors.Is(err, worker.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	default:
		return "_OTHER"
	}
}

// enqueueErrorType classifies an enqueue error for error.type.
func enqueueErrorType(err error) string {
	switch {
	case errors.Is(err, fila.ErrDuplicate):
		return "duplicate"
	case errors.Is(err, fila.ErrInvalid):
		return "invalid"
	case errors.Is(err, fila.ErrTooLarge):
		return "too_large"
	case errors.Is(err, fila.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, fila.ErrClosed):
		return "closed"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "_OTHER"
	}
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
