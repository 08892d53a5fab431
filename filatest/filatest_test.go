package filatest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filatest"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

func TestMain(m *testing.M) { filatest.Main(m) }

// TestOpen opens every broker, sends one message through a queue of the
// test's own, and checks after the test that the queue is gone.
func TestOpen(t *testing.T) {
	for _, broker := range filatest.Brokers {
		t.Run(broker, func(t *testing.T) {
			t.Parallel()
			var c *fila.Client
			var q string
			t.Run("send", func(t *testing.T) {
				c = filatest.Open(t, broker)
				// A second client on the same URL: in-memory brokers are
				// per test, not per client.
				c2 := filatest.Open(t, broker)
				q = filatest.Queue(t, c)
				if err := fila.ValidateQueueName(q); err != nil {
					t.Fatalf("Queue returned an invalid name: %v", err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "filatest.ping", Body: []byte(broker)}); err != nil {
					t.Fatal(err)
				}
				ds, err := c2.Receive(ctx, q, fila.ReceiveParams{Max: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != 1 || string(ds[0].Body) != broker {
					t.Fatalf("received %d messages; want the one sent", len(ds))
				}
				// Leave a message behind: Queue's cleanup deletes it with the queue.
				if err := ds[0].Release(ctx); err != nil {
					t.Fatal(err)
				}
			})
			if t.Skipped() || c == nil {
				return
			}
			// The subtest's cleanups ran: the queue is deleted and c closed.
			if err := c.Ping(context.Background()); !errors.Is(err, fila.ErrClosed) {
				t.Errorf("Ping after the test: %v; want ErrClosed (the client closed)", err)
			}
			check := filatest.Open(t, broker)
			if broker == filatest.Memory {
				return // a new test's broker of its own
			}
			st, err := check.QueueStats(context.Background(), q)
			if errors.Is(err, fila.ErrUnsupported) {
				return
			}
			if err != nil {
				t.Fatalf("QueueStats(%s) after the test: %v", q, err)
			}
			if n := st.Ready + st.Delayed + st.Leased + st.Dead; n != 0 {
				t.Errorf("queue %s holds %d messages after the test; want it deleted", q, n)
			}
		})
	}
}

// TestQueueNameUnique checks that names are valid, carry the test's name and
// differ between calls.
func TestQueueNameUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		q := filatest.QueueName(t)
		if err := fila.ValidateQueueName(q); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(q, "TestQueueNameUnique") {
			t.Errorf("%s lacks the test's name", q)
		}
		if seen[q] {
			t.Fatalf("%s returned twice", q)
		}
		seen[q] = true
	}
	t.Run("a name with spaces/and slashes: and a very long tail that goes on and on and on and on", func(t *testing.T) {
		q := filatest.QueueName(t)
		if err := fila.ValidateQueueName(q); err != nil {
			t.Fatal(err)
		}
		if len(q) > 64 {
			t.Errorf("%s is %d bytes; want the test name shortened", q, len(q))
		}
	})
}

// TestMemoryURLPerTest checks that one test's calls share an in-memory
// broker and two tests do not.
func TestMemoryURLPerTest(t *testing.T) {
	var first string
	t.Run("a", func(t *testing.T) {
		first = filatest.URL(t, "memory")
		if again := filatest.URL(t, "memory"); again != first {
			t.Errorf("URL in one test: %s, then %s", first, again)
		}
	})
	t.Run("b", func(t *testing.T) {
		if u := filatest.URL(t, "memory"); u == first {
			t.Errorf("two tests share %s", u)
		}
	})
}

// TestSkipReport runs a test binary of this package with no server named,
// no Docker engine and CI unset, and checks that the skip is reported once,
// after the tests, in the agreed form; and that under CI the test fails.
func TestSkipReport(t *testing.T) {
	if os.Getenv("FILATEST_CHILD") != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"FILATEST_CHILD=1", "DOCKER_HOST=unix:///nonexistent/docker.sock", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + t.TempDir()}

	cmd := exec.Command(exe, "-test.run=^TestChildOpenPostgres$")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child without a server failed: %v\n%s", err, out)
	}
	want := "fila: PostgreSQL tests skipped in github.com/fila-go/fila/filatest (2 tests): no server: set FILA_TEST_POSTGRES_URL or start a Docker engine\n"
	if !strings.Contains(string(out), want) || strings.Count(string(out), "fila: ") != 1 {
		t.Errorf("child output lacks the one line %q:\n%s", want, out)
	}

	cmd = exec.Command(exe, "-test.run=^TestChildOpenPostgres$")
	cmd.Env = append(env, "CI=1")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CI is set, FILA_TEST_POSTGRES_URL is empty") {
		t.Errorf("child under CI: %v; want a failure naming the variable:\n%s", err, out)
	}
}

// TestChildOpenPostgres is run by TestSkipReport in a child process.
func TestChildOpenPostgres(t *testing.T) {
	if os.Getenv("FILATEST_CHILD") == "" {
		t.Skip("run by TestSkipReport")
	}
	for _, name := range []string{"one", "two"} {
		t.Run(name, func(t *testing.T) {
			filatest.Open(t, "postgres")
			t.Error("Open returned without a server")
		})
	}
}
