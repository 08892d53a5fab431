package mongo

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// checkAccessDenied checks that err is ErrAccessDenied and nothing a caller
// would retry or call a usage error.
func checkAccessDenied(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, backend.ErrAccessDenied) || errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrInvalid) {
		t.Errorf("%s: %v; want ErrAccessDenied only", what, err)
	}
}

// TestRefusedCredentialsAreAccessDenied opens the test server with
// credentials it refuses. A MongoDB server refuses the unknown user; the
// FerretDB the test machines run (SQLite handler) cannot check passwords at
// all and refuses every SCRAM authentication with AuthenticationFailed (18),
// so there the test proves the path of a real refusal through the mongo
// driver's connection handshake, not a password check.
func TestRefusedCredentialsAreAccessDenied(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	u := driverURL(t, s, nil)
	u.User = url.UserPassword("no_such_user", "wrong-password")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u.String())
	if err == nil {
		_ = c.Close()
	}
	checkAccessDenied(t, "Open with refused credentials", err)
}

// TestAccessDeniedCodes: the server's refusals of credentials and
// permissions, as the mongo driver reports them, map to ErrAccessDenied;
// a refusal that came with a network failure stays retryable.
func TestAccessDeniedCodes(t *testing.T) {
	d := &Driver{}
	ctx := context.Background()
	for _, err := range []error{
		gomongo.CommandError{Code: 18, Name: "AuthenticationFailed", Message: "Authentication failed."},
		gomongo.CommandError{Code: 13, Name: "Unauthorized", Message: "not authorized on fila to execute command { insert: ... }"},
		gomongo.CommandError{Code: 8000, Name: "AtlasError", Message: "bad auth : Authentication failed."},
		gomongo.WriteException{WriteErrors: []gomongo.WriteError{{Code: 13, Message: "not authorized"}}},
	} {
		checkAccessDenied(t, err.Error(), d.mapErr(ctx, err, "op"))
	}
	net := gomongo.CommandError{Labels: []string{"NetworkError"}, Message: "connection reset during authentication"}
	if err := d.mapErr(ctx, net, "op"); !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrAccessDenied) {
		t.Errorf("network error: %v; want ErrUnavailable", err)
	}
}
