package memory_test

import (
	"context"
	"testing"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
	"github.com/fila-go/fila/memory"
)

func TestConformance(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	conformance.Run(t, conformance.Harness{
		Open: func(context.Context) (backend.Driver, error) { return b.Open(), nil },
		BeginTx: func(context.Context) (conformance.Tx, error) {
			tx := b.Begin()
			return conformance.Tx{
				Value:    tx,
				Commit:   func(context.Context) error { return tx.Commit() },
				Rollback: func(context.Context) error { return tx.Rollback() },
			}, nil
		},
	})
}
