package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
)

// newClient opens a client on a fresh driver with extra URL parameters,
// closed when the test ends.
func newClient(t *testing.T, tr *tracker, params map[string]string, opts ...fila.Option) (*fila.Client, *rabbitmq.Driver) {
	t.Helper()
	u, err := url.Parse(tr.raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drv, err := rabbitmq.Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	d := drv.(*rabbitmq.Driver)
	c, err := fila.New(&tracked{Driver: d, tr: tr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, d
}

func uniqueQueue(t *testing.T) string {
	return fmt.Sprintf("rmqtest-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano()%1e9)
}

// TestForcedDisconnect closes the driver's connections from the broker side
// (rabbitmqctl close_connection) in the middle of a run: nothing is lost,
// and both producer and consumer carry on on new connections.
func TestForcedDisconnect(t *testing.T) {
	tr := newTracker(t, testenv.RabbitMQURL(t))
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("rabbitmqctl is not installed: cannot close connections from the broker side")
	}
	name := fmt.Sprintf("fila-test-%d", time.Now().UnixNano())
	prod, _ := newClient(t, tr, map[string]string{"fila_connection_name": name})
	cons, _ := newClient(t, tr, map[string]string{"fila_connection_name": name})
	q := uniqueQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const n = 300
	want := map[string]bool{}
	var mu sync.Mutex
	enqueue := func(count int) {
		for i := 0; i < count; i++ {
			var id string
			var err error
			for try := 0; ; try++ { // a call in flight during the disconnect may fail; retry it
				if id, err = prod.Enqueue(ctx, q, fila.Message{Kind: "k", Body: []byte(fmt.Sprint(i))}); err == nil {
					break
				}
				if !errors.Is(err, fila.ErrUnavailable) || try > 50 {
					t.Errorf("Enqueue: %v", err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			want[id] = true
			mu.Unlock()
		}
	}
	enqueue(n / 2)

	got := map[string]bool{}
	receive := func(until func() bool) {
		for !until() {
			ds, err := cons.Receive(ctx, q, fila.ReceiveParams{Max: 20, Lease: 30 * time.Second})
			if err != nil {
				mu.Lock()
				missing := 0
				for id := range want {
					if !got[id] {
						missing++
					}
				}
				t.Fatalf("Receive after %d messages (%d enqueued, %d of them missing): %v", len(got), len(want), missing, err)
			}
			for _, d := range ds {
				if err := d.Ack(ctx); err != nil {
					// The connection broke after the delivery: the broker
					// requeued it and it comes again.
					if !errors.Is(err, fila.ErrLeaseLost) && !errors.Is(err, fila.ErrUnavailable) {
						t.Errorf("Ack: %v", err)
					}
					continue
				}
				got[d.ID] = true
			}
		}
	}
	receive(func() bool { return len(got) >= n/4 })

	closeConnections(t, name)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer resumes
		defer wg.Done()
		enqueue(n / 2)
	}()
	wg.Wait()
	receive(func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range want {
			if !got[id] {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for id := range want {
		if !got[id] {
			t.Errorf("message %s lost", id)
		}
	}
	if len(want) != n {
		t.Errorf("enqueued %d messages, want %d", len(want), n)
	}
}

// closeConnections closes, from the broker, every connection named name.
func closeConnections(t *testing.T, name string) {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", "list_connections", "-q", "--no-table-headers", "pid", "client_properties").CombinedOutput()
	if err != nil {
		t.Skipf("rabbitmqctl list_connections: %v: %s", err, out)
	}
	closed := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.Contains(line, `"`+name+`"`) {
			continue
		}
		if out, err := exec.Command("rabbitmqctl", "close_connection", f[0], "test").CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl close_connection: %v: %s", err, out)
		}
		closed++
	}
	if closed == 0 {
		t.Fatalf("no connection named %s to close in:\n%s", name, out)
	}
	t.Logf("closed %d connections", closed)
}

// TestCrashingConsumerReachesDeadLetters: a message whose consumer closes
// without acking every time is dead-lettered after max attempts, counting
// the crashes through the quorum queue's delivery count.
func TestCrashingConsumerReachesDeadLetters(t *testing.T) {
	tr := newTracker(t, testenv.RabbitMQURL(t))
	prod, _ := newClient(t, tr, nil)
	q := uniqueQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const max = 3
	id, err := prod.Enqueue(ctx, q, fila.Message{Kind: "poison", MaxAttempts: max})
	if err != nil {
		t.Fatal(err)
	}
	other, err := prod.Enqueue(ctx, q, fila.Message{Kind: "fine"})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= max; attempt++ {
		c, _ := newClient(t, tr, nil)
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			t.Fatalf("crash %d: Receive: %v", attempt, err)
		}
		d := ds[0]
		if d.ID == other {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			attempt--
			_ = c.Close()
			continue
		}
		if d.ID != id || d.Attempt != attempt {
			t.Fatalf("crash %d: got %s attempt %d, want %s attempt %d", attempt, d.ID, d.Attempt, id, attempt)
		}
		_ = c.Close() // crash: no ack
	}
	c, _ := newClient(t, tr, nil)
	rctx, rcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer rcancel()
	ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	for _, d := range ds {
		if d.ID == id {
			t.Fatalf("the poison message was delivered again (attempt %d)", d.Attempt)
		}
		_ = d.Ack(ctx)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive: %v", err)
	}
	page, err := c.DeadList(ctx, q, fila.DeadListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Letters) != 1 || page.Letters[0].ID != id || page.Letters[0].Reason != fila.ReasonMaxAttempts || page.Letters[0].Attempts != max {
		t.Fatalf("dead letters %+v, want %s with reason %q and %d attempts", page.Letters, id, fila.ReasonMaxAttempts, max)
	}
}

// TestDelaysDoNotBlockEachOther: a short delay enqueued after a long one is
// ready first, and neither is early; an odd delay (rounded down to its
// bucket, then hopping) is not early either.
func TestDelaysDoNotBlockEachOther(t *testing.T) {
	tr := newTracker(t, testenv.RabbitMQURL(t))
	c, _ := newClient(t, tr, nil)
	q := uniqueQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	delays := []time.Duration{3 * time.Second, 1234 * time.Millisecond, 300 * time.Millisecond, 0}
	start := time.Now()
	ids := map[string]time.Duration{}
	for _, d := range delays {
		id, err := c.Enqueue(ctx, q, fila.Message{Kind: "delayed", Delay: d})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = d
	}
	var order []time.Duration
	for len(order) < len(delays) {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive after %v: %v", order, err)
		}
		at := time.Since(start)
		for _, d := range ds {
			delay := ids[d.ID]
			if at < delay {
				t.Errorf("message delayed %v received after %v: early", delay, at)
			}
			if at > delay+time.Second {
				t.Errorf("message delayed %v received after %v: more than 1s late", delay, at)
			}
			order = append(order, delay)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Errorf("received in delay order %v, want shortest first", order)
		}
	}
}

func TestOpenURLParameters(t *testing.T) {
	ctx := context.Background()
	for _, raw := range []string{
		"amqp://guest:guest@127.0.0.1:5672/?fila_bogus=1",
		"amqp://guest:guest@127.0.0.1:5672/?fila_prefetch=x",
		"amqp://guest:guest@127.0.0.1:5672/?pool_max=3",
		"amqp://guest:guest@127.0.0.1:5672/?heartbeat=x",
		"amqp://guest:guest@127.0.0.1:5672/?fila_prefix=a:b",
		"amqp://guest:guest@127.0.0.1:5672/?fila_prefix=" + strings.Repeat("p", 110),
	} {
		u, _ := url.Parse(raw)
		if _, err := rabbitmq.Open(ctx, u, backend.OpenOptions{}); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open(%s): want ErrInvalid, got %v", raw, err)
		}
	}
	if _, err := fila.Open(ctx, "amqp://guest:guest@127.0.0.1:5672/?fila_nope=1"); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("fila.Open with an unknown parameter: want ErrInvalid, got %v", err)
	}
}

func TestLongNamesRefused(t *testing.T) {
	tr := newTracker(t, testenv.RabbitMQURL(t))
	ctx := context.Background()
	u, _ := url.Parse(tr.raw + "?fila_prefix=" + strings.Repeat("p", 110))
	if _, err := rabbitmq.Open(ctx, u, backend.OpenOptions{}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Open with a prefix that makes delay queue names pass 255 bytes: want ErrInvalid, got %v", err)
	}
	// The longest prefix works with the longest queue name.
	c, _ := newClient(t, tr, map[string]string{"fila_prefix": strings.Repeat("p", 109)})
	q := strings.Repeat("q", fila.MaxQueueNameLen)
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Delay: 90 * 24 * time.Hour}); err != nil {
		t.Fatalf("Enqueue with the longest names: %v", err)
	}
}
