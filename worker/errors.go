package worker

import (
	"errors"
	"fmt"
)

// Causes of a job context's cancellation, from context.Cause. A lost lease
// has fila.ErrLeaseLost as its cause.
var (
	// ErrTimeout is the cause when the job ran past its timeout.
	ErrTimeout = errors.New("worker: job timed out")
	// ErrShutdown is the cause when the worker's shutdown grace ran out
	// before the job returned.
	ErrShutdown = errors.New("worker: shutdown grace period over")
)

// PermanentError marks a failure that retrying cannot fix (a malformed
// body, a record that no longer exists, a refused request): the worker
// dead-letters the message at once with the error text as the reason, without
// spending the retry budget. Create one with [Permanent]; detect one with
// [IsPermanent] or errors.As.
type PermanentError struct {
	Err error
}

// Permanent wraps err so the worker dead-letters the job at once instead of
// retrying it. Permanent(nil) is nil.
//
//	if errors.Is(err, sql.ErrNoRows) {
//		return worker.Permanent(fmt.Errorf("user %d is gone", args.UserID))
//	}
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, was made by
// [Permanent].
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// Error returns the wrapped error's text, so the dead-letter reason reads as
// the handler's own message.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// PanicError is the error of a job whose handler panicked. The worker treats
// it as a transient failure (the job is retried) and puts the panic value
// and Stack in the reason.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the panicking goroutine's stack from the panicking function
	// down, trimmed to maxStackBytes.
	Stack []byte
}

// Error returns "panic: " and the value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}
