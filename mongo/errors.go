package mongo

import (
	"context"
	"errors"
	"fmt"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/fila-go/fila/backend"
)

// mapErr is the one place where errors of the mongo driver become Fila
// errors. The caller's context errors come back unwrapped; a closed driver
// gives backend.ErrClosed; everything else is wrapped with the operation.
func (d *Driver) mapErr(ctx context.Context, err error, op string) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, backend.ErrLeaseLost), errors.Is(err, backend.ErrInvalid),
		errors.Is(err, backend.ErrUnsupported), errors.Is(err, backend.ErrClosed):
		return err
	case errors.Is(err, gomongo.ErrClientDisconnected):
		return backend.ErrClosed
	}
	return fmt.Errorf("fila/mongo: %s: %w", op, err)
}

// dupKeyIndexes returns the indexes (in the slice given to InsertMany) of
// the documents refused for a duplicate key, and whether every write error
// was one. Any other error gives ok false.
func dupKeyIndexes(err error) (idx []int, ok bool) {
	var bwe gomongo.BulkWriteException
	if !errors.As(err, &bwe) {
		return nil, false
	}
	if bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return nil, false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 && we.Code != 11001 {
			return nil, false
		}
		idx = append(idx, we.Index)
	}
	return idx, true
}

// errDedupRace reports that a dedup key was taken by a concurrent enqueue
// inside a transaction; the transaction is aborted by the server.
var errDedupRace = errors.New("a concurrent enqueue took a dedup key during the transaction")
