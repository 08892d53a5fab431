package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fila-go/fila/backend"
)

type mysqlError = gomysql.MySQLError

// ErrUnavailable marks errors caused by a lost or refused connection, a
// server shutting down, or a transient server condition (deadlock, lock
// wait timeout, too many connections). The operation did not take effect
// or its outcome is unknown; retrying it is safe for Fila's operations (a
// retried enqueue may store a duplicate when the first attempt committed
// but its reply was lost). It is fila.ErrUnavailable, shared by every
// driver.
var ErrUnavailable = backend.ErrUnavailable

// IsRetryable reports whether err is a transient failure worth retrying.
func IsRetryable(err error) bool { return errors.Is(err, ErrUnavailable) }

// Server error numbers the driver tells apart.
const (
	erAccessDenied      = 1045 // wrong password, unknown user
	erDBAccessDenied    = 1044 // no access to the database
	erTableAccess       = 1142 // command denied on a table
	erColumnAccess      = 1143
	erSpecificAccess    = 1227 // a privilege is needed
	erLockWaitTimeout   = 1205
	erLockDeadlock      = 1213
	erTooManyConns      = 1040
	erConCount          = 1203 // max_user_connections
	erServerShutdown    = 1053
	erQueryInterrupted  = 1317
	erConnectionKilled  = 1927 // MariaDB
	erLockNowait        = 3572 // MySQL NOWAIT
	erReadOnly          = 1290 // --read-only (a failover in progress)
	erNoSuchTable       = 1146
	erBadDB             = 1049
	erUnknownSysVar     = 1193
	erWrongValueForVar  = 1231
	erNetPacketTooLarge = 1153
	erDataTooLong       = 1406
	erTruncatedValue    = 1366
	erOutOfRange        = 1264
	erTruncatedWrong    = 1292
)

// mapErr is the one place where go-sql-driver, network and context errors
// become Fila's errors:
//
//   - when ctx has ended, ctx.Err() itself;
//   - refused credentials and missing privileges wrap
//     backend.ErrAccessDenied;
//   - connection loss, server shutdown, deadlocks, lock wait timeouts and
//     connection limits wrap ErrUnavailable;
//   - values the server refuses and URL parameters it does not know wrap
//     backend.ErrInvalid;
//   - anything else is wrapped with the operation name.
func mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, backend.ErrInvalid) || errors.Is(err, backend.ErrLeaseLost) ||
		errors.Is(err, backend.ErrClosed) || errors.Is(err, ErrUnavailable) || errors.Is(err, backend.ErrAccessDenied) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A timeout inside the client library while ctx itself is alive.
		return fmt.Errorf("fila/mysql: %s: %w: %w", op, ErrUnavailable, err)
	}
	var me *mysqlError
	if errors.As(err, &me) {
		switch me.Number {
		case erAccessDenied, erDBAccessDenied, erTableAccess, erColumnAccess, erSpecificAccess:
			return fmt.Errorf("fila/mysql: %s: %w: %s", op, backend.ErrAccessDenied, me.Message)
		case erLockWaitTimeout, erLockDeadlock, erTooManyConns, erConCount, erServerShutdown,
			erQueryInterrupted, erConnectionKilled, erLockNowait, erReadOnly:
			return fmt.Errorf("fila/mysql: %s: %w: %w", op, ErrUnavailable, err)
		case erUnknownSysVar, erWrongValueForVar:
			return fmt.Errorf("fila/mysql: %s: %w: %w (a URL parameter that is neither a go-sql-driver option, a fila_ parameter nor a server variable?)", op, backend.ErrInvalid, err)
		case erNetPacketTooLarge:
			return fmt.Errorf("fila/mysql: %s: %w: %s (raise the server's max_allowed_packet to 16M or more, and leave go-sql-driver's maxAllowedPacket at 0: Fila's messages may be 15 MiB)", op, backend.ErrInvalid, me.Message)
		case erDataTooLong, erTruncatedValue, erOutOfRange, erTruncatedWrong:
			return fmt.Errorf("fila/mysql: %s: %w: %s", op, backend.ErrInvalid, me.Message)
		case erNoSuchTable:
			return fmt.Errorf("fila/mysql: %s: %w (have the tables been created? run \"fila schema up\" or open with fila_migrate=true)", op, err)
		case erBadDB:
			return fmt.Errorf("fila/mysql: %s: %w: %s", op, backend.ErrInvalid, me.Message)
		}
		return fmt.Errorf("fila/mysql: %s: %w", op, err)
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, gomysql.ErrInvalidConn) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("fila/mysql: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("fila/mysql: %s: %w", op, err)
}

// transient reports errors after which the driver runs a whole
// transaction of its own again: deadlocks and lock wait timeouts, which
// roll the transaction back.
func transient(err error) bool {
	var me *mysqlError
	return errors.As(err, &me) && (me.Number == erLockDeadlock || me.Number == erLockWaitTimeout)
}
