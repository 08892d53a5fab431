package mongo

import (
	"context"
	"errors"
	"fmt"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"

	"github.com/fila-go/fila/backend"
)

// mapErr is the one place where errors of the mongo driver become Fila
// errors:
//
//   - when the caller's ctx has ended, ctx.Err() itself (errors.Is holds for
//     context.Canceled and context.DeadlineExceeded), whatever the server
//     or the mongo driver said: an operation interrupted because the caller
//     gave up is the caller's cancellation;
//   - a closed driver or client gives backend.ErrClosed;
//   - refused credentials or permissions wrap backend.ErrAccessDenied (see
//     accessDenied);
//   - failures a later retry may cure wrap backend.ErrUnavailable (see
//     retryable): a lost or refused connection, no reachable primary, a
//     server shutting down or stepping down, and an operation the server
//     interrupted or timed out (MaxTimeMSExpired) although the caller is
//     still waiting;
//   - everything else is wrapped with the operation.
func (d *Driver) mapErr(ctx context.Context, err error, op string) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, backend.ErrLeaseLost), errors.Is(err, backend.ErrInvalid),
		errors.Is(err, backend.ErrUnsupported), errors.Is(err, backend.ErrClosed),
		errors.Is(err, backend.ErrUnavailable):
		return err
	case errors.Is(err, backend.ErrAccessDenied):
		return err
	case errors.Is(err, gomongo.ErrClientDisconnected):
		return backend.ErrClosed
	case accessDenied(err):
		return fmt.Errorf("fila/mongo: %s: %w: %w", op, backend.ErrAccessDenied, err)
	case retryable(err):
		return fmt.Errorf("fila/mongo: %s: %w: %w", op, backend.ErrUnavailable, err)
	}
	return fmt.Errorf("fila/mongo: %s: %w", op, err)
}

// accessDeniedCodes are the server error codes of refused credentials or
// permissions.
var accessDeniedCodes = []int{
	13,   // Unauthorized
	18,   // AuthenticationFailed
	8000, // AtlasError: "bad auth" from MongoDB Atlas
}

// accessDenied reports whether err is the server refusing the credentials
// or the operation's permissions (accessDeniedCodes), or the mongo driver's
// authentication failing during the connection handshake for a reason other
// than the network.
func accessDenied(err error) bool {
	var se gomongo.ServerError
	if errors.As(err, &se) {
		for _, c := range accessDeniedCodes {
			if se.HasErrorCode(c) {
				return true
			}
		}
	}
	var ae *auth.Error
	return errors.As(err, &ae) && !gomongo.IsNetworkError(err) && !gomongo.IsTimeout(err) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// retryableCodes are the server error codes of failures that a retry may
// cure: the operation was interrupted or ran out of time, the node is
// shutting down, stepping down or not the primary, or the network between
// nodes failed.
var retryableCodes = []int{
	6,     // HostUnreachable
	7,     // HostNotFound
	50,    // MaxTimeMSExpired
	89,    // NetworkTimeout
	91,    // ShutdownInProgress
	189,   // PrimarySteppedDown
	262,   // ExceededTimeLimit
	9001,  // SocketException
	10107, // NotWritablePrimary
	11600, // InterruptedAtShutdown
	11601, // Interrupted
	11602, // InterruptedDueToReplStateChange
	13435, // NotPrimaryNoSecondaryOk
	13436, // NotPrimaryOrSecondary
}

// retryable reports whether err is a failure that a retry may cure (the
// caller's ctx being alive): network errors, server selection and other
// timeouts of the mongo driver itself, errors the server labels retryable,
// and the codes in retryableCodes. An InternalError (code 1) whose message
// says "interrupted" counts as well: that is how a server on an SQL engine
// (FerretDB on SQLite: "interrupted (9)", SQLITE_INTERRUPT) reports a
// statement interrupted under it, which a retry runs again.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A context of the mongo driver's own (server selection, connect
		// timeout) while the caller's ctx is alive.
		return true
	}
	if gomongo.IsNetworkError(err) || gomongo.IsTimeout(err) {
		return true
	}
	var se gomongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	if se.HasErrorLabel("RetryableWriteError") || se.HasErrorLabel("TransientTransactionError") {
		return true
	}
	for _, c := range retryableCodes {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return se.HasErrorCodeWithMessage(1, "interrupted")
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
