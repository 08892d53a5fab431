package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// CheckOpenUnreachable checks fila.Open's promise for a broker that cannot
// be reached, with urlFor building the driver's URL for a host:port. Where
// nothing listens (ClosedPort), Open fails with fila.ErrUnavailable. Where a
// server accepts connections and never answers (SilentServer), Open returns
// soon after ctx's deadline with an error matching both fila.ErrUnavailable
// and context.DeadlineExceeded. Open must not leave a client behind in either
// case.
func CheckOpenUnreachable(t *testing.T, urlFor func(hostport string) string) {
	t.Helper()
	t.Run("closed port", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := fila.Open(ctx, urlFor(ClosedPort))
		if err == nil {
			_ = c.Close()
			t.Fatal("Open of a closed port succeeded; want it to fail at Open")
		}
		if !errors.Is(err, fila.ErrUnavailable) {
			t.Errorf("Open of a closed port: %v; want fila.ErrUnavailable", err)
		}
	})
	t.Run("silent server", func(t *testing.T) {
		const wait = 500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		c, err := fila.Open(ctx, urlFor(SilentServer(t)))
		took := time.Since(start)
		if err == nil {
			_ = c.Close()
			t.Fatal("Open of a server that never answers succeeded")
		}
		if !errors.Is(err, fila.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Open of a server that never answers: %v; want fila.ErrUnavailable and context.DeadlineExceeded", err)
		}
		if took > wait+2*time.Second {
			t.Errorf("Open of a server that never answers took %v with a context of %v", took, wait)
		}
	})
}
