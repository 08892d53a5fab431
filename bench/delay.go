package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// delayer is a system that can store a message to start after a delay:
// Fila's Message.Delay, asynq's ProcessIn, River's ScheduledAt. The raw
// baselines have no such thing and show n/a.
type delayer interface {
	EnqueueDelayed(ctx context.Context, body []byte, delay time.Duration) error
}

// earlyTolerance allows for run-at times kept in whole milliseconds (Fila
// on Redis and MongoDB): such a message may start up to 1 ms before the
// nanosecond run-at the benchmark computed.
const earlyTolerance = time.Millisecond

// delayScenario offers rate messages per second for d, each with the given
// delay, to consumers at concurrency c that are already running, and reports
// how late each handler started after the message's run-at: the send time
// (taken just before the enqueue call) plus the delay. The first message is
// included: it pays for whatever a broker sets up on a queue's first
// delayed enqueue. A handler that starts more than earlyTolerance before the
// run-at is noted: that is a bug, unless the system stores run-at times
// coarsely (asynq keeps whole seconds).
func delayScenario(ctx context.Context, broker string, s System, delay time.Duration, rate float64, d time.Duration, c int) ([]result, error) {
	label := func(q string) string { return fmt.Sprintf("delay %v lateness %s", delay, q) }
	rows := []string{label("p50"), label("p99"), label("max")}
	dl, ok := s.(delayer)
	if !ok {
		var out []result
		for _, r := range rows {
			out = append(out, result{Broker: broker, Scenario: r, System: s.Name(), Unit: "ms", Skipped: true})
		}
		return out, nil
	}
	if err := s.Setup(ctx); err != nil {
		return nil, err
	}
	rec := newLatencyRecorder(time.Time{})
	var early atomic.Int64
	cons, err := s.Start(ctx, c, func(body []byte) {
		if t, ok := bodyTime(body); ok && time.Now().Before(t.Add(-earlyTolerance)) {
			early.Add(1)
		}
		rec.onStart(body)
	})
	if err != nil {
		_ = s.Teardown(ctx)
		return nil, err
	}
	progress.set(fmt.Sprintf("%s %s: delay %v at %.0f msg/s", broker, s.Name(), delay, rate))
	total := int64(rate * d.Seconds())
	// The run-at is taken just before each enqueue call, not from the
	// schedule: a late send is the producer's delay, not the broker's.
	prod := startPaced(ctx, s.Name(), rate, time.Now().Add(200*time.Millisecond), d, 8,
		func(ctx context.Context, _ time.Time) error {
			return dl.EnqueueDelayed(ctx, makeBody(time.Now().Add(delay)), delay)
		})
	sendsDone := make(chan struct{})
	go func() { prod.wg.Wait(); close(sendsDone) }()
	for ctx.Err() == nil {
		progress.setCount(rec.seen.Load(), total)
		select {
		case <-sendsDone:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	// Every message is due by now plus the delay; give it 5 s more, then
	// count the rest as started now (a lower bound of their lateness).
	graceEnd := time.Now().Add(delay + 5*time.Second)
	for rec.seen.Load() < prod.sent.Load() && time.Now().Before(graceEnd) && ctx.Err() == nil {
		progress.setCount(rec.seen.Load(), total)
		time.Sleep(10 * time.Millisecond)
	}
	missing := prod.sent.Load() - rec.seen.Load()
	if missing > 0 {
		now := time.Now()
		for range missing {
			rec.recordAt(graceEnd.Add(-5*time.Second), now)
		}
	}
	if err := cons.Stop(); err != nil {
		logf("%s stop: %v", s.Name(), err)
	}
	note := ""
	if missing > 0 {
		note = fmt.Sprintf("%d not started within 5s after their run-at", missing)
	}
	if n := early.Load(); n > 0 {
		note = joinNote(note, fmt.Sprintf("%d started more than %v before their run-at", n, earlyTolerance))
	}
	if f := prod.failed.Load(); f > 0 {
		note = joinNote(note, fmt.Sprintf("%d enqueues failed", f))
	}
	var out []result
	rec.mu.Lock()
	for i, q := range []float64{50, 99, 100} {
		out = append(out, result{Broker: broker, Scenario: rows[i], System: s.Name(),
			Value: float64(rec.h.ValueAtQuantile(q)) / 1000, Unit: "ms", Note: note})
		note = ""
	}
	rec.mu.Unlock()
	if err := s.Teardown(ctx); err != nil {
		logf("%s teardown: %v", s.Name(), err)
	}
	return out, nil
}
