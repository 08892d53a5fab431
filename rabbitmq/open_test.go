package rabbitmq_test

import (
	"testing"

	"github.com/fila-go/fila/internal/testenv"
)

// TestOpenUnreachable: fila.Open connects at Open, so an unreachable broker
// fails there with fila.ErrUnavailable, within ctx.
func TestOpenUnreachable(t *testing.T) {
	testenv.CheckOpenUnreachable(t, func(hostport string) string { return "amqp://guest:guest@" + hostport + "/" })
}
