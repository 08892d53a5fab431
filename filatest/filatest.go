package filatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/skips"
)

// The broker names URL and Open take.
const (
	Memory   = "memory"
	Postgres = "postgres"
	Redis    = "redis"
	RabbitMQ = "rabbitmq"
	Mongo    = "mongo"
	MySQL    = "mysql"
)

// Brokers lists every broker name, the in-memory one first.
var Brokers = []string{Memory, Postgres, Redis, RabbitMQ, Mongo, MySQL}

// broker is how one broker is found.
type broker struct {
	title string // "PostgreSQL", for messages
	env   string // FILA_TEST_<BROKER>_URL
	c     *container
	start func(context.Context) (string, error)
}

var brokers = map[string]broker{
	Postgres: {"PostgreSQL", "FILA_TEST_POSTGRES_URL", &postgresContainer, startPostgres},
	Redis:    {"Redis", "FILA_TEST_REDIS_URL", &redisContainer, startRedis},
	RabbitMQ: {"RabbitMQ", "FILA_TEST_RABBITMQ_URL", &rabbitmqContainer, startRabbitMQ},
	Mongo:    {"MongoDB", "FILA_TEST_MONGO_URL", &mongoContainer, startMongo},
	MySQL:    {"MySQL", "FILA_TEST_MYSQL_URL", &mysqlContainer, startMySQL},
}

// EnvVar returns the environment variable that names a server for broker,
// FILA_TEST_<BROKER>_URL (FILA_TEST_POSTGRES_URL, ...), or "" for "memory",
// which needs no server.
func EnvVar(broker string) string { return brokers[broker].env }

// URL returns the URL of a server of broker for the test, in this order:
//
//  1. the environment variable FILA_TEST_<BROKER>_URL ([EnvVar]) when set;
//  2. otherwise, when a Docker engine answers, a container started with
//     testcontainers-go, once per test binary and shared by its tests;
//  3. otherwise the test is skipped, with one line naming the variable to
//     set, and the skip is recorded for [Main]. When the CI environment
//     variable is non-empty the test fails instead: CI expects every server.
//
// A container that does not start when Docker answers fails the test.
//
// For "memory" URL returns mem://NAME, an in-process broker of the test's
// own: every call in the same test returns the same URL, so two clients of
// one test share it, and another test never sees its messages.
//
// URL is for opening clients with options of your own or for handing to the
// code under test; [Open] does both steps.
func URL(tb testing.TB, broker string) string {
	tb.Helper()
	if broker == Memory {
		return memoryURL(tb)
	}
	b, ok := brokers[broker]
	if !ok {
		tb.Fatalf("filatest: unknown broker %q (known: %s)", broker, strings.Join(Brokers, ", "))
		return ""
	}
	if u := os.Getenv(b.env); u != "" {
		return u
	}
	if err := dockerAvailable(); err != nil {
		missing(tb, b, err)
		return ""
	}
	u, err := b.c.get(b.start)
	if err != nil {
		tb.Fatalf("filatest: %s is empty and Docker answers, but the %s container did not start: %v", b.env, b.title, err)
	}
	return u
}

// missing skips the test, or fails it when the CI environment variable is set.
func missing(tb testing.TB, b broker, dockerErr error) {
	tb.Helper()
	hint := ""
	if skips.Hint != "" {
		hint = "; " + skips.Hint
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("filatest: no %s server: CI is set, %s is empty and no Docker engine answers (%v)%s", b.title, b.env, dockerErr, hint)
	}
	skips.Record(b.title, fmt.Sprintf("no server: set %s or start a Docker engine%s", b.env, hint))
	tb.Skipf("filatest: no %s server: set %s or start a Docker engine (%v)%s", b.title, b.env, dockerErr, hint)
}

// memoryURLs holds the in-process broker of each running test.
var memoryURLs sync.Map // testing.TB -> string

func memoryURL(tb testing.TB) string {
	if u, ok := memoryURLs.Load(tb); ok {
		return u.(string)
	}
	u := "mem://" + uniqueName(tb)
	if prev, loaded := memoryURLs.LoadOrStore(tb, u); loaded {
		return prev.(string)
	}
	tb.Cleanup(func() { memoryURLs.Delete(tb) })
	return u
}

// openTimeout bounds Open's connection and check of the broker.
const openTimeout = 30 * time.Second

// Open returns a client on a server of broker ("memory", "postgres",
// "redis", "rabbitmq", "mongo" or "mysql"), found as [URL] says (and so skipped, or
// failed under CI, without one), and closes it when the test ends.
//
// As for fila.Open, the driver package must be imported for its side effect
// (import _ "github.com/fila-go/fila/postgres"); Open fails the test naming
// the package when it is not.
//
// On PostgreSQL and MySQL, Open adds fila_migrate=true to the URL unless it
// sets fila_migrate, so Fila's tables exist (on PostgreSQL in the schema
// "fila" of the test database, unless fila_schema says otherwise; on MySQL
// in the URL's database).
//
// Tests of one binary share each server, and tests that run again find
// what earlier runs left: give each test a queue of its own with [Queue].
func Open(tb testing.TB, broker string, opts ...fila.Option) *fila.Client {
	tb.Helper()
	u := URL(tb, broker)
	if broker == Postgres || broker == MySQL {
		u = withParam(u, "fila_migrate", "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	c, err := fila.Open(ctx, u, opts...)
	if err != nil {
		tb.Fatalf("filatest: open %s: %v", fila.Redact(u), err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// withParam sets the query parameter key of a URL unless it is set.
func withParam(raw, key, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // fila.Open explains
	}
	q := u.Query()
	if q.Has(key) {
		return raw
	}
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// Queue returns a queue name no other test or run uses, and deletes the
// queue with everything in it (QueueDelete with Force) on c when the test
// ends. Call it after [Open], so the deletion runs before the client is
// closed; a client the test closed itself is left alone.
func Queue(tb testing.TB, c *fila.Client) string {
	tb.Helper()
	q := QueueName(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true})
		if err != nil && !errors.Is(err, fila.ErrClosed) && !errors.Is(err, fila.ErrUnsupported) {
			tb.Errorf("filatest: deleting queue %s: %v", q, err)
		}
	})
	return q
}

// QueueName returns a valid queue name no other test or run uses: the
// test's name (shortened, with the characters queue names do not allow
// replaced) and a random suffix. Nothing deletes the queue; see [Queue].
func QueueName(tb testing.TB) string { return uniqueName(tb) }

// maxNamePart bounds the test-name part of a generated name, leaving room
// under fila.MaxQueueNameLen for the prefixes drivers add to a queue's own
// structures.
const maxNamePart = 40

func uniqueName(tb testing.TB) string {
	var b strings.Builder
	b.WriteString("filatest-")
	for _, r := range tb.Name() {
		if b.Len() >= len("filatest-")+maxNamePart {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}

// Main runs the tests of m and then prints one line for each broker the
// tests skipped for, and why, before exiting with m's code:
//
//	fila: PostgreSQL tests skipped in example.com/app (3 tests): no server: set FILA_TEST_POSTGRES_URL or start a Docker engine
//
// Without it, `go test ./...` prints a bare "ok" for a package whose broker
// tests all skipped. Call it from the package's TestMain:
//
//	func TestMain(m *testing.M) { filatest.Main(m) }
//
// go test hides a passing package's output unless -v is given, so where the
// output would be hidden the lines also go where go test prints its "ok"
// lines (on Linux, when that is a terminal or a pipe) or else to the
// terminal (/dev/tty) when there is one. A result go test takes from its
// cache prints no line; go test -count=1 runs the tests again.
func Main(m *testing.M) { skips.Main(m) }
