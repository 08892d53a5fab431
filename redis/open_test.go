package redis_test

import (
	"testing"

	"github.com/fila-go/fila/internal/testenv"
)

// TestOpenUnreachable: fila.Open connects and checks at Open, so an
// unreachable Redis fails there with fila.ErrUnavailable, within ctx.
func TestOpenUnreachable(t *testing.T) {
	testenv.CheckOpenUnreachable(t, func(hostport string) string { return "redis://" + hostport + "/0" })
}
