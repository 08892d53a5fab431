package fila_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
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

// TestRedactQueryCredentials: Redact hides credential parameters,
// whatever their case, and keeps every other part of the URL as written.
func TestRedactQueryCredentials(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://u@h/db?password=S3cret&sslmode=disable":                "postgres://u@h/db?password=xxxxx&sslmode=disable",
		"postgres://u:pw@h/db?sslmode=require&SSLPassword=S3cret&sslkey=k": "postgres://u:xxxxx@h/db?sslmode=require&SSLPassword=xxxxx&sslkey=xxxxx",
		"amqps://g@h/?keyfile=%2Fk%2FS3cret.pem&heartbeat=10":              "amqps://g@h/?keyfile=xxxxx&heartbeat=10",
		"rediss://h/0?token=S3cret&db=1":                                   "rediss://h/0?token=xxxxx&db=1",
		"mongodb://h/?authMechanismProperties=AWS_SESSION_TOKEN:S3cret":    "mongodb://h/?authMechanismProperties=xxxxx",
		"mongodb+srv://h/?client_secret=S3cret&x_credential=S3cret":        "mongodb+srv://h/?client_secret=xxxxx&x_credential=xxxxx",
		"redis://h:6379/0?pool_size=5":                                     "redis://h:6379/0?pool_size=5",
		"mem://":                                                           "mem://",
	} {
		if got := fila.Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestOpenRedactsQueryCredentials: the error of Open for a URL with a
// credential parameter and an unknown one does not show the credential.
func TestOpenRedactsQueryCredentials(t *testing.T) {
	_, err := fila.Open(context.Background(), "mem://x?password=S3cret&bogus=1")
	if !errors.Is(err, fila.ErrInvalid) || strings.Contains(err.Error(), "S3cret") {
		t.Errorf("Open error %v: want ErrInvalid without the password", err)
	}
}

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering mem twice did not panic")
		}
	}()
	fila.Register("mem", func(context.Context, *url.URL, backend.OpenOptions) (backend.Driver, error) { return nil, nil })
}

// TestBadOptions checks that an option value out of range fails Open and
// New with ErrInvalid instead of being ignored, and that the range's ends
// are accepted.
func TestBadOptions(t *testing.T) {
	ctx := context.Background()
	bad := map[string]fila.Option{
		"WithLease(0)":                fila.WithLease(0),
		"WithLease(8 days)":           fila.WithLease(fila.MaxLease + time.Nanosecond),
		"WithMaxAttempts(0)":          fila.WithMaxAttempts(0),
		"WithMaxAttempts(limit+1)":    fila.WithMaxAttempts(fila.MaxAttemptsLimit + 1),
		"WithMaxBodyBytes(0)":         fila.WithMaxBodyBytes(0),
		"WithMaxBodyBytes(max+1)":     fila.WithMaxBodyBytes(fila.MaxBodyBytes + 1),
		"WithLogger(nil)":             fila.WithLogger(nil),
		"WithControlInterval(9ms)":    fila.WithControlInterval(9 * time.Millisecond),
		"WithControlInterval(1m+1ns)": fila.WithControlInterval(time.Minute + time.Nanosecond),
		"nil Option":                  nil,
	}
	for name, o := range bad {
		if _, err := fila.Open(ctx, "mem://bad-options", o); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open with %s = %v, want ErrInvalid", name, err)
		}
		if _, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open(), o); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("New with %s = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := fila.New(nil); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	good := []fila.Option{
		fila.WithLease(fila.MinLease), fila.WithLease(fila.MaxLease),
		fila.WithMaxAttempts(1), fila.WithMaxAttempts(fila.MaxAttemptsLimit),
		fila.WithMaxBodyBytes(1), fila.WithMaxBodyBytes(fila.MaxBodyBytes),
		fila.WithControlInterval(10 * time.Millisecond), fila.WithControlInterval(time.Minute),
	}
	c, err := fila.Open(ctx, "mem://good-options", good...)
	if err != nil {
		t.Fatalf("Open with the ends of every option's range: %v", err)
	}
	_ = c.Close()
}
