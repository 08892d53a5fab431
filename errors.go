package fila

import (
	"errors"
	"fmt"

	"github.com/fila-go/fila/backend"
)

// Errors returned by Fila. They are the same values as in package backend,
// so errors.Is works whichever package a driver used. Context errors are
// returned unwrapped.
var (
	ErrClosed      = backend.ErrClosed
	ErrLeaseLost   = backend.ErrLeaseLost
	ErrDuplicate   = backend.ErrDuplicate
	ErrInvalid     = backend.ErrInvalid
	ErrTooLarge    = backend.ErrTooLarge
	ErrUnsupported = backend.ErrUnsupported
	// ErrUnavailable marks failures that a retry may cure (a lost
	// connection, a broker restarting); drivers wrap them with it.
	ErrUnavailable = backend.ErrUnavailable
	// ErrAccessDenied marks failures because the broker refused the
	// credentials or the operation's permissions; a retry does not cure
	// them (fix the credentials or grants). It matches neither
	// ErrUnavailable nor ErrInvalid.
	ErrAccessDenied = backend.ErrAccessDenied
	// ErrQueueNotEmpty is returned by QueueDelete without Force for a queue
	// that holds messages or dead letters.
	ErrQueueNotEmpty = errors.New("fila: queue is not empty")
	// ErrCancelled is returned by Retry and Release of a delivery whose
	// message was cancelled (MessageCancel): it was dead-lettered with
	// reason ReasonCancelled instead of being retried.
	ErrCancelled = errors.New("fila: message cancelled")
)

// DuplicateError carries the id of the pending message holding a dedup key;
// it matches ErrDuplicate.
type DuplicateError = backend.DuplicateError

// UnsupportedError names the driver and the capability it lacks; it matches
// ErrUnsupported.
type UnsupportedError = backend.UnsupportedError

func isLeaseLost(err error) bool { return errors.Is(err, ErrLeaseLost) }

func deliveryErr(d *Delivery, err error) error {
	return fmt.Errorf("delivery %s: %w", d.ID, err)
}

func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}
