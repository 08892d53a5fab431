package rabbitmq_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
)

// TestOpenUnreachable: fila.Open connects at Open, so an unreachable broker
// fails there with fila.ErrUnavailable, within ctx.
func TestOpenUnreachable(t *testing.T) {
	testenv.CheckOpenUnreachable(t, func(hostport string) string { return "amqp://guest:guest@" + hostport + "/" })
}

// TestOpenRedactsCredentials: rabbitmq.Open itself keeps the URL's
// credentials out of its errors: a key file's path, which amqp091 puts into
// its error when the file cannot be read (after the TCP connection, so the
// test dials a server that accepts), and the password with a bad parameter.
func TestOpenRedactsCredentials(t *testing.T) {
	cert := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		"amqps://guest:S3cretUser@" + testenv.SilentServer(t) + "/?certfile=" + cert + "&keyfile=/nonexistent/S3cretKey.pem",
		"amqp://guest:S3cretUser@" + testenv.ClosedPort + "/?heartbeat=x",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = rabbitmq.Open(ctx, u, backend.OpenOptions{})
		cancel()
		if err == nil || strings.Contains(err.Error(), "S3cret") {
			t.Errorf("rabbitmq.Open: %v; want an error without credentials", err)
		}
	}
}
