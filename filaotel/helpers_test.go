package filaotel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

// brokers are the brokers the tests run against; adding one is one line.
var brokers = []struct {
	name string
	url  func(t *testing.T) string
	// partialStats: no oldest ready time nor dead letters per kind.
	partialStats bool
}{
	{name: "memory", url: func(t *testing.T) string { return "mem://" + unique("otel") }},
	{name: "postgres", url: func(t *testing.T) string { return withParam(testenv.PostgresURL(t), "fila_migrate", "true") }},
	{name: "redis", url: func(t *testing.T) string { return testenv.RedisURL(t) }},
	{name: "mongo", url: mongoURL},
	{name: "mysql", url: func(t *testing.T) string { return withParam(testenv.MySQLURL(t), "fila_migrate", "true") }},
	{name: "rabbitmq", url: func(t *testing.T) string { return testenv.RabbitMQURL(t) }, partialStats: true},
}

// quiet discards the workers' logs.
var quiet = slog.New(slog.DiscardHandler)

// tempQueue returns a unique queue name on c, deleted when the test ends.
func tempQueue(t *testing.T, c *fila.Client, prefix string) string {
	q := unique(prefix)
	testenv.CleanupQueue(t, c, q)
	return q
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// mongoURL is the Mongo test server's URL with a database of t's own,
// dropped when t ends. Packages' tests run at once against one server, and
// on FerretDB a command that runs out of time can break the database for
// every client of it (see package mongo).
func mongoURL(t *testing.T) string {
	raw := testenv.MongoURL(t)
	db := unique("fila_otel")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongodriver.Connect(options.Client().ApplyURI(raw))
		if err != nil {
			t.Logf("drop test database %s: %v", db, err)
			return
		}
		defer c.Disconnect(ctx)
		if err := c.Database(db).Drop(ctx); err != nil {
			t.Logf("drop test database %s: %v", db, err)
		}
	})
	return withParam(raw, "fila_database", db)
}

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

func open(t *testing.T, url string) *fila.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recorder collects a worker's end events.
type recorder struct {
	mu   sync.Mutex
	ends []worker.JobEvent
}

func (r *recorder) onEnd(ev worker.JobEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, ev)
}

func (r *recorder) wait(t *testing.T, n int) []worker.JobEvent {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		got := append([]worker.JobEvent(nil), r.ends...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d job ends after 20s; want %d: %+v", len(got), n, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runWorker runs w until the test ends and checks it returned cleanly.
func runWorker(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("worker Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// collect reads every metric from reader.
func collect(t *testing.T, reader sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrsString renders an attribute set as "k=v,k=v" (sorted by key).
func attrsString(s attribute.Set) string {
	out := ""
	for _, kv := range s.ToSlice() {
		if out != "" {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.Emit()
	}
	return out
}
