package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// broker is one broker the commands are tested against.
type broker struct {
	name string
	// url returns the broker's URL, or skips the test.
	url func(t *testing.T) string
	// instanceStats: the driver's stats count only what its own instance
	// knows beyond the ready and dead counts (no delayed, leased or oldest
	// age seen from another process; see package rabbitmq).
	instanceStats bool
	// noDedup: the driver has no dedup keys.
	noDedup bool
	// noQueueList: the driver cannot list queues.
	noQueueList bool
}

// brokers are the brokers every command is tested against. Adding a driver
// is one line (and its import in drivers.go).
var brokers = []broker{
	{name: "memory", url: func(t *testing.T) string { return "mem://" + unique("cli") }},
	{name: "postgres", url: func(t *testing.T) string { return withParam(testenv.PostgresURL(t), "fila_migrate", "true") }},
	{name: "redis", url: func(t *testing.T) string { return testenv.RedisURL(t) }},
	// A fresh database per test: FerretDB can wedge a database after an
	// interrupted operation (every later write fails with "interrupted").
	{name: "mongo", url: freshMongo},
	{name: "mysql", url: func(t *testing.T) string { return withParam(testenv.MySQLURL(t), "fila_migrate", "true") }},
	{name: "rabbitmq", url: func(t *testing.T) string { return testenv.RabbitMQURL(t) }, instanceStats: true, noDedup: true, noQueueList: true},
}

// forEachBroker runs f as a parallel subtest per broker.
func forEachBroker(t *testing.T, f func(t *testing.T, url string, b broker)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.url(t), b)
		})
	}
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// withParam sets a query parameter of a URL.
func withParam(raw, key, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// result is the outcome of one in-process run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command in-process with stdin and args and returns what it
// printed and its exit code.
func cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs the command and fails the test unless it exits 0.
func ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := cli(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("fila %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs the command and checks its exit code and that stderr contains
// want.
func fails(t *testing.T, code int, want string, stdin string, args ...string) result {
	t.Helper()
	r := cli(t, stdin, args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		t.Errorf("fila %s: exit %d, stderr %q; want exit %d and stderr containing %q (stdout %q)",
			strings.Join(args, " "), r.code, r.stderr, code, want, r.stdout)
	}
	return r
}

// client opens a client on url for a test's own setup and checks.
func client(t *testing.T, url string) *fila.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, url, fila.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
