package backend_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/fila-go/fila/backend"
)

// TestRedactError: every spelling of a URL's credentials (as written,
// decoded, re-encoded) leaves the message, the error still matches what
// it matched, and an error without credentials is returned as is.
func TestRedactError(t *testing.T) {
	u, _ := url.Parse("amqps://guest:p%40ss@h/?keyfile=%2Fkeys%2Fk.pem&password=a+b&heartbeat=10")
	for _, msg := range []string{"p@ss", "p%40ss", "/keys/k.pem", "%2Fkeys%2Fk.pem", "a b", "a+b"} {
		err := backend.RedactError(fmt.Errorf("%w: dial failed: %s", backend.ErrUnavailable, msg), u)
		if strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), backend.Redacted) {
			t.Errorf("%q: %v", msg, err)
		}
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("%q: %v no longer matches ErrUnavailable", msg, err)
		}
		if errors.Unwrap(err) != nil {
			t.Errorf("%q: the redacted error unwraps to the original", msg)
		}
	}
	plain := fmt.Errorf("x: %w", context.Canceled)
	if got := backend.RedactError(plain, u); got != plain {
		t.Errorf("an error without credentials changed: %v", got)
	}
	if backend.RedactError(nil, u) != nil {
		t.Error("RedactError(nil) is not nil")
	}
}
