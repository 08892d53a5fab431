package filawatermill_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filawatermill"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// broker is one place the tests run: a driver, or a mode of one.
type broker struct {
	name string
	url  func(testing.TB) string
	// suitePrefetch is SubscriberConfig.Prefetch in Watermill's suite.
	suitePrefetch int
}

// brokers are every broker and mode the tests run on: the in-memory
// broker and testenv.Targets (PostgreSQL in its default, skip-locked, mode
// and in its log mode). Redis gets a pool large enough for the suite's many
// queues blocked at once (a blocked Receive holds a pooled connection per
// queue).
//
// FerretDB (this repository's stand-in for MongoDB) serializes its writes,
// and the suite's concurrent tests make every claim wait: with Prefetch 10
// one claim takes ten messages, which makes the suite fit the CI budget there
// and runs the suite on the prefetch path too. With the default of 1 it
// passes as well (README.md has both timings); FILAWATERMILL_MONGO_PREFETCH
// overrides it.
var brokers = func() []broker {
	bs := []broker{{name: "memory", url: func(testing.TB) string { return "mem://filawatermill-" + randomHex(4) }}}
	for _, t := range testenv.Targets() {
		b := broker{name: t.Name, url: t.URL}
		switch t.Name {
		case "redis":
			b.url = func(tb testing.TB) string { return testenv.WithParams(tb, t.URL(tb), "pool_size", "200") }
		case "mongo":
			b.suitePrefetch = mongoPrefetch()
		}
		bs = append(bs, b)
	}
	return bs
}()

func mongoPrefetch() int {
	if n, err := strconv.Atoi(os.Getenv("FILAWATERMILL_MONGO_PREFETCH")); err == nil {
		return n
	}
	return 10
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testLogger is the fila client's logger in tests: discarded unless
// FILAWATERMILL_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("FILAWATERMILL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// wmLogger is the Watermill logger of the tests' publishers and
// subscribers: their Error lines go to stderr, so that a failing test shows
// what the receive loop saw; everything with FILAWATERMILL_TEST_LOG.
func wmLogger() watermill.LoggerAdapter {
	level := slog.LevelError
	if os.Getenv("FILAWATERMILL_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return watermill.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}

// openClient opens a client on rawURL, closed when the test ends.
func openClient(tb testing.TB, rawURL string, opts ...fila.Option) *fila.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]fila.Option{fila.WithLogger(testLogger())}, opts...)
	c, err := fila.Open(ctx, rawURL, opts...)
	if err != nil {
		tb.Fatalf("fila.Open(%s): %v", fila.Redact(rawURL), err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// subscriptions records the subscription queues a test's subscribers use,
// and ends them (deleting the queues) when the test ends, so that runs leave
// nothing behind on the shared brokers. On RabbitMQ it also deletes the
// topics' exchanges, which Fila keeps.
type subscriptions struct {
	c      *fila.Client
	rawURL string
	mu     sync.Mutex
	subs   map[[2]string]bool // topic, queue
}

// trackSubscriptions returns a recorder whose cleanup runs after the
// test's subtests, while c is open.
func trackSubscriptions(tb testing.TB, c *fila.Client, rawURL string) *subscriptions {
	s := &subscriptions{c: c, rawURL: rawURL, subs: map[[2]string]bool{}}
	tb.Cleanup(func() { s.cleanup(tb) })
	return s
}

// queueName is a SubscriberConfig.QueueName that records what it names.
func (s *subscriptions) queueName(topic, group string) string {
	q := filawatermill.DefaultQueueName(topic, group)
	s.add(topic, q)
	return q
}

func (s *subscriptions) add(topic, queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[[2]string{topic, queue}] = true
}

func (s *subscriptions) cleanup(tb testing.TB) {
	s.mu.Lock()
	subs := make([][2]string, 0, len(s.subs))
	topics := map[string]bool{}
	for k := range s.subs {
		subs = append(subs, k)
		topics[k[0]] = true
	}
	s.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return subs[i][1] < subs[j][1] })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range subs {
		if err := s.c.TopicUnsubscribe(ctx, k[0], k[1]); err != nil && !errors.Is(err, fila.ErrClosed) {
			tb.Logf("cleanup: TopicUnsubscribe(%s, %s): %v", k[0], k[1], err)
		}
	}
	if s.c.DriverName() == "rabbitmq" && len(topics) > 0 {
		deleteExchanges(tb, s.rawURL, topics)
	}
}

// deleteExchanges deletes the fanout exchanges of topics (the driver's
// default prefix "fila"), which Fila never deletes.
func deleteExchanges(tb testing.TB, rawURL string, topics map[string]bool) {
	conn, err := amqp.Dial(rawURL)
	if err != nil {
		tb.Logf("cleanup: amqp dial: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		tb.Logf("cleanup: amqp channel: %v", err)
		return
	}
	defer ch.Close()
	for t := range topics {
		if err := ch.ExchangeDelete("fila."+t+":topic", false, false); err != nil {
			tb.Logf("cleanup: delete exchange of topic %s: %v", t, err)
			return
		}
	}
}
