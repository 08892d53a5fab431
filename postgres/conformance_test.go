package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
	"github.com/fila-go/fila/postgres"
)

// TestConformance runs the shared suite against the real server, each
// driver instance with its own pool and LISTEN connection, all in one fresh
// schema.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	raw := driverURL(t, map[string]string{"fila_schema": schema, "pool_max_conns": "4"})
	conformance.Run(t, conformance.Harness{
		Open: func(ctx context.Context) (backend.Driver, error) {
			u, err := url.Parse(raw)
			if err != nil {
				return nil, err
			}
			return postgres.Open(ctx, u)
		},
		BeginTx: func(ctx context.Context) (conformance.Tx, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return conformance.Tx{}, err
			}
			return conformance.Tx{Value: tx, Commit: tx.Commit, Rollback: tx.Rollback}, nil
		},
		WakeupBound:     time.Second,
		RedeliveryBound: 2 * time.Second,
	})
}
