package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// The worker tests run over every driver: each Test<Driver> calls
// runWorkerTests with a function that opens a client on that driver.
//
// To add a real driver (postgres, redis, rabbitmq, mongo), add a test here
// such as:
//
//	func TestWorkerPostgres(t *testing.T) {
//		url := testenv.PostgresURL(t)
//		runWorkerTests(t, func(t *testing.T) *fila.Client {
//			c, err := fila.Open(context.Background(), url)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { c.Close() })
//			return c
//		})
//	}
//
// and import the driver package (and internal/testenv). The tests use
// unique queue names and 1s leases, like the conformance suite.

func TestWorkerMemory(t *testing.T) {
	// The clients a test opens share its broker, as clients of one
	// server would.
	var mu sync.Mutex
	brokers := map[*testing.T]*memory.Broker{}
	runWorkerTests(t, func(t *testing.T) *fila.Client {
		mu.Lock()
		defer mu.Unlock()
		b := brokers[t]
		if b == nil {
			b = memory.NewBroker(memory.BrokerOptions{})
			brokers[t] = b
		}
		return clientOver(t, b.Open())
	})
}

// TestAcksGoWithClaims: on a driver that acks and claims in one round trip
// (the memory driver is one), the receive loop carries the acks of the
// jobs that ended into its next claim, so at concurrency 1 a job's ack and
// the next job's receive are one call; each job still ends acked, and the
// acks of the last jobs, after which the loop waits on an empty queue, are
// sent all the same.
func TestAcksGoWithClaims(t *testing.T) {
	fd := &ackFaultReceiver{ackFaultDriver: &ackFaultDriver{
		Driver: memory.NewBroker(memory.BrokerOptions{}).Open(), perRef: map[string]error{}}}
	c := clientOver(t, fd)
	q := newQueue(t, c)
	const n = 50
	enqueueJobs(t, c, q, n)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(ctx context.Context, d *fila.Delivery) error { return nil })
	})
	for _, ev := range rec.waitEnds(t, n) {
		if ev.Outcome != worker.OutcomeAck {
			t.Errorf("end of %s = %+v; want acked", ev.ID, ev)
		}
	}
	assertEmpty(t, c, q, 300*time.Millisecond)
	// Only a job that ends before the loop is back waiting for its slot
	// leaves its ack to the acker's own AckBatch.
	if got := fd.combined.Load(); got < n/2 {
		t.Errorf("%d of %d acks went with a claim; want most", got, n)
	}
}

// runWorkerTests is the driver-independent worker suite. open returns a new
// client on the driver under test, closed at the end of the test. The
// subtests are sequential: they check for leaked goroutines.
func runWorkerTests(t *testing.T, open func(t *testing.T) *fila.Client) {
	t.Run("Ack", func(t *testing.T) { testAck(t, open(t)) })
	t.Run("RetryBackoffSchedule", func(t *testing.T) { testRetryBackoffSchedule(t, open(t)) })
	t.Run("MaxAttemptsDeadLetters", func(t *testing.T) { testMaxAttempts(t, open(t)) })
	t.Run("Permanent", func(t *testing.T) { testPermanent(t, open(t)) })
	t.Run("Panic", func(t *testing.T) { testPanic(t, open(t)) })
	t.Run("UnknownKind", func(t *testing.T) { testUnknownKind(t, open(t)) })
	t.Run("UnknownKindHandler", func(t *testing.T) { testUnknownKindHandler(t, open(t)) })
	t.Run("Timeout", func(t *testing.T) { testTimeout(t, open(t)) })
	t.Run("HeartbeatKeepsLease", func(t *testing.T) { testHeartbeatKeepsLease(t, open(t)) })
	t.Run("LeaseLostDuringLongJob", func(t *testing.T) { testLeaseLost(t, open(t)) })
	t.Run("ShutdownLetsRunningJobFinish", func(t *testing.T) { testShutdownFinish(t, open(t)) })
	t.Run("ShutdownGraceOverReleases", func(t *testing.T) { testShutdownGraceOver(t, open(t)) })
	t.Run("ShutdownReleasesUnstarted", func(t *testing.T) { testShutdownUnstarted(t, open(t)) })
	t.Run("ConcurrencyLimits", func(t *testing.T) { testConcurrency(t, open(t)) })
	t.Run("TypedKind", func(t *testing.T) { testTypedKind(t, open(t)) })
	t.Run("MiddlewareAndLogger", func(t *testing.T) { testMiddlewareAndLogger(t, open(t)) })
	t.Run("ClientClosed", func(t *testing.T) { testClientClosed(t, open(t)) })
	t.Run("BatchedAckOutcomes", func(t *testing.T) { testBatchedAckOutcomes(t, open) })
	t.Run("CancelStopsRunningJob", func(t *testing.T) { testCancelRunning(t, open(t)) })
	t.Run("WeightsShareSlots", func(t *testing.T) { testWeights(t, open(t)) })
	t.Run("Presence", func(t *testing.T) { testPresence(t, open(t)) })
	t.Run("Throughput", func(t *testing.T) { testThroughput(t, open(t)) })
	t.Run("QueueLimit", func(t *testing.T) { testQueueLimit(t, open) })
}

func testCancelRunning(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MessageCancel(ctx, q, "probe"); errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the driver cannot cancel messages: %v", err)
	}
	var rec recorder
	cfg := fastConfig(q, 1)
	cfg.Timeout = -1
	rec.hook(&cfg)
	running := make(chan struct{})
	causes := make(chan error, 1)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("long", func(ctx context.Context, d *fila.Delivery) error {
			close(running)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "long"})
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("the job did not start")
	}
	if err := c.MessageCancel(ctx, q, id); err != nil {
		t.Fatalf("MessageCancel: %v", err)
	}
	ev := rec.waitEnds(t, 1)[0]
	if cause := recvErr(t, causes, "the job's context did not end"); !errors.Is(cause, fila.ErrCancelled) {
		t.Errorf("the handler's context ended with cause %v, want fila.ErrCancelled", cause)
	}
	if ev.Outcome != worker.OutcomeCancelled || ev.ID != id || ev.SettleErr != nil {
		t.Errorf("end event = %+v; want outcome cancelled for %s", ev, id)
	}
	if dl, ok := deadLetter(t, c, q, id); ok && dl.Reason != fila.ReasonCancelled {
		t.Errorf("dead letter reason %q, want %q", dl.Reason, fila.ReasonCancelled)
	}
	assertEmpty(t, c, q, 300*time.Millisecond)
}

// fastConfig is a config for queue q with short, test-friendly timings.
func fastConfig(q string, concurrency int) worker.Config {
	return worker.Config{
		Queues:        map[string]worker.QueueConfig{q: {Concurrency: concurrency}},
		Lease:         time.Second,
		Backoff:       worker.ConstantBackoff(10 * time.Millisecond),
		ShutdownGrace: 5 * time.Second,
	}
}

func testAck(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 2)
	rec.hook(&cfg)
	var runs atomic.Int32
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("ok", func(ctx context.Context, d *fila.Delivery) error {
			runs.Add(1)
			return nil
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "ok", Body: []byte("hi")})
	ends := rec.waitEnds(t, 1)
	ev := ends[0]
	if ev.Outcome != worker.OutcomeAck || ev.ID != id || ev.Queue != q || ev.Kind != "ok" || ev.Attempt != 1 || ev.Err != nil {
		t.Fatalf("end event = %+v; want ack of %s attempt 1", ev, id)
	}
	if ev.Duration <= 0 || ev.Started.IsZero() {
		t.Errorf("end event has no duration or start: %+v", ev)
	}
	if starts := rec.startEvents(); len(starts) != 1 || starts[0].ID != id || starts[0].Outcome != "" {
		t.Errorf("start events = %+v", starts)
	}
	assertEmpty(t, c, q, 300*time.Millisecond)
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times; want 1", n)
	}
}

func testRetryBackoffSchedule(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	var mu sync.Mutex
	var backoffCalls []int
	cfg.Kinds = map[string]worker.KindConfig{"flaky": {
		MaxAttempts: 5,
		Backoff: func(attempt int) time.Duration {
			mu.Lock()
			backoffCalls = append(backoffCalls, attempt)
			mu.Unlock()
			return time.Duration(attempt) * 100 * time.Millisecond
		},
	}}
	var lastErrors []string
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("flaky", func(ctx context.Context, d *fila.Delivery) error {
			mu.Lock()
			lastErrors = append(lastErrors, d.LastError)
			mu.Unlock()
			if d.Attempt <= 3 {
				return fmt.Errorf("boom %d", d.Attempt)
			}
			return nil
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "flaky"})
	ends := rec.waitEnds(t, 4)
	starts := rec.startEvents()
	for i, ev := range ends {
		if ev.ID != id || ev.Attempt != i+1 {
			t.Fatalf("end %d = %+v; want attempt %d of %s", i, ev, i+1, id)
		}
		if i < 3 {
			want := time.Duration(i+1) * 100 * time.Millisecond
			if ev.Outcome != worker.OutcomeRetry || ev.RetryDelay != want || ev.Reason != fmt.Sprintf("boom %d", i+1) {
				t.Errorf("end %d = outcome %s delay %v reason %q; want retry after %v with reason boom %d",
					i, ev.Outcome, ev.RetryDelay, ev.Reason, want, i+1)
			}
			// The next attempt must not start before the delay passed
			// (a small allowance for the broker's clock).
			gap := starts[i+1].Started.Sub(ev.Started.Add(ev.Duration))
			if gap < want-20*time.Millisecond {
				t.Errorf("attempt %d started %v after attempt %d ended; the backoff was %v", i+2, gap, i+1, want)
			}
		} else if ev.Outcome != worker.OutcomeAck {
			t.Errorf("end %d = %+v; want ack", i, ev)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(backoffCalls) != "[1 2 3]" {
		t.Errorf("backoff called with attempts %v; want [1 2 3]", backoffCalls)
	}
	if want := []string{"", "boom 1", "boom 2", "boom 3"}; fmt.Sprint(lastErrors) != fmt.Sprint(want) {
		t.Errorf("deliveries' LastError = %q; want %q", lastErrors, want)
	}
}

func testMaxAttempts(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	cfg.Kinds = map[string]worker.KindConfig{"doomed": {MaxAttempts: 3}}
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("doomed", func(ctx context.Context, d *fila.Delivery) error {
			return errors.New("upstream unavailable")
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "doomed"})
	ends := rec.waitEnds(t, 3)
	want := []worker.Outcome{worker.OutcomeRetry, worker.OutcomeRetry, worker.OutcomeDead}
	for i, ev := range ends {
		if ev.Outcome != want[i] || ev.Attempt != i+1 || ev.MaxAttempts != 3 {
			t.Errorf("end %d = outcome %s attempt %d max %d; want %s attempt %d max 3", i, ev.Outcome, ev.Attempt, ev.MaxAttempts, want[i], i+1)
		}
	}
	if ends[2].Reason != "upstream unavailable" {
		t.Errorf("dead reason = %q", ends[2].Reason)
	}
	if dl, ok := deadLetter(t, c, q, id); ok && (dl.Reason != "upstream unavailable" || dl.Attempts != 3 || dl.Kind != "doomed") {
		t.Errorf("dead letter = reason %q attempts %d kind %q; want the error text after 3 attempts", dl.Reason, dl.Attempts, dl.Kind)
	}
	assertEmpty(t, c, q, 300*time.Millisecond)
	if n := rec.endCount(); n != 3 {
		t.Errorf("%d job ends; want 3", n)
	}
}

func testPermanent(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("strict", func(ctx context.Context, d *fila.Delivery) error {
			return fmt.Errorf("charging: %w", worker.Permanent(errors.New("card declined")))
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "strict"})
	ev := rec.waitEnds(t, 1)[0]
	if ev.Outcome != worker.OutcomeDead || ev.Attempt != 1 || ev.Reason != "charging: card declined" || !worker.IsPermanent(ev.Err) {
		t.Fatalf("end = %+v; want dead at attempt 1 with reason %q", ev, "charging: card declined")
	}
	if dl, ok := deadLetter(t, c, q, id); ok && (dl.Reason != "charging: card declined" || dl.Attempts != 1) {
		t.Errorf("dead letter = reason %q attempts %d", dl.Reason, dl.Attempts)
	}
	assertEmpty(t, c, q, 300*time.Millisecond)
}

func panicky(ctx context.Context, d *fila.Delivery) error {
	if d.Attempt == 1 {
		panic("kaboom")
	}
	if !strings.HasPrefix(d.LastError, "panic: kaboom") {
		return worker.Permanent(fmt.Errorf("last error %q does not hold the panic", d.LastError))
	}
	return nil
}

func testPanic(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	start(t, c, cfg, func(w *worker.Worker) { w.HandleFunc("panicky", panicky) })
	enqueue(t, c, q, fila.Message{Kind: "panicky"})
	ends := rec.waitEnds(t, 2)
	ev := ends[0]
	var pe *worker.PanicError
	if ev.Outcome != worker.OutcomeRetry || !errors.As(ev.Err, &pe) || pe.Value != "kaboom" {
		t.Fatalf("first end = %+v; want a retry of a *PanicError", ev)
	}
	if !strings.HasPrefix(ev.Reason, "panic: kaboom\n\ngoroutine ") ||
		!strings.Contains(ev.Reason, "worker_test.panicky(") ||
		strings.Contains(ev.Reason, "runtime/debug.Stack") {
		t.Errorf("reason should hold the panic and the stack from the panicking function:\n%s", ev.Reason)
	}
	if len(ev.Reason) > 5<<10 {
		t.Errorf("reason is %d bytes; the stack should be trimmed", len(ev.Reason))
	}
	if ends[1].Outcome != worker.OutcomeAck {
		t.Errorf("second end = %+v; want ack", ends[1])
	}
}

func testUnknownKind(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("known", func(context.Context, *fila.Delivery) error { return nil })
	})
	id := enqueue(t, c, q, fila.Message{Kind: "nobody.handles"})
	ev := rec.waitEnds(t, 1)[0]
	const want = `worker: no handler registered for kind "nobody.handles"`
	if ev.Outcome != worker.OutcomeDead || ev.Reason != want || ev.Attempt != 1 {
		t.Fatalf("end = %+v; want dead with reason %q", ev, want)
	}
	if dl, ok := deadLetter(t, c, q, id); ok && dl.Reason != want {
		t.Errorf("dead letter reason = %q", dl.Reason)
	}
}

func testUnknownKindHandler(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	cfg.UnknownKind = worker.HandlerFunc(func(ctx context.Context, d *fila.Delivery) error {
		return fmt.Errorf("no handler for %s here yet", d.Kind)
	})
	cfg.MaxAttempts = 2
	start(t, c, cfg, nil)
	enqueue(t, c, q, fila.Message{Kind: "from.the.future"})
	ends := rec.waitEnds(t, 2)
	if ends[0].Outcome != worker.OutcomeRetry || ends[1].Outcome != worker.OutcomeDead ||
		ends[1].Reason != "no handler for from.the.future here yet" {
		t.Fatalf("ends = %+v; want a retry then dead by the UnknownKind handler", ends)
	}
}

func testTimeout(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	cfg.Kinds = map[string]worker.KindConfig{"slow": {Timeout: 50 * time.Millisecond, MaxAttempts: 1}}
	causes := make(chan error, 1)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("slow", func(ctx context.Context, d *fila.Delivery) error {
			if _, ok := ctx.Deadline(); !ok {
				return worker.Permanent(errors.New("job context has no deadline"))
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
	})
	enqueue(t, c, q, fila.Message{Kind: "slow"})
	ev := rec.waitEnds(t, 1)[0]
	if cause := recvErr(t, causes, "the job's context did not end"); !errors.Is(cause, worker.ErrTimeout) {
		t.Errorf("context cause = %v; want ErrTimeout", cause)
	}
	if !errors.Is(ev.Err, worker.ErrTimeout) || !errors.Is(ev.Err, context.DeadlineExceeded) {
		t.Errorf("end error = %v; want ErrTimeout wrapping the handler's error", ev.Err)
	}
	if ev.Outcome != worker.OutcomeDead || !strings.HasPrefix(ev.Reason, "worker: job timed out after 50ms") {
		t.Errorf("end = outcome %s reason %q; want dead (max attempts 1) with a timeout reason", ev.Outcome, ev.Reason)
	}
}

// testHeartbeatKeepsLease runs a job for two leases and checks nobody else
// could receive its message meanwhile.
func testHeartbeatKeepsLease(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	cfg.Lease = time.Second
	cfg.Heartbeat = 200 * time.Millisecond
	started, finish := make(chan struct{}), make(chan struct{})
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("long", func(ctx context.Context, d *fila.Delivery) error {
			close(started)
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	})
	enqueue(t, c, q, fila.Message{Kind: "long"})
	waitClosed(t, started, "the job did not start")
	// For two leases, a competing consumer finds nothing.
	assertEmpty(t, c, q, 2*time.Second)
	close(finish)
	if ev := rec.waitEnds(t, 1)[0]; ev.Outcome != worker.OutcomeAck || ev.Duration < 2*time.Second {
		t.Fatalf("end = %+v; want an ack after over 2s", ev)
	}
}

func testLeaseLost(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	// Heartbeats slower than the lease: the lease expires under the job.
	cfg.Lease = time.Second
	cfg.Heartbeat = 1500 * time.Millisecond
	started := make(chan struct{})
	causes := make(chan error, 1)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("long", func(ctx context.Context, d *fila.Delivery) error {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil // would ack, if the outcome were applied
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "long"})
	waitClosed(t, started, "the job did not start")
	// Another consumer takes the message once the lease expired.
	ds := receiveNow(t, c, q, 1, waitTimeout)
	if ds[0].ID != id || ds[0].Attempt != 2 {
		t.Fatalf("competing receive got %s attempt %d; want %s attempt 2", ds[0].ID, ds[0].Attempt, id)
	}
	ev := rec.waitEnds(t, 1)[0]
	if ev.Outcome != worker.OutcomeLeaseLost || !errors.Is(ev.SettleErr, fila.ErrLeaseLost) {
		t.Fatalf("end = %+v; want lease lost", ev)
	}
	if cause := recvErr(t, causes, "the job's context did not end"); !errors.Is(cause, fila.ErrLeaseLost) {
		t.Errorf("job context cause = %v; want ErrLeaseLost", cause)
	}
	// The worker applied nothing: the new holder's lease is intact.
	if err := ds[0].Ack(context.Background()); err != nil {
		t.Fatalf("the new holder's ack: %v", err)
	}
}

func testShutdownFinish(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 2)
	rec.hook(&cfg)
	cfg.ShutdownGrace = waitTimeout
	started, finish := make(chan struct{}), make(chan struct{})
	ctxErrs := make(chan error, 1)
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(ctx context.Context, d *fila.Delivery) error {
			close(started)
			<-finish
			ctxErrs <- ctx.Err()
			return nil
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "job"})
	waitClosed(t, started, "the job did not start")
	r.cancel()
	// Run waits for the running job.
	time.Sleep(100 * time.Millisecond)
	if r.returned() {
		t.Fatal("Run returned while a job was running within its grace period")
	}
	close(finish)
	if err := r.wait(); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if err := recvErr(t, ctxErrs, "the job did not return"); err != nil {
		t.Errorf("job context ended (%v) within the grace period", err)
	}
	if ev := rec.waitEnds(t, 1)[0]; ev.Outcome != worker.OutcomeAck || ev.ID != id {
		t.Errorf("end = %+v; want ack", ev)
	}
	assertEmpty(t, c, q, 300*time.Millisecond)
}

func testShutdownGraceOver(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 2)
	rec.hook(&cfg)
	cfg.ShutdownGrace = 100 * time.Millisecond
	started := make(chan struct{})
	causes := make(chan error, 1)
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("stubborn", func(ctx context.Context, d *fila.Delivery) error {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "stubborn"})
	waitClosed(t, started, "the job did not start")
	if err := r.stop(); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if cause := recvErr(t, causes, "the job's context did not end"); !errors.Is(cause, worker.ErrShutdown) {
		t.Errorf("job context cause = %v; want ErrShutdown", cause)
	}
	ev := rec.waitEnds(t, 1)[0]
	if ev.Outcome != worker.OutcomeReleased || !errors.Is(ev.Err, worker.ErrShutdown) {
		t.Fatalf("end = %+v; want released", ev)
	}
	// Released, not backed off: ready again at once with the reason kept.
	ds := receiveNow(t, c, q, 1, 2*time.Second)
	if ds[0].ID != id || ds[0].Attempt != 2 || !strings.Contains(ds[0].LastError, "shutdown") {
		t.Errorf("after shutdown got %s attempt %d last error %q; want %s attempt 2 released by shutdown",
			ds[0].ID, ds[0].Attempt, ds[0].LastError, id)
	}
	_ = ds[0].Ack(context.Background())
}

func testShutdownUnstarted(t *testing.T, base *fila.Client) {
	q := newQueue(t, base)
	ids := map[string]bool{}
	for i := range 3 {
		ids[enqueue(t, base, q, fila.Message{Kind: "job", Body: []byte{byte(i)}})] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The worker's context ends while its Receive is returning messages:
	// they were received but must not start.
	var received atomic.Int32
	hd := &hookDriver{Driver: base.Driver(), afterReceive: func(_ string, ds []backend.Delivery) {
		received.Add(int32(len(ds)))
		cancel()
	}}
	c := clientOver(t, hd)
	var rec recorder
	cfg := fastConfig(q, 5)
	rec.hook(&cfg)
	var runs atomic.Int32
	r := startCtx(t, ctx, cancel, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(context.Context, *fila.Delivery) error {
			runs.Add(1)
			return nil
		})
	})
	if err := r.wait(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if n := received.Load(); n == 0 {
		t.Fatal("the worker received nothing")
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("%d jobs ran after shutdown began", n)
	}
	if n := rec.endCount(); n != 0 {
		t.Errorf("%d jobs ended; want none started", n)
	}
	// All three are ready again at once (released, not left to expire) and
	// none was acked.
	got := map[string]bool{}
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		for _, d := range receiveNow(t, base, q, 10, time.Until(deadline)) {
			got[d.ID] = true
			if err := d.Ack(context.Background()); err != nil {
				t.Errorf("ack %s: %v", d.ID, err)
			}
		}
	}
	for id := range ids {
		if !got[id] {
			t.Errorf("message %s was not released at shutdown", id)
		}
	}
}

func testConcurrency(t *testing.T, base *fila.Client) {
	qa, qb := newQueue(t, base), newQueue(t, base)
	limits := map[string]int{qa: 2, qb: 3}
	jobTime := map[string]time.Duration{qa: 5 * time.Millisecond, qb: 20 * time.Millisecond}
	leased := map[string]*gauge{qa: {}, qb: {}}
	running := map[string]*gauge{qa: {}, qb: {}}
	// Acks wait until both queues hold as many leases as the worker allows
	// (running jobs plus four times the concurrency in acks in flight), so
	// a worker that let more acks pile up would show it in the peak. A
	// broken bound is caught even if the wait ends by its time limit.
	const leasesPerSlot = 5
	full := make(chan struct{})
	var fullOnce sync.Once
	hd := &hookDriver{
		Driver: base.Driver(),
		afterReceive: func(q string, ds []backend.Delivery) {
			leased[q].add(int64(len(ds)))
			if leased[qa].cur.Load() >= leasesPerSlot*int64(limits[qa]) && leased[qb].cur.Load() >= leasesPerSlot*int64(limits[qb]) {
				fullOnce.Do(func() { close(full) })
			}
		},
		settled: func(q string) { leased[q].add(-1) },
		beforeAck: func(ctx context.Context) {
			limit := time.NewTimer(5 * time.Second)
			defer limit.Stop()
			select {
			case <-full:
			case <-limit.C:
			case <-ctx.Done():
			}
		},
	}
	c := clientOver(t, hd)
	const perQueue = 40 // more than leasesPerSlot times either limit
	for q := range limits {
		enqueueJobs(t, c, q, perQueue)
	}
	var rec recorder
	cfg := fastConfig(qa, limits[qa])
	cfg.Queues[qb] = worker.QueueConfig{Concurrency: limits[qb]}
	// Held acks are not extended (their jobs ended): the lease outlasts the
	// longest hold, or a slow broker's leases would expire meanwhile.
	cfg.Lease = 30 * time.Second
	rec.hook(&cfg)
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(ctx context.Context, d *fila.Delivery) error {
			g := running[d.Queue]
			g.add(1)
			defer g.add(-1)
			// Hold the slot until the queue's limit is reached (or a while),
			// so a worker that ran too many at once would show it.
			deadline := time.Now().Add(time.Second)
			for g.cur.Load() < int64(limits[d.Queue]) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			// qb's jobs take longer, so qa reaches its bound first and
			// waits there while qb fills: a worker that allowed qa more
			// acks in flight would take more meanwhile.
			time.Sleep(jobTime[d.Queue])
			return nil
		})
	})
	ends := rec.waitEnds(t, 2*perQueue)
	for _, ev := range ends {
		if ev.Outcome != worker.OutcomeAck {
			t.Errorf("end = %+v; want ack", ev)
		}
	}
	for q, limit := range limits {
		if p := running[q].peak.Load(); p != int64(limit) {
			t.Errorf("queue with concurrency %d ran %d jobs at once at the peak", limit, p)
		}
		// Running jobs' leases plus acks in flight (at most four times
		// the concurrency, see the package documentation).
		if p := leased[q].peak.Load(); p > leasesPerSlot*int64(limit) {
			t.Errorf("queue with concurrency %d held %d messages leased at once; want at most %d", limit, p, leasesPerSlot*limit)
		}
	}
}

type sendWelcome struct {
	UserID int64 `json:"user_id"`
}

var sendWelcomeJob = worker.Kind[sendWelcome]{Name: "email.welcome"}

func testTypedKind(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	var mu sync.Mutex
	var got []int64
	var headers []string
	start(t, c, cfg, func(w *worker.Worker) {
		worker.Handle(w, sendWelcomeJob, func(ctx context.Context, args sendWelcome, d *fila.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, args.UserID)
			headers = append(headers, d.Headers["tenant"])
			return nil
		})
	})
	ctx := context.Background()
	id, err := sendWelcomeJob.Enqueue(ctx, c, q, sendWelcome{UserID: 7}, worker.Header("tenant", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	rec.waitEnds(t, 1)
	if _, err := sendWelcomeJob.EnqueueBatch(ctx, c, q, []sendWelcome{{8}, {9}}); err != nil {
		t.Fatal(err)
	}
	bad := enqueue(t, c, q, fila.Message{Kind: "email.welcome", Body: []byte("not json")})
	ends := rec.waitEnds(t, 4)
	mu.Lock()
	if fmt.Sprint(got) != "[7 8 9]" && fmt.Sprint(got) != "[7 9 8]" || headers[0] != "acme" {
		t.Errorf("handler got %v with headers %q; want 7 (tenant acme), 8, 9", got, headers)
	}
	mu.Unlock()
	if ends[0].ID != id {
		t.Errorf("first job id %s; Enqueue returned %s", ends[0].ID, id)
	}
	for _, ev := range ends {
		if ev.ID == bad {
			if ev.Outcome != worker.OutcomeDead || ev.Attempt != 1 || !strings.Contains(ev.Reason, "decode email.welcome arguments") {
				t.Errorf("undecodable body: end = %+v; want dead at once with a decode reason", ev)
			}
		} else if ev.Outcome != worker.OutcomeAck {
			t.Errorf("end = %+v; want ack", ev)
		}
	}
}

func testMiddlewareAndLogger(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	capture := newCapture()
	cfg.Logger = slog.New(capture)
	var mu sync.Mutex
	var trace []string
	mw := func(name string) worker.Middleware {
		return func(next worker.Handler) worker.Handler {
			return worker.HandlerFunc(func(ctx context.Context, d *fila.Delivery) error {
				mu.Lock()
				trace = append(trace, name+">"+d.Kind)
				mu.Unlock()
				err := next.Work(ctx, d)
				mu.Lock()
				trace = append(trace, name+"<")
				mu.Unlock()
				return err
			})
		}
	}
	cfg.Middleware = []worker.Middleware{mw("outer"), mw("inner")}
	start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("logs", func(ctx context.Context, d *fila.Delivery) error {
			worker.Logger(ctx).Info("sending")
			return nil
		})
	})
	id := enqueue(t, c, q, fila.Message{Kind: "logs"})
	rec.waitEnds(t, 1)
	enqueue(t, c, q, fila.Message{Kind: "unknown"})
	rec.waitEnds(t, 2)
	mu.Lock()
	if want := "[outer>logs inner>logs inner< outer< outer>unknown inner>unknown inner< outer<]"; fmt.Sprint(trace) != want {
		t.Errorf("middleware trace = %v; want %s", trace, want)
	}
	mu.Unlock()
	r, ok := capture.find("sending")
	if !ok {
		t.Fatal("the handler's log record is missing")
	}
	if r["queue"] != q || r["kind"] != "logs" || r["id"] != id || r["attempt"] != "1" {
		t.Errorf("job logger attributes = %v; want queue, kind, id and attempt", r)
	}
	if r, ok := capture.find("fila worker: job dead-lettered"); !ok || r["kind"] != "unknown" || r["level"] != "ERROR" {
		t.Errorf("dead-letter log record = %v (found %v)", r, ok)
	}
}

// testClientClosed closes the client under a running job: Run returns
// ErrClosed, and the job's ack fails (unsettled: its lease will expire).
func testClientClosed(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	var rec recorder
	cfg := fastConfig(q, 1)
	rec.hook(&cfg)
	started, finish := make(chan struct{}), make(chan struct{})
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(context.Context, *fila.Delivery) error {
			close(started)
			<-finish
			return nil
		})
	})
	enqueue(t, c, q, fila.Message{Kind: "job"})
	waitClosed(t, started, "the job did not start")
	c.Close()
	close(finish)
	if err := r.wait(); !errors.Is(err, fila.ErrClosed) {
		t.Fatalf("Run after the client closed = %v; want ErrClosed", err)
	}
	if ev := rec.waitEnds(t, 1)[0]; ev.Outcome != worker.OutcomeUnsettled || !errors.Is(ev.SettleErr, fila.ErrClosed) {
		t.Errorf("end = %+v; want unsettled with ErrClosed", ev)
	}
}

// ackFaultDriver injects Ack failures: whole failures of the next calls, and
// per-delivery errors (once each) for chosen message ids. A message given
// ErrLeaseLost is acked underneath all the same (so it does not come back);
// one given another error is left leased, as a driver would.
type ackFaultDriver struct {
	backend.Driver
	mu      sync.Mutex
	whole   int              // Ack calls still to fail as a whole
	perRef  map[string]error // per-delivery errors still to inject
	maxRefs int              // the largest Ack call seen
}

func (f *ackFaultDriver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	f.mu.Lock()
	f.maxRefs = max(f.maxRefs, len(refs))
	if f.whole > 0 {
		f.whole--
		f.mu.Unlock()
		return nil, errors.New("injected: broker hiccup")
	}
	inject := make([]error, len(refs))
	var pass []backend.Ref
	var at []int
	for i, r := range refs {
		if e, ok := f.perRef[r.ID]; ok {
			delete(f.perRef, r.ID)
			inject[i] = e
		}
		if inject[i] == nil || errors.Is(inject[i], backend.ErrLeaseLost) {
			pass = append(pass, r)
			at = append(at, i)
		}
	}
	f.mu.Unlock()
	errs := make([]error, len(refs))
	copy(errs, inject)
	if len(pass) > 0 {
		got, err := f.Driver.Ack(ctx, pass)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			if inject[i] == nil {
				errs[i] = got[j]
			}
		}
	}
	return errs, nil
}

// ackFaultReceiver is ackFaultDriver on a driver that acks and claims in
// one round trip: AckReceive injects the same faults into its acks.
type ackFaultReceiver struct {
	*ackFaultDriver
	combined atomic.Int64 // refs acked by AckReceive
}

func (f *ackFaultReceiver) AckReceive(ctx context.Context, refs []backend.Ref, queue string, p backend.ReceiveParams) ([]error, []backend.Delivery, error) {
	errs, err := f.Ack(ctx, refs)
	if err != nil {
		return nil, nil, err
	}
	f.combined.Add(int64(len(refs)))
	ar, ok := f.Driver.(backend.AckReceiver)
	if !ok {
		return errs, nil, nil
	}
	_, ds, err := ar.AckReceive(ctx, nil, queue, p)
	return errs, ds, err
}

// testBatchedAckOutcomes checks that each job of a batched ack is reported
// with its own outcome: a per-delivery lost lease is lease_lost, a
// per-delivery failure is learnt by acking that delivery alone, and a failure
// of the whole batch falls back to acking each delivery alone.
func testBatchedAckOutcomes(t *testing.T, open func(t *testing.T) *fila.Client) {
	for _, tc := range []struct{ whole, combine bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		whole := tc.whole
		t.Run(fmt.Sprintf("whole=%v,combine=%v", tc.whole, tc.combine), func(t *testing.T) {
			// Like testConcurrency, both clients close the driver.
			fd := &ackFaultDriver{Driver: open(t).Driver(), perRef: map[string]error{}}
			var drv backend.Driver = fd
			if tc.combine {
				// The acks go with the receive loop's claims (they
				// may also go with AckBatch, by timing).
				drv = &ackFaultReceiver{ackFaultDriver: fd}
			}
			c := clientOver(t, drv)
			q := newQueue(t, c)
			const n = 6
			ids := enqueueJobs(t, c, q, n)
			lost, flaky := ids[0], ids[1]
			fd.mu.Lock()
			if whole {
				fd.whole = 1
			} else {
				fd.perRef[lost] = backend.ErrLeaseLost
				fd.perRef[flaky] = errors.New("injected: flaky")
			}
			fd.mu.Unlock()
			var rec recorder
			cfg := fastConfig(q, n)
			rec.hook(&cfg)
			var running atomic.Int32
			start(t, c, cfg, func(w *worker.Worker) {
				w.HandleFunc("job", func(ctx context.Context, d *fila.Delivery) error {
					// Finish together, so the acks can share a batch.
					running.Add(1)
					deadline := time.Now().Add(time.Second)
					for running.Load() < n && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
					return nil
				})
			})
			ends := rec.waitEnds(t, n)
			for _, ev := range ends {
				want := worker.OutcomeAck
				if ev.ID == lost && !whole {
					want = worker.OutcomeLeaseLost
				}
				if ev.Outcome != want {
					t.Errorf("end of %s = %+v; want %s", ev.ID, ev, want)
				}
				if want == worker.OutcomeLeaseLost && !errors.Is(ev.SettleErr, fila.ErrLeaseLost) {
					t.Errorf("lease lost end of %s has settle error %v; want ErrLeaseLost", ev.ID, ev.SettleErr)
				}
			}
			assertEmpty(t, c, q, 300*time.Millisecond)
			fd.mu.Lock()
			t.Logf("largest ack batch: %d of %d", fd.maxRefs, n)
			fd.mu.Unlock()
		})
	}
}
