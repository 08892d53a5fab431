package filaotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filaotel"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/worker"
)

// benchInst is an Instrumentation with the SDK's tracer (sampling every
// span, no exporter) and meter (a manual reader), so the benchmarks measure
// the instrumentation's own cost.
func benchInst(b *testing.B, c *fila.Client) *filaotel.Instrumentation {
	tp := sdktrace.NewTracerProvider()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	return filaotel.New(c, filaotel.WithTracerProvider(tp), filaotel.WithMeterProvider(mp), filaotel.WithPropagator(propagation.TraceContext{}))
}

// BenchmarkEnqueue compares a traced enqueue with a plain one, on the
// in-memory broker (where the broker costs least, so the ratio is an upper
// bound of the instrumentation's share) and on PostgreSQL.
func BenchmarkEnqueue(b *testing.B) {
	for _, broker := range []struct {
		name string
		url  func(b *testing.B) string
	}{
		{"memory", func(*testing.B) string { return "mem://" + unique("bench") }},
		{"postgres", func(b *testing.B) string { return withParam(testenv.PostgresURL(b), "fila_migrate", "true") }},
	} {
		for _, traced := range []bool{false, true} {
			name := broker.name + "/raw"
			if traced {
				name = broker.name + "/traced"
			}
			b.Run(name, func(b *testing.B) {
				benchEnqueue(b, broker.url(b), traced)
			})
		}
	}
}

func benchEnqueue(b *testing.B, url string, traced bool) {
	ctx := context.Background()
	c, err := fila.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	q := unique("bench")
	inst := benchInst(b, c)
	m := fila.Message{Kind: "k", Body: []byte(`{"user_id":42}`)}
	b.ReportAllocs()
	for b.Loop() {
		if traced {
			_, err = inst.Enqueue(ctx, q, m)
		} else {
			_, err = c.Enqueue(ctx, q, m)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	drain(b, c, q)
}

// BenchmarkMiddleware measures the job middleware (extract, span, duration
// record) around an empty handler.
func BenchmarkMiddleware(b *testing.B) {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://"+unique("benchmw"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	inst := benchInst(b, c)
	d := &fila.Delivery{ID: "01a2299d-58c3-7002-8995-7c7c8cfc73e9", Queue: "q", Kind: "k", Attempt: 1, EnqueuedAt: time.Now(),
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	bare := worker.HandlerFunc(func(context.Context, *fila.Delivery) error { return nil })
	for _, h := range []struct {
		name string
		h    worker.Handler
	}{{"bare", bare}, {"instrumented", inst.Middleware()(bare)}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = h.h.Work(ctx, d)
			}
		})
	}
}
