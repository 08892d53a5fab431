package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// waitTimeout bounds every wait for a condition in these tests.
const waitTimeout = 15 * time.Second

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// queueName returns a queue name unique to this test run.
func queueName(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return "w-" + strings.Trim(name, "-") + "-" + randomSuffix()
}

// newQueue returns a fresh queue name, deleted at the end of the test.
func newQueue(t *testing.T, c *fila.Client) string {
	q := queueName(t)
	testenv.CleanupQueue(t, c, q)
	return q
}

func enqueue(t *testing.T, c *fila.Client, queue string, m fila.Message) string {
	t.Helper()
	id, err := c.Enqueue(context.Background(), queue, m)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return id
}

// enqueueJobs enqueues n messages of kind "job" in one batch and returns
// their ids, in order.
func enqueueJobs(t *testing.T, c *fila.Client, queue string, n int) []string {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "job"}
	}
	res, err := c.EnqueueBatch(context.Background(), queue, msgs)
	if err != nil {
		t.Fatalf("enqueue %d jobs: %v", n, err)
	}
	return res
}

// recorder collects OnJobStart and OnJobEnd events.
type recorder struct {
	mu     sync.Mutex
	starts []worker.JobEvent
	ends   []worker.JobEvent
}

func (r *recorder) hook(cfg *worker.Config) {
	cfg.OnJobStart = func(ev worker.JobEvent) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.starts = append(r.starts, ev)
	}
	cfg.OnJobEnd = func(ev worker.JobEvent) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ends = append(r.ends, ev)
	}
}

func (r *recorder) endCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ends)
}

// waitEnds waits until n jobs have ended and returns the end events.
func (r *recorder) waitEnds(t *testing.T, n int) []worker.JobEvent {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d job ends", n), func() bool { return r.endCount() >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worker.JobEvent(nil), r.ends...)
}

func (r *recorder) startEvents() []worker.JobEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worker.JobEvent(nil), r.starts...)
}

// running is a Worker running in a goroutine.
type running struct {
	t        *testing.T
	cancel   context.CancelFunc
	done     chan error
	baseline int
	once     sync.Once
	err      error
}

// start creates a worker over c with cfg, lets setup register handlers and
// runs it until the test stops it (or ends).
func start(t *testing.T, c *fila.Client, cfg worker.Config, setup func(w *worker.Worker)) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	return startCtx(t, ctx, cancel, c, cfg, setup)
}

func startCtx(t *testing.T, ctx context.Context, cancel context.CancelFunc, c *fila.Client, cfg worker.Config, setup func(w *worker.Worker)) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	// The goroutine count must come back to its level when the driver
	// starts no goroutines of its own (memory); real drivers may start
	// theirs lazily (pools, LISTEN connections), so for them only goroutines
	// running or started by worker code count as leaks.
	baseline := -1
	if isMemory(c.Driver()) {
		baseline = runtime.NumGoroutine()
	}
	w, err := worker.New(c, cfg)
	if err != nil {
		cancel()
		t.Fatalf("worker.New: %v", err)
	}
	if setup != nil {
		setup(w)
	}
	r := &running{t: t, cancel: cancel, done: make(chan error, 1), baseline: baseline}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels the worker's context and waits for Run to return.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// wait waits for Run to return (without cancelling), then checks that no
// goroutine the worker started is left.
func (r *running) wait() error {
	r.t.Helper()
	r.once.Do(func() {
		select {
		case r.err = <-r.done:
		case <-time.After(waitTimeout):
			r.t.Fatalf("Run did not return within %v", waitTimeout)
		}
		checkNoLeak(r.t, r.baseline)
	})
	return r.err
}

// returned reports whether Run has returned.
func (r *running) returned() bool {
	select {
	case err := <-r.done:
		r.done <- err
		return true
	default:
		return false
	}
}

// checkNoLeak waits until no goroutine runs worker code or was started by it,
// and, with a baseline (not -1), the goroutine count is back to its level
// before the worker started.
func checkNoLeak(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		leaked := workerGoroutines()
		n := runtime.NumGoroutine()
		if len(leaked) == 0 && (baseline < 0 || n <= baseline) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutine leak: %d goroutines, %d before the worker started; worker goroutines left:\n%s",
				n, baseline, strings.Join(leaked, "\n\n"))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isMemory reports whether d is the memory driver, possibly wrapped.
func isMemory(d backend.Driver) bool {
	if h, ok := d.(*hookDriver); ok {
		d = h.Driver
	}
	_, ok := d.(*memory.Driver)
	return ok
}

// workerGoroutines returns the stacks of goroutines running code of package
// worker or created by it.
func workerGoroutines() []string {
	var out []string
	for _, g := range goroutineStacks() {
		if strings.Contains(g, "github.com/fila-go/fila/worker.") {
			out = append(out, g)
		}
	}
	return out
}

// goroutineStacks returns the stack of every goroutine, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Split(string(buf), "\n\n")
}

// testLogger logs to t at Debug level.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// captureHandler keeps slog records for inspection.
type captureHandler struct {
	mu      *sync.Mutex
	records *[]map[string]string
	attrs   []slog.Attr
}

func newCapture() *captureHandler {
	return &captureHandler{mu: &sync.Mutex{}, records: &[]map[string]string{}}
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, m)
	return nil
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

func (h *captureHandler) find(msg string) (map[string]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.records {
		if r["msg"] == msg {
			return r, true
		}
	}
	return nil, false
}

// deadLetter returns the dead letter of id, or ok=false if the driver cannot
// list dead letters (the check is skipped then).
func deadLetter(t *testing.T, c *fila.Client, queue, id string) (dl fila.DeadLetter, ok bool) {
	t.Helper()
	page, err := c.DeadList(context.Background(), queue, fila.DeadListParams{Limit: 1000})
	if errors.Is(err, fila.ErrUnsupported) {
		t.Logf("driver cannot list dead letters; not checking them")
		return dl, false
	}
	if err != nil {
		t.Fatalf("DeadList: %v", err)
	}
	for _, l := range page.Letters {
		if l.ID == id {
			return l, true
		}
	}
	t.Fatalf("message %s is not among the %d dead letters of %s", id, len(page.Letters), queue)
	return dl, false
}

// receiveNow receives what is ready in queue within d, failing if nothing is.
func receiveNow(t *testing.T, c *fila.Client, queue string, max int, d time.Duration) []*fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: max})
	if err != nil {
		t.Fatalf("receive from %s: %v", queue, err)
	}
	return ds
}

// assertEmpty checks that nothing becomes receivable in queue within d.
func assertEmpty(t *testing.T, c *fila.Client, queue string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 10})
	if err == nil {
		for _, dv := range ds {
			t.Errorf("queue %s should be empty; received %s (kind %s, attempt %d)", queue, dv.ID, dv.Kind, dv.Attempt)
			_ = dv.Ack(context.Background())
		}
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive from %s: %v", queue, err)
	}
}

// hookDriver wraps a driver to watch the worker's calls. Close does nothing:
// the wrapped driver belongs to another client.
type hookDriver struct {
	backend.Driver
	// afterReceive, when set, runs after each successful Receive.
	afterReceive func(queue string, ds []backend.Delivery)
	// settled, when set, runs after each successful Ack, Retry or Dead.
	settled func(queue string)
	// beforeAck, when set, runs before each Ack.
	beforeAck func(ctx context.Context)
}

func (h *hookDriver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	ds, err := h.Driver.Receive(ctx, queue, p)
	if err == nil && h.afterReceive != nil {
		h.afterReceive(queue, ds)
	}
	return ds, err
}

func (h *hookDriver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	if h.beforeAck != nil {
		h.beforeAck(ctx)
	}
	errs, err := h.Driver.Ack(ctx, refs)
	if err == nil && h.settled != nil {
		for i, e := range errs {
			if e == nil {
				h.settled(refs[i].Queue)
			}
		}
	}
	return errs, err
}

func (h *hookDriver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	err := h.Driver.Retry(ctx, ref, delay, reason)
	if err == nil && h.settled != nil {
		h.settled(ref.Queue)
	}
	return err
}

func (h *hookDriver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	err := h.Driver.Dead(ctx, ref, reason, attempts)
	if err == nil && h.settled != nil {
		h.settled(ref.Queue)
	}
	return err
}

func (h *hookDriver) Close() error { return nil }

// DedupKeys passes the wrapped driver's dedup support through.
func (h *hookDriver) DedupKeys() bool {
	d, ok := h.Driver.(backend.Deduper)
	return ok && d.DedupKeys()
}

// gauge tracks a current value and its peak.
type gauge struct {
	cur, peak atomic.Int64
}

func (g *gauge) add(n int64) {
	v := g.cur.Add(n)
	for {
		p := g.peak.Load()
		if v <= p || g.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// waitClosed waits for ch to close and fails t with what after
// waitTimeout: a job that never starts fails its test instead of hanging
// the package until go test's timeout.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("%s within %v", what, waitTimeout)
	}
}

// recvErr receives from ch and fails t with what after waitTimeout.
func recvErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("%s within %v", what, waitTimeout)
		return nil
	}
}

// libraryWaits returns, for each goroutine running code of this module, its
// first line and its innermost frame of the module: where it waits.
func libraryWaits() []string {
	var out []string
	for _, g := range goroutineStacks() {
		lines := strings.Split(g, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "github.com/fila-go/fila/") && i+1 < len(lines) {
				out = append(out, lines[0]+" "+l+" "+strings.TrimSpace(lines[i+1]))
				break
			}
		}
	}
	return out
}
