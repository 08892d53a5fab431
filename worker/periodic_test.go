package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// markDriver exposes a driver's marks and nothing beyond the Driver
// interface: without dedup keys, the marks alone must keep runs single, so
// a duplicate shows in the queue instead of being folded by the dedup key.
type markDriver struct {
	backend.Driver
	backend.Marker
}

func marksOnly(d *memory.Driver) *markDriver { return &markDriver{Driver: d, Marker: d} }

// grantAll is a broken Marker whose create-if-absent always succeeds, as if
// every process won every claim: the dedup key is all that is left.
type grantAll struct {
	*memory.Driver
}

func (g grantAll) MarkSet(ctx context.Context, queue, name string, until time.Time, _ bool) (bool, error) {
	return g.Driver.MarkSet(ctx, queue, name, until, false)
}

// failingEnqueue fails Enqueue with err while fail returns true (it is
// called with the 1-based number of the call), then passes it through.
type failingEnqueue struct {
	*markDriver
	calls atomic.Int32
	err   error
	fail  func(call int32) bool
}

func (f *failingEnqueue) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if f.fail(f.calls.Add(1)) {
		return nil, f.err
	}
	return f.markDriver.Enqueue(ctx, queue, msgs)
}

// everySecond is a 1-second schedule enqueueing into queue.
func everySecond(queue string) worker.Periodic {
	return worker.Periodic{
		Name: "tick", Queue: queue, Every: time.Second,
		Message: fila.Message{Kind: "periodic.tick", Body: []byte("body"), Headers: map[string]string{"tenant": "t1"}},
	}
}

// scheduledAt returns a delivery's tick, failing the test if its header is
// missing or malformed.
func scheduledAt(t *testing.T, d *fila.Delivery) time.Time {
	t.Helper()
	v, ok := d.Headers[worker.HeaderScheduledAt]
	if !ok {
		t.Fatalf("delivery %s has no %s header: %v", d.ID, worker.HeaderScheduledAt, d.Headers)
	}
	tick, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatalf("%s %q: %v", worker.HeaderScheduledAt, v, err)
	}
	if got := tick.UTC().Format(worker.ScheduledAtLayout); got != v || !strings.HasSuffix(v, "Z") || len(v) != len("2006-01-02T15:04:05.000000000Z") {
		t.Errorf("%s %q is not RFC 3339 with nanoseconds in UTC", worker.HeaderScheduledAt, v)
	}
	return tick
}

// drain receives and acks every message of queue until none comes within
// 200ms, returning them.
func drain(t *testing.T, c *fila.Client, queue string) []*fila.Delivery {
	t.Helper()
	var out []*fila.Delivery
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 100})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, d := range ds {
			if err := d.Ack(context.Background()); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		out = append(out, ds...)
	}
}

// checkOnePerTick checks that ticks holds each whole second from its first
// to its last exactly once, and at least min of them.
func checkOnePerTick(t *testing.T, ticks []time.Time, min int) {
	t.Helper()
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	if len(ticks) < min {
		t.Fatalf("%d runs; want at least %d: %v", len(ticks), min, ticks)
	}
	for i, tk := range ticks {
		if tk.Nanosecond() != 0 {
			t.Errorf("tick %v is not a multiple of Every (1s)", tk)
		}
		if i == 0 {
			continue
		}
		switch d := tk.Sub(ticks[i-1]); {
		case d == 0:
			t.Errorf("tick %v was enqueued more than once", tk)
		case d != time.Second:
			t.Errorf("no run between ticks %v and %v", ticks[i-1], tk)
		}
	}
}

func TestPeriodicValidation(t *testing.T) {
	c := memClient(t)
	ok := everySecond("runs")
	with := func(f func(p *worker.Periodic)) []worker.Periodic {
		p := ok
		f(&p)
		return []worker.Periodic{p}
	}
	for _, tc := range []struct {
		name     string
		periodic []worker.Periodic
		want     string
	}{
		{"empty name", with(func(p *worker.Periodic) { p.Name = "" }), "Config.Periodic[0]: Name"},
		{"bad name", with(func(p *worker.Periodic) { p.Name = "a/b" }), `periodic "a/b": Name`},
		{"duplicate name", []worker.Periodic{ok, ok}, "used twice"},
		{"bad queue", with(func(p *worker.Periodic) { p.Queue = "" }), "Queue"},
		{"neither", with(func(p *worker.Periodic) { p.Every = 0 }), "set Cron or Every"},
		{"both", with(func(p *worker.Periodic) { p.Cron = "@hourly" }), "not both"},
		{"every too short", with(func(p *worker.Periodic) { p.Every = 500 * time.Millisecond }), "shorter than 1s"},
		{"location with every", with(func(p *worker.Periodic) { p.Location = time.UTC }), "Location applies to Cron only"},
		{"bad cron", with(func(p *worker.Periodic) { p.Every, p.Cron = 0, "61 * * * *" }), `Cron "61 * * * *"`},
		{"six fields", with(func(p *worker.Periodic) { p.Every, p.Cron = 0, "0 0 * * * *" }), "Cron"},
		{"@every", with(func(p *worker.Periodic) { p.Every, p.Cron = 0, "@every 5m" }), "use Every"},
		{"CRON_TZ", with(func(p *worker.Periodic) { p.Every, p.Cron = 0, "CRON_TZ=Europe/Paris 0 9 * * *" }), "Location"},
		{"never fires", with(func(p *worker.Periodic) { p.Every, p.Cron = 0, "0 0 30 2 *" }), "never fires"},
		{"bad missed", with(func(p *worker.Periodic) { p.Missed = 7 }), "MissedPolicy(7)"},
		{"no kind", with(func(p *worker.Periodic) { p.Message.Kind = "" }), "Kind is empty"},
		{"run at", with(func(p *worker.Periodic) { p.Message.RunAt = time.Now() }), "RunAt"},
		{"dedup key", with(func(p *worker.Periodic) { p.Message.DedupKey = "k" }), "DedupKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := worker.New(c, worker.Config{Periodic: tc.periodic})
			if err == nil || w != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error containing %q", w, err, tc.want)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		// Two schedules on one queue, with the worker serving no queue.
		other := ok
		other.Name, other.Every, other.Cron = "nightly", 0, "0 3 * * *"
		if _, err := worker.New(c, worker.Config{Periodic: []worker.Periodic{ok, other}}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPeriodicNeedsMarks(t *testing.T) {
	// hookDriver passes the Driver interface and dedup keys only.
	c := clientOver(t, &hookDriver{Driver: memory.NewBroker(memory.BrokerOptions{}).Open()})
	w, err := worker.New(c, worker.Config{Periodic: []worker.Periodic{everySecond("runs")}})
	if !errors.Is(err, fila.ErrUnsupported) || w != nil || !strings.Contains(err.Error(), "marks") {
		t.Fatalf("New = %v, %v; want an ErrUnsupported error naming marks", w, err)
	}
	// Without schedules the same driver is fine.
	if _, err := worker.New(c, worker.Config{Queues: map[string]worker.QueueConfig{"q": {}}}); err != nil {
		t.Fatalf("New without Periodic: %v", err)
	}
}

// stopAll stops the workers together: a worker's stop checks that no
// worker goroutine is left, so the others must be stopping too.
func stopAll(t *testing.T, workers []*running) {
	t.Helper()
	for _, r := range workers {
		r.cancel()
	}
	for _, r := range workers {
		if err := r.wait(); err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

// TestPeriodicOneRunPerTick runs one 1-second schedule in three workers
// (three driver instances of one broker, like three processes) for five
// ticks: each tick is enqueued exactly once, with no gap.
func TestPeriodicOneRunPerTick(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	consumer, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Close() })
	const queue = "periodic-runs"
	p := everySecond(queue)
	var workers []*running
	for range 3 {
		c := clientOver(t, marksOnly(b.Open()))
		workers = append(workers, start(t, c, worker.Config{Periodic: []worker.Periodic{p}}, nil))
	}
	started := time.Now()

	var ticks []time.Time
	seen := map[time.Time]bool{}
	for len(seen) < 5 {
		for _, d := range receiveNow(t, consumer, queue, 10, waitTimeout) {
			tick := scheduledAt(t, d)
			ticks = append(ticks, tick)
			seen[tick] = true
			if d.Kind != p.Message.Kind || string(d.Body) != "body" || d.Headers["tenant"] != "t1" {
				t.Errorf("run %s: kind %q body %q headers %v; want the template's", d.ID, d.Kind, d.Body, d.Headers)
			}
			if err := d.Ack(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	stopAll(t, workers)
	for _, d := range drain(t, consumer, queue) {
		ticks = append(ticks, scheduledAt(t, d))
	}
	checkOnePerTick(t, ticks, 5)
	if first := slices.MinFunc(ticks, func(a, b time.Time) int { return a.Compare(b) }); first.After(started.Truncate(time.Second).Add(time.Second)) {
		t.Errorf("first run is for %v; the workers were all running at %v, so the tick after that was missed", first, started)
	}
	if len(p.Message.Headers) != 1 {
		t.Errorf("the template's headers were changed: %v", p.Message.Headers)
	}
}

// TestPeriodicDedupKeyGuards breaks the marks (every process wins every
// claim): where the driver enforces dedup keys, they alone keep each tick
// single while its run is pending.
func TestPeriodicDedupKeyGuards(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	consumer, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Close() })
	const queue = "periodic-runs"
	capture := newCapture()
	var workers []*running
	for range 3 {
		c := clientOver(t, grantAll{b.Open()})
		workers = append(workers, start(t, c, worker.Config{Periodic: []worker.Periodic{everySecond(queue)}, Logger: slog.New(capture)}, nil))
	}
	// Three ticks, each claimed by all three workers.
	waitFor(t, "three ticks enqueued", func() bool {
		st, err := consumer.QueueStats(context.Background(), queue)
		return err == nil && st.Ready >= 3
	})
	stopAll(t, workers)
	var ticks []time.Time
	for _, d := range drain(t, consumer, queue) {
		ticks = append(ticks, scheduledAt(t, d))
	}
	checkOnePerTick(t, ticks, 3)
	if _, ok := capture.find("fila worker: periodic run missed: enqueueing it failed"); ok {
		t.Error("a duplicate enqueue was reported as a failure; ErrDuplicate means the run is enqueued")
	}
}

func TestPeriodicMissed(t *testing.T) {
	day := func(queue string, missed worker.MissedPolicy) worker.Periodic {
		return worker.Periodic{Name: "daily", Queue: queue, Every: 24 * time.Hour, Missed: missed,
			Message: fila.Message{Kind: "periodic.daily"}}
	}
	// lastTick is the daily schedule's tick before now (midnight UTC).
	lastTick := func() time.Time { return time.Now().UTC().Truncate(24 * time.Hour) }
	markName := func(tick time.Time) string { return fmt.Sprintf("periodic/daily/%d", tick.UnixNano()) }
	// runs returns the runs of queue enqueued for tick.
	runs := func(t *testing.T, c *fila.Client, queue string, tick time.Time) int {
		n := 0
		for _, d := range drain(t, c, queue) {
			if scheduledAt(t, d).Equal(tick) {
				n++
			}
		}
		return n
	}

	t.Run("run once enqueues a tick never run", func(t *testing.T) {
		d := memory.NewBroker(memory.BrokerOptions{}).Open()
		c := clientOver(t, d)
		capture := newCapture()
		tick := lastTick()
		start(t, c, worker.Config{Periodic: []worker.Periodic{day("daily", worker.MissedRunOnce)}, Logger: slog.New(capture)}, nil)
		ds := receiveNow(t, c, "daily", 10, waitTimeout)
		if len(ds) != 1 || !scheduledAt(t, ds[0]).Equal(tick) {
			t.Fatalf("received %d runs; want the one of %v", len(ds), tick)
		}
		// Settled, so that the client stops watching it for cancels (a
		// goroutine of its own) before the worker's leak check.
		if err := ds[0].Ack(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ok, err := d.MarkGet(context.Background(), "daily", markName(tick)); err != nil || !ok {
			t.Errorf("mark of the run = %v, %v; want it set", ok, err)
		}
	})
	t.Run("run once skips a tick already run", func(t *testing.T) {
		d := memory.NewBroker(memory.BrokerOptions{}).Open()
		c := clientOver(t, d)
		tick := lastTick()
		// Another process ran it.
		if _, err := d.MarkSet(context.Background(), "daily", markName(tick), time.Now().Add(48*time.Hour), true); err != nil {
			t.Fatal(err)
		}
		capture := newCapture()
		start(t, c, worker.Config{Periodic: []worker.Periodic{day("daily", worker.MissedRunOnce)}, Logger: slog.New(capture)}, nil)
		waitFor(t, "the claim to be refused", func() bool {
			_, ok := capture.find("fila worker: periodic run claimed by another process")
			return ok
		})
		if n := runs(t, c, "daily", tick); n != 0 {
			t.Errorf("%d runs of %v; want none: another process had run it", n, tick)
		}
	})
	t.Run("skip runs no missed tick", func(t *testing.T) {
		d := memory.NewBroker(memory.BrokerOptions{}).Open()
		c := clientOver(t, d)
		tick := lastTick()
		capture := newCapture()
		r := start(t, c, worker.Config{Periodic: []worker.Periodic{day("daily", worker.MissedSkip)}, Logger: slog.New(capture)}, nil)
		waitFor(t, "the schedule to start", func() bool {
			_, ok := capture.find("fila worker: periodic schedule started")
			return ok
		})
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if n := runs(t, c, "daily", tick); n != 0 {
			t.Errorf("%d runs of %v; want none with MissedSkip", n, tick)
		}
		if ok, err := d.MarkGet(context.Background(), "daily", markName(tick)); err != nil || ok {
			t.Errorf("mark of the missed tick = %v, %v; want none", ok, err)
		}
	})
}

// TestPeriodicEnqueueRetry fails the first enqueues of a run as a broker
// outage would: the run is enqueued once when the broker answers again.
func TestPeriodicEnqueueRetry(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	consumer, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Close() })
	drv := &failingEnqueue{markDriver: marksOnly(b.Open()), err: fmt.Errorf("%w: injected", fila.ErrUnavailable),
		fail: func(call int32) bool { return call <= 3 }}
	c := clientOver(t, drv)
	capture := newCapture()
	p := everySecond("runs")
	p.Every = 24 * time.Hour // one tick, the one run once at start, with a day to retry
	p.Missed = worker.MissedRunOnce
	r := start(t, c, worker.Config{Periodic: []worker.Periodic{p}, Logger: slog.New(capture)}, nil)
	ds := receiveNow(t, consumer, "runs", 10, waitTimeout)
	if len(ds) != 1 {
		t.Fatalf("received %d runs; want 1", len(ds))
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if n := drv.calls.Load(); n != 4 {
		t.Errorf("%d enqueue calls; want 3 failures and 1 success", n)
	}
	if rec, ok := capture.find("fila worker: periodic enqueue failed; retrying"); !ok || rec["level"] != "WARN" {
		t.Errorf("first failure logged as %v; want a Warn", rec)
	}
	if _, ok := capture.find("fila worker: periodic enqueue works again"); !ok {
		t.Error("no Info once enqueueing worked again")
	}
	if extra := drain(t, consumer, "runs"); len(extra) != 0 {
		t.Errorf("%d more runs; want 1 in all", len(extra))
	}
}

// TestPeriodicEnqueueGivesUp: a run whose enqueue still fails at the next
// tick is logged as missed and its claim is given back.
func TestPeriodicEnqueueGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantCalls func(n int32) bool
	}{
		// Retried with backoff (100ms, 200ms, 400ms, 800ms) until the next
		// retry would start after the next tick: 5 calls in 1.5s.
		{"unavailable", fmt.Errorf("%w: injected", fila.ErrUnavailable), func(n int32) bool { return n >= 4 }},
		// Not retried.
		{"invalid", fmt.Errorf("%w: injected", fila.ErrInvalid), func(n int32) bool { return n == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := memory.NewBroker(memory.BrokerOptions{})
			md := b.Open()
			drv := &failingEnqueue{markDriver: marksOnly(md), err: tc.err, fail: func(int32) bool { return true }}
			c := clientOver(t, drv)
			capture := newCapture()
			// The first tick's retries have 2s, up to the next tick.
			p := everySecond("runs")
			p.Every = 2 * time.Second
			r := start(t, c, worker.Config{Periodic: []worker.Periodic{p}, Logger: slog.New(capture)}, nil)
			var rec map[string]string
			waitFor(t, "the run to be reported missed", func() bool {
				var ok bool
				rec, ok = capture.find("fila worker: periodic run missed: enqueueing it failed")
				return ok
			})
			calls := drv.calls.Load()
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			if rec["level"] != "ERROR" || !strings.Contains(rec["error"], "injected") {
				t.Errorf("missed run logged as %v; want an Error with the cause", rec)
			}
			if !tc.wantCalls(calls) {
				t.Errorf("%d enqueue calls before giving up", calls)
			}
			tick, err := time.Parse(time.RFC3339Nano, rec["tick"])
			if err != nil {
				t.Fatalf("tick %q: %v", rec["tick"], err)
			}
			mark := fmt.Sprintf("periodic/tick/%d", tick.UnixNano())
			if ok, err := md.MarkGet(context.Background(), "runs", mark); err != nil || ok {
				t.Errorf("mark %s = %v, %v; want it given back", mark, ok, err)
			}
		})
	}
}

// TestPeriodicClientClosed: a worker that only schedules stops, with
// ErrClosed, when its client is closed, as one that receives does.
func TestPeriodicClientClosed(t *testing.T) {
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, c, worker.Config{Periodic: []worker.Periodic{everySecond("runs")}}, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Run to return", r.returned)
	if err := r.wait(); !errors.Is(err, fila.ErrClosed) {
		t.Errorf("Run = %v; want ErrClosed", err)
	}
}
