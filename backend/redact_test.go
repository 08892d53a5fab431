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

// TestSplitQuery: prefixed parameters, in any case, come back decoded; the
// others exactly as written, '+' and escapes included; a name that does not
// decode is ErrInvalid.
func TestSplitQuery(t *testing.T) {
	own, rest, err := backend.SplitQuery("fila_a=1&FILA_B=x%20y&options=-c+a%3Db&&sslmode=disable", "fila_")
	if err != nil {
		t.Fatal(err)
	}
	if own.Get("fila_a") != "1" || own.Get("FILA_B") != "x y" || len(own) != 2 {
		t.Errorf("own = %v", own)
	}
	if len(rest) != 2 || rest[0] != "options=-c+a%3Db" || rest[1] != "sslmode=disable" {
		t.Errorf("rest = %q", rest)
	}
	if _, _, err := backend.SplitQuery("bad%zz=1", "fila_"); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("SplitQuery of an undecodable name: %v; want ErrInvalid", err)
	}
}
