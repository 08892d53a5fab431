package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Errors of this driver beyond the backend sentinels. They are more
// specific kinds of backend.ErrUnavailable (fila.ErrUnavailable): errors.Is
// matches both, so a caller that retries on fila.ErrUnavailable retries
// these too (an Enqueue that failed this way may or may not have stored its
// messages; at-least-once delivery covers that). A lost or refused
// connection is reported with fila.ErrUnavailable itself.
var (
	// ErrBlocked reports that RabbitMQ blocked this connection's publishing
	// (connection.blocked) because a memory or disk alarm is raised; see the
	// broker's log. Publishing resumes when the alarm clears.
	ErrBlocked error = &retryableError{"rabbitmq: the broker blocked publishing (connection.blocked: a memory or disk alarm is raised on the broker)"}
	// ErrNacked reports that RabbitMQ refused to store a published message
	// (a publisher confirm nack).
	ErrNacked error = &retryableError{"rabbitmq: the broker nacked the publish"}
	// ErrUnroutable reports that a mandatory publish was returned: the
	// target queue does not exist (it was deleted behind the driver's back).
	// The driver declares it again on the next call.
	ErrUnroutable error = &retryableError{"rabbitmq: the message was returned unroutable"}
)

// retryableError is a sentinel that also matches backend.ErrUnavailable.
type retryableError struct{ msg string }

func (e *retryableError) Error() string { return e.msg }

// Is makes errors.Is(err, backend.ErrUnavailable) hold.
func (e *retryableError) Is(target error) bool { return target == backend.ErrUnavailable }

// mapErr is the one place broker and client-library errors become Fila
// errors: context errors come back unwrapped, a closed connection or channel
// becomes backend.ErrUnavailable, refused logins and permissions
// (ACCESS_REFUSED, access to a vhost refused) become backend.ErrAccessDenied,
// argument refusals become ErrInvalid.
func mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backend.ErrUnavailable)) {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, backend.ErrClosed) || errors.Is(err, backend.ErrInvalid) || errors.Is(err, backend.ErrLeaseLost) ||
		errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrAccessDenied) {
		return err
	}
	if errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("%w: rabbitmq: %s: %v", backend.ErrUnavailable, op, err)
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch {
		case ae.Code == amqp.AccessRefused, // login refused (amqp.ErrCredentials, amqp.ErrSASL), or no permission on a resource
			ae.Code == amqp.NotAllowed && strings.Contains(ae.Reason, "refused for user"): // no access to the vhost
			return fmt.Errorf("%w: rabbitmq: %s: %s (%d)", backend.ErrAccessDenied, op, ae.Reason, ae.Code)
		}
		switch ae.Code {
		case amqp.PreconditionFailed, amqp.NotAllowed, amqp.InvalidPath:
			return fmt.Errorf("%w: rabbitmq: %s: %s (%d)", backend.ErrInvalid, op, ae.Reason, ae.Code)
		case amqp.ConnectionForced, amqp.ChannelError, amqp.FrameError, amqp.InternalError, amqp.ResourceError, amqp.NotFound:
			return fmt.Errorf("%w: rabbitmq: %s: %s (%d)", backend.ErrUnavailable, op, ae.Reason, ae.Code)
		}
		return fmt.Errorf("rabbitmq: %s: %w", op, err)
	}
	return fmt.Errorf("%w: rabbitmq: %s: %v", backend.ErrUnavailable, op, err)
}
