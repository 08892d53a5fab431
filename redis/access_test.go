package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// checkAccessDenied checks that err is fila.ErrAccessDenied and nothing a
// caller would retry or call a usage error.
func checkAccessDenied(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, fila.ErrAccessDenied) || errors.Is(err, fila.ErrUnavailable) || errors.Is(err, fila.ErrInvalid) {
		t.Errorf("%s: %v; want fila.ErrAccessDenied only", what, err)
	}
}

// TestAuthenticationIsAccessDenied: a private Redis with a password (the
// shared server's configuration is never changed) refuses a wrong password
// (WRONGPASS) and a missing one (NOAUTH) at Open with fila.ErrAccessDenied,
// and an ACL user without access to Fila's keys is refused on enqueue
// (NOPERM), through the script and through MULTI/EXEC.
func TestAuthenticationIsAccessDenied(t *testing.T) {
	srv := startPrivateRedis(t, "--requirepass", "right-pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := fila.Open(ctx, srv.URL(":wrong-pw"))
	checkAccessDenied(t, "Open with a wrong password", err)
	_, err = fila.Open(ctx, srv.URL(""))
	checkAccessDenied(t, "Open without a password", err)
	c, err := fila.Open(ctx, srv.URL(":right-pw"))
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	_ = c.Close()

	admin := srv.Client("right-pw")
	if err := admin.Do(ctx, "ACL", "SETUSER", "limited", "on", ">limited-pw", "~other:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	c, err = fila.Open(ctx, srv.URL("limited:limited-pw"))
	if err != nil {
		t.Fatalf("Open as a user limited to other keys: %v", err)
	}
	defer c.Close()
	_, err = c.Enqueue(ctx, "q", fila.Message{Kind: "plain"})
	checkAccessDenied(t, "plain Enqueue without access to the keys", err)
	_, err = c.Enqueue(ctx, "q", fila.Message{Kind: "scripted", DedupKey: "d"})
	checkAccessDenied(t, "scripted Enqueue without access to the keys", err)
}
