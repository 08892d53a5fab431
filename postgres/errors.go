package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fila-go/fila/backend"
)

// ErrUnavailable marks errors caused by a lost or refused connection, a
// server shutting down, or a transient server condition (serialization
// failure, deadlock, too many connections). The operation did not take
// effect or its outcome is unknown; retrying it is safe for Fila's
// operations (a retried enqueue may store a duplicate when the first attempt
// committed but its reply was lost). The pool replaces broken connections by
// itself. Match it with errors.Is, or use IsRetryable.
// It is fila.ErrUnavailable, shared by every driver.
var ErrUnavailable = backend.ErrUnavailable

// IsRetryable reports whether err is a transient failure worth retrying.
func IsRetryable(err error) bool { return errors.Is(err, ErrUnavailable) }

// mapErr is the one place where pgx, pgconn, network and context errors
// become Fila's errors:
//
//   - when ctx has ended, ctx.Err() itself (errors.Is holds for
//     context.Canceled and context.DeadlineExceeded);
//   - invalid input the server rejects (22xxx data exceptions) and a URL
//     parameter the server (or a pooler) does not know wrap
//     backend.ErrInvalid;
//   - refused credentials (class 28: wrong password, unknown role, a
//     pg_hba.conf reject) and missing privileges (42501) wrap
//     backend.ErrAccessDenied;
//   - connection loss, admin shutdown, serialization failures, deadlocks and
//     resource exhaustion wrap ErrUnavailable;
//   - anything else is wrapped with the operation name.
func mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A deadline inside pgx (for example a connect timeout) while ctx
		// itself is alive: a transient condition.
		return fmt.Errorf("fila/postgres: %s: %w: %w", op, ErrUnavailable, err)
	}
	if errors.Is(err, backend.ErrInvalid) || errors.Is(err, backend.ErrLeaseLost) ||
		errors.Is(err, backend.ErrClosed) || errors.Is(err, ErrUnavailable) || errors.Is(err, backend.ErrAccessDenied) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "28"), // invalid authorization: wrong password (28P01), unknown role, pg_hba reject (28000)
			pe.Code == "42501": // insufficient privilege
			return fmt.Errorf("fila/postgres: %s: %w: %w", op, backend.ErrAccessDenied, err)
		case pe.Code == "42704" && strings.Contains(pe.Message, "configuration parameter"),
			pe.Code == "08P01" && strings.Contains(pe.Message, "startup parameter"):
			// A URL parameter neither pgx nor Fila knows, passed to the
			// server as a setting it does not have (or that a pooler
			// such as PgBouncer does not pass on).
			return fmt.Errorf("fila/postgres: %s: %w: %s (a URL parameter that is not a pgx option, a fila_ parameter or a setting the server accepts at connection start?)",
				op, backend.ErrInvalid, pe.Message)
		case strings.HasPrefix(pe.Code, "22"): // data exception
			return fmt.Errorf("fila/postgres: %s: %w: %s", op, backend.ErrInvalid, pe.Message)
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"), // insufficient resources
			pe.Code == "40001",               // serialization failure
			pe.Code == "40P01",               // deadlock detected
			pe.Code == "55P03",               // lock not available
			pe.Code == "57P01",               // admin shutdown
			pe.Code == "57P02",               // crash shutdown
			pe.Code == "57P03",               // cannot connect now
			pe.Code == "57014":               // query canceled (statement timeout)
			return fmt.Errorf("fila/postgres: %s: %w: %w", op, ErrUnavailable, err)
		case pe.Code == "42P01" || pe.Code == "3F000":
			return fmt.Errorf("fila/postgres: %s: %w (has the schema been migrated? see postgres.Migrate)", op, err)
		}
		return fmt.Errorf("fila/postgres: %s: %w", op, err)
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.As(err, &ne) || errors.As(err, &ce) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		isConnClosed(err) {
		return fmt.Errorf("fila/postgres: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("fila/postgres: %s: %w", op, err)
}

// isConnClosed recognizes pgx's errors for a connection that died earlier.
func isConnClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "conn closed") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "broken pipe") || strings.Contains(s, "unexpected EOF")
}
