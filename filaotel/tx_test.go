package filaotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filaotel"
	"github.com/fila-go/fila/internal/testenv"
)

// TestEnqueueTxCarriesTrace enqueues inside a PostgreSQL transaction: the
// committed message carries the send span's trace context, the rolled-back
// one is never stored.
func TestEnqueueTxCarriesTrace(t *testing.T) {
	base := testenv.PostgresURL(t)
	c := open(t, withParam(base, "fila_migrate", "true"))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	inst := filaotel.New(c, filaotel.WithTracerProvider(tp), filaotel.WithPropagator(propagation.TraceContext{}))
	q := unique("tx")

	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inst.EnqueueTx(ctx, tx, q, []fila.Message{{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 {
		t.Fatalf("received %d messages; want only the committed one", len(ds))
	}
	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d send spans; want 2", len(ended))
	}
	parent := trace.SpanContextFromContext(inst.Extract(ctx, ds[0]))
	if parent.SpanID() != ended[1].SpanContext().SpanID() {
		t.Errorf("the committed message carries span %v; want the second send span %v", parent.SpanID(), ended[1].SpanContext().SpanID())
	}
	// StartProcess, for consumers without package worker, starts the job
	// span under it.
	_, span := inst.StartProcess(ctx, ds[0])
	span.End()
	if p := span.(sdktrace.ReadOnlySpan).Parent(); p.SpanID() != parent.SpanID() || span.(sdktrace.ReadOnlySpan).SpanKind() != trace.SpanKindConsumer {
		t.Errorf("StartProcess span parent %v; want %v", p.SpanID(), parent.SpanID())
	}
}
