package filapubsub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// broker is one broker the tests run on.
type broker struct {
	name string
	// url returns the broker's Fila URL, or skips the test (fails it
	// under CI=1) when the broker is not available.
	url func(testing.TB) string
	// listsSubscriptions is false where Client.TopicSubscriptions is
	// unsupported (RabbitMQ).
	listsSubscriptions bool
}

// brokers are the in-memory broker and every real one (testenv.Targets).
var brokers = func() []broker {
	bs := []broker{{"memory", func(testing.TB) string { return "mem://filapubsub-" + unique() }, true}}
	for _, t := range testenv.Targets() {
		bs = append(bs, broker{t.Name, t.URL, t.Name != "rabbitmq"})
	}
	return bs
}()

// unique returns a random name part, so that runs side by side (and the
// other users of the shared brokers) never share a queue or a topic.
func unique() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// clients holds one client per broker URL for the whole test binary, as
// an application would; they are closed when the binary's tests end.
var clients struct {
	sync.Mutex
	m map[string]*fila.Client
}

// client returns the shared client of the broker at u.
func client(t testing.TB, u string) *fila.Client {
	t.Helper()
	clients.Lock()
	defer clients.Unlock()
	if c := clients.m[u]; c != nil {
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u, fila.WithLogger(quiet))
	if err != nil {
		t.Fatalf("open %s: %v", fila.Redact(u), err)
	}
	if clients.m == nil {
		clients.m = map[string]*fila.Client{}
	}
	clients.m[u] = c
	return c
}

// forEachBroker runs f on every broker, in parallel subtests.
func forEachBroker(t *testing.T, f func(t *testing.T, b broker, c *fila.Client)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			if strings.HasPrefix(u, "mem://") {
				u = "mem://filapubsub" // one in-memory broker per binary is enough
			}
			f(t, b, client(t, u))
		})
	}
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
