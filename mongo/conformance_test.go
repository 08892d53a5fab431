package mongo

import (
	"context"
	"testing"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
)

// TestConformance runs the shared suite. Against FerretDB v1 it declares
// what that server lacks; against MongoDB (a replica set from
// testcontainers) nothing is declared missing.
func TestConformance(t *testing.T) {
	s := mongoServer(t)
	db := testDatabase(t, s)
	// Create the collections and indexes once, before the parallel tests
	// open their drivers.
	openDriver(t, s, map[string]string{"fila_database": db})
	h := conformance.Harness{
		Open: func(ctx context.Context) (backend.Driver, error) {
			return Open(ctx, driverURL(t, s, map[string]string{"fila_database": db}))
		},
		Missing: map[conformance.Feature]string{},
	}
	if s.caps.FerretDB {
		h.Missing[conformance.FeatureConcurrentClaims] = "FerretDB v1 findOneAndUpdate is not atomic"
	}
	if s.caps.Transactions {
		h.BeginTx = func(ctx context.Context) (conformance.Tx, error) {
			sess, err := s.client.StartSession()
			if err != nil {
				return conformance.Tx{}, err
			}
			if err := sess.StartTransaction(); err != nil {
				sess.EndSession(ctx)
				return conformance.Tx{}, err
			}
			return conformance.Tx{
				Value: gomongo.NewSessionContext(ctx, sess),
				Commit: func(ctx context.Context) error {
					defer sess.EndSession(ctx)
					return sess.CommitTransaction(ctx)
				},
				Rollback: func(ctx context.Context) error {
					defer sess.EndSession(ctx)
					return sess.AbortTransaction(ctx)
				},
			}, nil
		}
	} else {
		reason := "the server has no transactions (not a replica set)"
		if s.caps.FerretDB {
			reason = "FerretDB v1 has no transactions"
		}
		h.Missing[conformance.FeatureTxEnqueue] = reason
		h.Missing[conformance.FeatureAtomicBatch] = reason
	}
	t.Logf("server %s: %+v", s.caps.Version, s.caps)
	conformance.Run(t, h)
}
