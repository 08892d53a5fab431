package filapubsub

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/fila-go/fila"
	"gocloud.dev/gcerrors"
)

// NotFoundError is the error of a Send to a topic that has no subscription
// when TopicOptions.RequireSubscription is set (Queue is empty; nothing was
// stored), and of a receive from a subscription whose queue is no longer
// subscribed to its topic (someone ended it with Client.TopicUnsubscribe,
// which also deleted the queue). gcerrors.Code reports it as
// gcerrors.NotFound; ErrorAs exposes it.
type NotFoundError struct {
	Topic string
	Queue string
}

func (e *NotFoundError) Error() string {
	if e.Queue == "" {
		return fmt.Sprintf("filapubsub: topic %q has no subscription: the message was not stored", e.Topic)
	}
	return fmt.Sprintf("filapubsub: queue %q is not subscribed to topic %q (the subscription was ended)", e.Queue, e.Topic)
}

// errorCode maps an error of the driver to a gcerrors code; see the package
// documentation for the table.
func errorCode(err error) gcerrors.ErrorCode {
	var nf *NotFoundError
	switch {
	case err == nil:
		return gcerrors.OK
	case errors.As(err, &nf):
		return gcerrors.NotFound
	case errors.Is(err, context.Canceled):
		return gcerrors.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return gcerrors.DeadlineExceeded
	case errors.Is(err, fila.ErrInvalid), errors.Is(err, fila.ErrTooLarge):
		return gcerrors.InvalidArgument
	case errors.Is(err, fila.ErrAccessDenied):
		return gcerrors.PermissionDenied
	case errors.Is(err, fila.ErrUnsupported):
		return gcerrors.Unimplemented
	case errors.Is(err, fila.ErrDuplicate):
		return gcerrors.AlreadyExists
	case errors.Is(err, fila.ErrClosed), errors.Is(err, fila.ErrLeaseLost),
		errors.Is(err, fila.ErrCancelled), errors.Is(err, fila.ErrQueueNotEmpty):
		return gcerrors.FailedPrecondition
	}
	// fila.ErrUnavailable has no gcerrors code of its own; it is retryable
	// (IsRetryable), and errors.Is(err, fila.ErrUnavailable) tells it.
	return gcerrors.Unknown
}

// isRetryable reports whether gocloud should retry a call that failed with
// err: only when the broker could not be reached.
func isRetryable(err error) bool { return errors.Is(err, fila.ErrUnavailable) }

var errorType = reflect.TypeFor[error]()

// errorAs is errors.As for every target whose type is an error type (so it
// reaches *fila.UnsupportedError, *fila.DuplicateError, *NotFoundError and
// the broker client libraries' error types drivers wrap), and false for
// others instead of panicking.
func errorAs(err error, target any) bool {
	t := reflect.TypeOf(target)
	if err == nil || t == nil || t.Kind() != reflect.Pointer || reflect.ValueOf(target).IsNil() {
		return false
	}
	if e := t.Elem(); e.Kind() != reflect.Interface && !e.Implements(errorType) {
		return false
	}
	return errors.As(err, target)
}

// withoutLeaseLost drops the ErrLeaseLost parts of err, which gocloud wants
// suppressed (a double ack, or an ack or nack after the lease ended: the
// message comes back by itself), and returns what is left.
func withoutLeaseLost(err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range j.Unwrap() {
			if e = withoutLeaseLost(e); e != nil {
				rest = append(rest, e)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		if len(rest) == len(j.Unwrap()) {
			return err
		}
		return errors.Join(rest...)
	}
	if errors.Is(err, fila.ErrLeaseLost) {
		return nil
	}
	return err
}
