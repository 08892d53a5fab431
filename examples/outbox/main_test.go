package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestOutbox runs the example against the real PostgreSQL and RabbitMQ, and
// against an unreachable target (the in-memory fallback): exactly the
// committed order arrives.
func TestOutbox(t *testing.T) {
	t.Run("rabbitmq", func(t *testing.T) {
		t.Parallel()
		out := runOutbox(t, testenv.RabbitMQURL(t))
		checkOutbox(t, out, "rabbitmq")
	})
	t.Run("unreachable_target", func(t *testing.T) {
		t.Parallel()
		out := runOutbox(t, "amqp://guest:guest@127.0.0.1:1/")
		if !strings.Contains(out, "target amqp://guest:xxxxx@127.0.0.1:1/ is unreachable") && !strings.Contains(out, "is unreachable") {
			t.Errorf("no clear message about the unreachable target:\n%s", out)
		}
		if strings.Contains(out, "guest:guest@") {
			t.Errorf("the password was printed:\n%s", out)
		}
		checkOutbox(t, out, "memory")
	})
}

func runOutbox(t *testing.T, target string) string {
	t.Helper()
	pgURL := testenv.PostgresURL(t)
	suffix := randomHex()
	cfg := config{
		postgresURL: pgURL, targetURL: target,
		table: "orders_" + suffix, outbox: "outbox_" + suffix, events: "orders_" + suffix,
		quiet: 500 * time.Millisecond,
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{cfg.table}.Sanitize())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	return out.String()
}

// checkOutbox checks that the committed order (alice) arrived once at
// broker and the rolled-back one (bob) never did.
func checkOutbox(t *testing.T, out, broker string) {
	t.Helper()
	committed := regexp.MustCompile(`order (\d+) for alice: committed`).FindStringSubmatch(out)
	if committed == nil || !strings.Contains(out, "for bob: rolled back") {
		t.Fatalf("the two orders were not placed:\n%s", out)
	}
	want := fmt.Sprintf("%s received order.created: order %s for alice, 42.00 (source id ", broker, committed[1])
	if n := strings.Count(out, " received "); n != 1 || !strings.Contains(out, want) {
		t.Errorf("want exactly one message, %q..., received:\n%s", want, out)
	}
	if strings.Contains(out, "received order.created: order 0") || strings.Contains(out, "bob, ") {
		t.Errorf("the rolled-back order arrived:\n%s", out)
	}
	if !strings.Contains(out, "the relay moved 1 message(s)") {
		t.Errorf("relay count missing:\n%s", out)
	}
	// What it creates, it says; what it made for the run, it removes.
	for _, re := range []string{
		`(?m)^creating Fila's tables in schema "fila" if missing \(fila_migrate=true\); they stay$`,
		`(?m)^creating table orders_[0-9a-f]+ for the orders \(dropped at the end\)$`,
		`(?m)^dropped table orders_[0-9a-f]+$`,
		`(?m)^deleted queue outbox_[0-9a-f]+$`,
		`(?m)^deleted queue orders_[0-9a-f]+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks a line matching %s:\n%s", re, out)
		}
	}
}

// TestNotPostgres: FILA_URL must name PostgreSQL, where the outbox lives.
func TestNotPostgres(t *testing.T) {
	err := run(context.Background(), config{postgresURL: "redis://127.0.0.1:6379/0", targetURL: "mem://"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "FILA_URL must be a PostgreSQL URL") {
		t.Errorf("run with a Redis FILA_URL: %v; want an error saying FILA_URL must be PostgreSQL", err)
	}
}

// TestTableGone: after a run, the orders table no longer exists.
func TestTableGone(t *testing.T) {
	pgURL := testenv.PostgresURL(t)
	suffix := randomHex()
	table := "orders_" + suffix
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := config{postgresURL: pgURL, targetURL: "mem://", table: table, outbox: "outbox_" + suffix, events: table, quiet: 200 * time.Millisecond}
	if err := run(ctx, cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var reg *string
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1)::text", table).Scan(&reg); err != nil {
		t.Fatal(err)
	}
	if reg != nil {
		t.Errorf("table %s still exists after the run", *reg)
	}
}

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
