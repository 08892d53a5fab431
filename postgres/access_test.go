package postgres_test

import (
	"context"
	"errors"
	"net/url"
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

// TestWrongPasswordIsAccessDenied: a private cluster with SCRAM
// authentication refuses a wrong password (28P01) at Open, which is
// fila.ErrAccessDenied; the right password opens.
func TestWrongPasswordIsAccessDenied(t *testing.T) {
	pg := startPrivatePostgres(t, "right-pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := fila.Open(ctx, pg.URL("postgres", "wrong-pw"))
	checkAccessDenied(t, "Open with a wrong password", err)
	c, err := fila.Open(ctx, pg.URL("postgres", "right-pw")+"&fila_migrate=true")
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	_ = c.Close()
}

// TestUnknownRoleIsAccessDenied: the shared server trusts loopback, but a
// role that does not exist is still refused (28000).
func TestUnknownRoleIsAccessDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := driverURL(t, nil)
	u := replaceUser(t, raw, "no_such_role_"+randHex(4))
	_, err := fila.Open(ctx, u)
	checkAccessDenied(t, "Open as a role that does not exist", err)
}

// TestInsufficientPrivilegeIsAccessDenied: a role that may log in but has
// no privilege on Fila's schema gets 42501, fila.ErrAccessDenied, at Open
// (the schema check) and on calls.
func TestInsufficientPrivilegeIsAccessDenied(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := "fila_noperm_" + randHex(4)
	if _, err := pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	u := replaceUser(t, driverURL(t, map[string]string{"fila_schema": schema}), role)
	_, err := fila.Open(ctx, u)
	checkAccessDenied(t, "Open without privileges on the schema", err)

	// With usage on the schema (so Open's check passes) but no rights on
	// the tables, calls are refused the same way.
	if _, err := pool.Exec(ctx, "GRANT USAGE ON SCHEMA "+schema+" TO "+role+"; GRANT SELECT ON "+schema+".schema_migrations TO "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP OWNED BY "+role)
	})
	c, err := fila.Open(ctx, u)
	if err != nil {
		t.Fatalf("Open with usage on the schema: %v", err)
	}
	defer c.Close()
	_, err = c.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	checkAccessDenied(t, "Enqueue without privileges on the tables", err)
}

// replaceUser returns raw with its user replaced.
func replaceUser(t *testing.T, raw, user string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}
