package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
	"github.com/fila-go/fila/mysql"
)

// TestConformance runs the shared suite against the real server, each
// driver instance with its own pool, all on one fresh set of tables.
// Nothing is declared missing.
func TestConformance(t *testing.T) {
	db := testDB(t)
	prefix := freshPrefix(t, db)
	conformance.Run(t, conformance.Harness{
		Open: func(ctx context.Context) (backend.Driver, error) {
			return mysql.Open(ctx, driverURL(t, "fila_prefix", prefix, "fila_max_conns", "3"), backend.OpenOptions{})
		},
		BeginTx: func(ctx context.Context) (conformance.Tx, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return conformance.Tx{}, err
			}
			return conformance.Tx{
				Value:    tx,
				Commit:   func(context.Context) error { return tx.Commit() },
				Rollback: func(context.Context) error { return tx.Rollback() },
			}, nil
		},
		// Receivers of other processes poll: a wake-up across drivers
		// comes within the poll interval (250ms) of the commit.
		WakeupBound:     time.Second,
		RedeliveryBound: 2 * time.Second,
		Parallel:        8,
	})
}
