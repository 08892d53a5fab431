package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// result is one figure of one system in one scenario.
type result struct {
	Broker   string
	Scenario string // row label, e.g. "burn-down c=10"
	System   string
	Value    float64
	Unit     string // "msg/s" or "ms"
	Higher   bool   // higher is better
	Note     string // e.g. "capped at 20s: 1234 of 5000"
	Skipped  bool   // the system has no such operation
	// LoadBefore and LoadAfter are the 1-minute load average when the
	// run that measured this began and ended (see stamped); 0 when not
	// recorded, -1 when unknown.
	LoadBefore, LoadAfter float64
}

// enqueueCase is one shape of the enqueue scenario.
type enqueueCase struct {
	label      string
	goroutines int
	batch      int
}

var enqueueCases = []enqueueCase{
	{"enqueue single, 1 goroutine", 1, 1},
	{"enqueue single, 8 goroutines", 8, 1},
	{"enqueue batch of 100", 1, 100},
}

// enqueueScenario measures single-message enqueue from 1 and from 8
// goroutines, and batches of 100 from 1 goroutine, each for d.
func enqueueScenario(ctx context.Context, broker string, s System, d time.Duration) ([]result, error) {
	var out []result
	for _, c := range enqueueCases {
		r, err := enqueueCaseRun(ctx, broker, s, c, d)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// enqueueCaseRun measures one enqueue case on a fresh queue for d.
func enqueueCaseRun(ctx context.Context, broker string, s System, c enqueueCase, d time.Duration) (result, error) {
	r := result{Broker: broker, Scenario: c.label, System: s.Name(), Unit: "msg/s", Higher: true}
	if err := s.Setup(ctx); err != nil {
		return r, err
	}
	progress.set(fmt.Sprintf("%s %s: %s", broker, s.Name(), c.label))
	n, el, err := timedEnqueue(ctx, s, c.goroutines, c.batch, d)
	terr := s.Teardown(ctx)
	if terr != nil {
		logf("%s teardown: %v", s.Name(), terr)
	}
	switch {
	case errors.Is(err, errNoBatch):
		r.Skipped, r.Note = true, "no batch API"
	case err != nil:
		return r, fmt.Errorf("%s: %w", c.label, err)
	default:
		r.Value = float64(n) / el.Seconds()
	}
	return r, nil
}

// timedEnqueue enqueues from g goroutines in batches of batch for d and
// returns the messages stored and the time taken.
func timedEnqueue(ctx context.Context, s System, g, batch int, d time.Duration) (int64, time.Duration, error) {
	var n atomic.Int64
	var firstErr error
	var once sync.Once
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies := make([][]byte, batch)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for i := range bodies {
					bodies[i] = makeBody(time.Now())
				}
				if err := s.Enqueue(ctx, bodies); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				progress.add(int64(batch))
				n.Add(int64(batch))
			}
		}()
	}
	wg.Wait()
	return n.Load(), time.Since(start), firstErr
}

// preload fills the queue with n messages in batches (single calls where the
// system has no batch API), from a few goroutines; not measured.
func preload(ctx context.Context, s System, n, batch int) error {
	if err := s.Enqueue(ctx, [][]byte{makeBody(time.Now()), makeBody(time.Now())}); errors.Is(err, errNoBatch) {
		batch = 1
	} else if err != nil {
		return err
	} else {
		n -= 2
	}
	const g = 8
	var left atomic.Int64
	left.Store(int64(n))
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := left.Add(-int64(batch))
				take := int64(batch)
				if k < 0 {
					take += k
				}
				if take <= 0 {
					return
				}
				bodies := make([][]byte, take)
				for i := range bodies {
					bodies[i] = makeBody(time.Now())
				}
				if err := s.Enqueue(ctx, bodies); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				progress.add(take)
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// burnDownScenario preloads n messages and drains them at each concurrency,
// for at most limit per concurrency; the rate counts stored acks only.
func burnDownScenario(ctx context.Context, broker string, s System, n int, concs []int, limit time.Duration, preloadBatch int) ([]result, error) {
	var out []result
	for _, c := range concs {
		if err := s.Setup(ctx); err != nil {
			return out, err
		}
		progress.set(fmt.Sprintf("%s %s: preload %d", broker, s.Name(), n))
		if err := preload(ctx, s, n, preloadBatch); err != nil {
			_ = s.Teardown(ctx)
			return out, fmt.Errorf("preload: %w", err)
		}
		progress.set(fmt.Sprintf("%s %s: burn-down c=%d", broker, s.Name(), c))
		start := time.Now()
		cons, err := s.Start(ctx, c, func([]byte) {})
		if err != nil {
			_ = s.Teardown(ctx)
			return out, err
		}
		done := int64(0)
		for {
			done = cons.Done()
			progress.setCount(done, int64(n))
			if done >= int64(n) || time.Since(start) >= limit || ctx.Err() != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		el := time.Since(start)
		if err := cons.Stop(); err != nil {
			logf("%s stop: %v", s.Name(), err)
		}
		r := result{Broker: broker, Scenario: fmt.Sprintf("burn-down c=%d", c), System: s.Name(),
			Value: float64(done) / el.Seconds(), Unit: "msg/s", Higher: true}
		if done < int64(n) {
			r.Note = fmt.Sprintf("stopped at %v limit: %d of %d done", limit, done, n)
		}
		out = append(out, r)
		if err := s.Teardown(ctx); err != nil {
			logf("%s teardown: %v", s.Name(), err)
		}
	}
	return out, nil
}

// latencyRecorder records enqueue-to-handler-start latencies, measured from
// each message's intended send time.
type latencyRecorder struct {
	mu     sync.Mutex
	h      *hdr.Histogram
	window *hdr.Histogram // reset by the sustained sampler
	after  time.Time      // warm-up: messages intended before this are not recorded
	seen   atomic.Int64
}

// latencyCapUs is the longest latency the recorders hold (an hour, in µs):
// longer ones are recorded as this, never dropped, so a sustained run that
// falls far behind still reports its p95 (as a lower bound).
const latencyCapUs = 3_600_000_000

func newLatencyRecorder(after time.Time) *latencyRecorder {
	return &latencyRecorder{h: hdr.New(1, latencyCapUs, 3), window: hdr.New(1, latencyCapUs, 3), after: after}
}

func (l *latencyRecorder) onStart(body []byte) {
	now := time.Now()
	t, ok := bodyTime(body)
	if !ok {
		return
	}
	l.seen.Add(1)
	if t.Before(l.after) {
		return
	}
	us := min(max(now.Sub(t).Microseconds(), 1), latencyCapUs)
	l.mu.Lock()
	_ = l.h.RecordValue(us)
	_ = l.window.RecordValue(us)
	l.mu.Unlock()
}

// recordAt records a message that was never handled as if it started at now
// (a lower bound of its latency), so slow systems are not flattered.
func (l *latencyRecorder) recordAt(intended, now time.Time) {
	if intended.Before(l.after) {
		return
	}
	l.mu.Lock()
	_ = l.h.RecordValue(min(max(now.Sub(intended).Microseconds(), 1), latencyCapUs))
	l.mu.Unlock()
}

// pacedProducer sends one message per interval, by the intended schedule
// start + i/rate, from several goroutines so a slow enqueue does not delay
// the schedule (latency is measured from the intended time, never from the
// actual send: no coordinated omission).
type pacedProducer struct {
	sent     atomic.Int64
	failed   atomic.Int64
	lastSend atomic.Int64 // Unix ns when the latest send returned
	wg       sync.WaitGroup
}

func startProducer(ctx context.Context, s System, rate float64, start time.Time, d time.Duration, goroutines int) *pacedProducer {
	return startPaced(ctx, s.Name(), rate, start, d, goroutines, func(ctx context.Context, intended time.Time) error {
		return s.Enqueue(ctx, [][]byte{makeBody(intended)})
	})
}

// startPaced runs send on startProducer's schedule: once per 1/rate from
// start for d, from several goroutines, counting sends and failures.
func startPaced(ctx context.Context, name string, rate float64, start time.Time, d time.Duration, goroutines int,
	send func(ctx context.Context, intended time.Time) error) *pacedProducer {
	p := &pacedProducer{}
	total := int64(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	var next atomic.Int64
	for range goroutines {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				intended := start.Add(time.Duration(i) * interval)
				if w := time.Until(intended); w > 0 {
					sleepCtx(ctx, w)
				}
				if err := send(ctx, intended); err != nil {
					if ctx.Err() == nil {
						p.failed.Add(1)
						logf("%s enqueue: %v", name, err)
					}
					continue
				}
				p.sent.Add(1)
				p.lastSend.Store(time.Now().UnixNano())
			}
		}()
	}
	return p
}

// latencyScenario offers each rate for d with consumers at concurrency c and
// reports p50, p95 and p99 of enqueue-to-handler-start.
func latencyScenario(ctx context.Context, broker string, s System, rates []float64, d time.Duration, c int) ([]result, error) {
	var out []result
	for _, rate := range rates {
		if err := s.Setup(ctx); err != nil {
			return out, err
		}
		start := time.Now().Add(200 * time.Millisecond)
		warm := min(time.Second, d/5)
		rec := newLatencyRecorder(start.Add(warm))
		cons, err := s.Start(ctx, c, rec.onStart)
		if err != nil {
			_ = s.Teardown(ctx)
			return out, err
		}
		progress.set(fmt.Sprintf("%s %s: latency at %.0f msg/s", broker, s.Name(), rate))
		prod := startProducer(ctx, s, rate, start, d, 32)
		total := int64(rate * d.Seconds())
		for ctx.Err() == nil {
			progress.setCount(rec.seen.Load(), total)
			if time.Now().After(start.Add(d)) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		prod.wg.Wait()
		// Grace for stragglers, then count the rest as started now.
		graceEnd := time.Now().Add(5 * time.Second)
		for rec.seen.Load() < prod.sent.Load() && time.Now().Before(graceEnd) {
			time.Sleep(10 * time.Millisecond)
		}
		missing := prod.sent.Load() - rec.seen.Load()
		if missing > 0 {
			// Unknown which ones: charge them to the end of the schedule.
			now := time.Now()
			for range missing {
				rec.recordAt(start.Add(d), now)
			}
		}
		if err := cons.Stop(); err != nil {
			logf("%s stop: %v", s.Name(), err)
		}
		note := ""
		// The schedule was kept if the sends finished by its end (plus a
		// little); otherwise report the rate the enqueues actually reached.
		sendSpan := max(d, time.Unix(0, prod.lastSend.Load()).Sub(start))
		achieved := float64(prod.sent.Load()) / sendSpan.Seconds()
		if achieved < 0.95*rate {
			note = fmt.Sprintf("enqueue kept up with only %.0f msg/s", achieved)
		}
		if missing > 0 {
			note = joinNote(note, fmt.Sprintf("%d not started within 5s after the run", missing))
		}
		if f := prod.failed.Load(); f > 0 {
			note = joinNote(note, fmt.Sprintf("%d enqueues failed", f))
		}
		rec.mu.Lock()
		for _, q := range []float64{50, 95, 99} {
			out = append(out, result{Broker: broker, Scenario: fmt.Sprintf("latency %.0f/s p%.0f", rate, q), System: s.Name(),
				Value: float64(rec.h.ValueAtQuantile(q)) / 1000, Unit: "ms", Note: note})
			note = ""
		}
		rec.mu.Unlock()
		if err := s.Teardown(ctx); err != nil {
			logf("%s teardown: %v", s.Name(), err)
		}
	}
	return out, nil
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
