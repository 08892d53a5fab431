package fila_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	_ "github.com/fila-go/fila/memory"
)

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		url      string
		contains []string
	}{
		{"nats://localhost", []string{`scheme "nats"`, "mem"}},
		{"redis://localhost:6379", []string{`scheme "redis"`, `import _ "github.com/fila-go/fila/redis"`}},
		{"localhost:5432", []string{"scheme"}},
		{"mem://x?colour=blue", []string{"colour"}},
		{"::not a url", []string{"broker URL"}},
	}
	for _, tc := range cases {
		_, err := fila.Open(ctx, tc.url)
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", tc.url, err)
			continue
		}
		for _, s := range tc.contains {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Open(%q) error %q does not mention %q", tc.url, err, s)
			}
		}
	}
}

func TestOpenRedactsPasswords(t *testing.T) {
	_, err := fila.Open(context.Background(), "mem://user:s3cret@x?bogus=1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open error %v must exist and not show the password", err)
	}
	if got := fila.Redact("postgres://u:pw@h/db"); strings.Contains(got, "pw@") {
		t.Errorf("Redact kept the password: %s", got)
	}
	if got := fila.Redact("mem://"); got != "mem://" {
		t.Errorf("Redact(mem://) = %q", got)
	}
}

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering mem twice did not panic")
		}
	}()
	fila.Register("mem", func(context.Context, *url.URL) (backend.Driver, error) { return nil, nil })
}
