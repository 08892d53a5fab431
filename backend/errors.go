package backend

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by the portable layer and every driver. Package fila
// re-exports them; compare with errors.Is.
var (
	// ErrClosed is returned by every call on a closed client.
	ErrClosed = errors.New("fila: client is closed")
	// ErrLeaseLost is returned when a receipt is no longer the current lease of
	// its message: the lease expired and someone else may hold it, or the
	// delivery was already settled.
	ErrLeaseLost = errors.New("fila: lease lost (the receipt is no longer current)")
	// ErrDuplicate is returned when a dedup key is already held by a pending
	// message of the same queue. Use errors.As with *DuplicateError for the id.
	ErrDuplicate = errors.New("fila: duplicate dedup key")
	// ErrInvalid is returned for invalid input: queue names, kinds, headers,
	// delays, leases, batch sizes, URLs and options.
	ErrInvalid = errors.New("fila: invalid argument")
	// ErrTooLarge is returned when a body or header set exceeds the limit.
	ErrTooLarge = errors.New("fila: message too large")
	// ErrUnsupported is returned when the driver lacks an optional capability.
	ErrUnsupported = errors.New("fila: not supported by this driver")
	// ErrUnavailable marks a failure that retrying later may cure: the broker
	// is unreachable, the connection was lost or is being re-established, the
	// server is shutting down or out of resources. Drivers wrap such errors
	// with it; nothing else.
	ErrUnavailable = errors.New("fila: broker unavailable (retryable)")
	// ErrAccessDenied marks a failure because the broker refused the
	// credentials (wrong password, unknown user) or the permissions the
	// operation needs (a missing grant or ACL). Retrying does not help until
	// the credentials or the broker's permissions are fixed, so it matches
	// neither ErrUnavailable nor ErrInvalid. Drivers wrap such errors with it.
	ErrAccessDenied = errors.New("fila: access denied (the broker refused the credentials or the operation's permissions)")
)

// DuplicateError reports that a dedup key is taken. It matches ErrDuplicate.
type DuplicateError struct {
	Queue    string
	DedupKey string
	// ID is the id of the pending message that holds the key; empty when
	// the key is held for a unique period (fila.Message.UniqueFor) after
	// its message completed.
	ID string
}

func (e *DuplicateError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("fila: queue %q: dedup key %q is held for its unique period", e.Queue, e.DedupKey)
	}
	return fmt.Sprintf("fila: queue %q: dedup key %q is held by pending message %s", e.Queue, e.DedupKey, e.ID)
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// Invalidf returns an error wrapping ErrInvalid with a formatted explanation.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// UnsupportedError names the driver and the capability it lacks. It matches
// ErrUnsupported.
type UnsupportedError struct {
	Driver     string
	Capability string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("fila: the %s driver does not support %s", e.Driver, e.Capability)
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }
