package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestLogReceiveNeverOverMax: the driver itself never returns more than
// Max deliveries. After a batch whose in-progress part (a transaction that
// committed late) returned fewer rows than its limit, log_receive read the
// range that follows with the old limit instead of what was left of Max:
// Receive(Max 5) returned 7, and the worker's slots then deadlocked
// (issue 38, item 1). The reproduction is the issue's, deterministic.
func TestLogReceiveNeverOverMax(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u, err := url.Parse(driverURL(t, map[string]string{"fila_schema": schema, "fila_mode": "log",
		"fila_rotate_interval": "1h"}))
	if err != nil {
		t.Fatal(err)
	}
	bd, err := postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bd.Close() })
	drv := bd.(*postgres.Driver)
	const q = "overmax"
	msgs := func(prefix string, n int) []backend.Message {
		out := make([]backend.Message, n)
		for i := range out {
			out[i] = backend.Message{ID: uuid.NewString(), Kind: "k", Body: []byte(fmt.Sprint(prefix, i))}
		}
		return out
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := drv.EnqueueTx(ctx, tx, q, msgs("tx", 2)); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	if _, err := drv.Enqueue(ctx, q, msgs("one", 1)); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	p := backend.ReceiveParams{Max: 1, Lease: time.Minute}
	if ds, err := drv.Receive(ctx, q, p); err != nil || len(ds) != 1 {
		t.Fatalf("first Receive(Max 1): %d deliveries, %v", len(ds), err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := drv.Enqueue(ctx, q, msgs("later", 10)); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	total := 1
	for total < 13 {
		p.Max = 5
		ds, err := drv.Receive(ctx, q, p)
		if err != nil {
			t.Fatalf("Receive(Max 5) after %d: %v", total, err)
		}
		if len(ds) > p.Max {
			t.Fatalf("Receive(Max %d) returned %d deliveries", p.Max, len(ds))
		}
		total += len(ds)
	}
}
