package rabbitmq

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// checkAccessDenied checks that err is backend.ErrAccessDenied and nothing
// a caller would retry or call a usage error.
func checkAccessDenied(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, backend.ErrAccessDenied) || errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrInvalid) {
		t.Errorf("%s: %v; want ErrAccessDenied only", what, err)
	}
}

// TestWrongPasswordIsAccessDenied: the shared broker refuses guest with a
// wrong password at Open (ACCESS_REFUSED - Login was refused), which is
// ErrAccessDenied.
func TestWrongPasswordIsAccessDenied(t *testing.T) {
	u, err := url.Parse(testenv.RabbitMQURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := Open(ctx, u, backend.OpenOptions{})
	if err == nil {
		_ = d.Close()
	}
	checkAccessDenied(t, "Open with a wrong password", err)
}

// TestAccessRefusalsMap: amqp091's own refusal errors (a failed SASL
// negotiation, refused credentials or vhost, a permission refused on a
// resource) map to ErrAccessDenied; argument refusals stay ErrInvalid.
func TestAccessRefusalsMap(t *testing.T) {
	ctx := context.Background()
	for _, err := range []error{
		amqp.ErrSASL, amqp.ErrCredentials, amqp.ErrVhost,
		&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - access to queue 'q' in vhost '/' refused for user 'u'", Server: true},
		&amqp.Error{Code: amqp.NotAllowed, Reason: "NOT_ALLOWED - access to vhost 'v' refused for user 'u'", Server: true},
	} {
		checkAccessDenied(t, err.Error(), mapErr(ctx, "connect", err))
	}
	err := mapErr(ctx, "declare", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg", Server: true})
	if !errors.Is(err, backend.ErrInvalid) || errors.Is(err, backend.ErrAccessDenied) {
		t.Errorf("PRECONDITION_FAILED: %v; want ErrInvalid", err)
	}
}
