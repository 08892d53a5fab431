package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// testThroughput: a worker records what its jobs did per minute in the
// broker, and ThroughputList reads it back after the worker stopped, as a
// dashboard started later would.
func testThroughput(t *testing.T, c *fila.Client) {
	q := newQueue(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := worker.ThroughputList(ctx, c, q, time.Now()); errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the driver cannot list marks: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for range 5 {
		enqueue(t, c, q, fila.Message{Kind: "ok"})
	}
	for range 2 {
		enqueue(t, c, q, fila.Message{Kind: "fail"})
	}
	enqueue(t, c, q, fila.Message{Kind: "bad"})
	var ended atomic.Int64
	cfg := worker.Config{
		Queues:      map[string]worker.QueueConfig{q: {Concurrency: 4}},
		MaxAttempts: 2,
		Backoff:     func(int) time.Duration { return 0 },
		OnJobEnd:    func(worker.JobEvent) { ended.Add(1) },
	}
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("ok", func(context.Context, *fila.Delivery) error { return nil })
		w.HandleFunc("fail", func(context.Context, *fila.Delivery) error { return errors.New("boom") })
		w.HandleFunc("bad", func(context.Context, *fila.Delivery) error { return worker.Permanent(errors.New("bad input")) })
	})
	// 5 acks, 2 retries, then 2 dead on the second attempt, 1 dead at once.
	waitFor(t, "the jobs to end", func() bool { return ended.Load() == 10 })
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(before)
	ts, err := worker.ThroughputList(ctx, c, q, before)
	if err != nil {
		t.Fatal(err)
	}
	var sum worker.Throughput
	var p100 time.Duration
	for _, m := range ts {
		if m.Start.Before(before.Truncate(time.Minute)) || m.Start.After(time.Now()) || m.Start.Second() != 0 {
			t.Errorf("a record's minute starts at %v, outside the run (%v on)", m.Start, before)
		}
		if m.Records != 1 {
			t.Errorf("minute %v: %d records, want 1 (one worker run)", m.Start, m.Records)
		}
		sum.Acked += m.Acked
		sum.Retried += m.Retried
		sum.Dead += m.Dead
		sum.Waits += m.Waits
		p100 = max(p100, m.WaitQuantile(1))
	}
	if len(ts) == 0 || sum.Acked != 5 || sum.Retried != 2 || sum.Dead != 3 || sum.Waits != 8 {
		t.Errorf("throughput %+v over %d minutes; want 5 acked, 2 retried, 3 dead, 8 first-attempt waits", sum, len(ts))
	}
	// The waits are bucket bounds: at least a millisecond, at most 19% over
	// the longest possible wait.
	if p100 < time.Millisecond || p100 > took*6/5+time.Millisecond {
		t.Errorf("longest wait %v; want between 1ms and %v", p100, took*6/5+time.Millisecond)
	}
	// Records of other minutes are not read.
	if ts, err := worker.ThroughputList(ctx, c, q, time.Now().Add(2*time.Minute)); err != nil || len(ts) != 0 {
		t.Errorf("ThroughputList from two minutes ahead = %v, %v; want nothing", ts, err)
	}
}

// TestThroughputRecord: a record written by a consumer of its own reads
// back whole, summed with another source's of the same minute; a bad
// source is refused with ErrInvalid and writes nothing.
func TestThroughputRecord(t *testing.T) {
	c := memClient(t)
	q := newQueue(t, c)
	ctx := context.Background()
	minute := time.Now().Add(-5 * time.Minute).Truncate(time.Minute)
	a := worker.Throughput{Start: minute.Add(17 * time.Second), Acked: 40, Retried: 3, Dead: 1}
	for i := range 20 {
		a.AddWait(time.Duration(i+1) * 10 * time.Millisecond)
	}
	if err := worker.ThroughputRecord(ctx, c, q, "billing-1", a); err != nil {
		t.Fatal(err)
	}
	if err := worker.ThroughputRecord(ctx, c, q, "billing-2", worker.Throughput{Start: minute, Acked: 2}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a/b", "é", strings.Repeat("x", 65)} {
		if err := worker.ThroughputRecord(ctx, c, q, bad, a); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("ThroughputRecord with source %q: %v; want ErrInvalid", bad, err)
		}
	}
	if err := worker.ThroughputRecord(ctx, c, q, "x", worker.Throughput{Acked: -1}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("ThroughputRecord with a negative count: %v; want ErrInvalid", err)
	}
	ts, err := worker.ThroughputList(ctx, c, q, minute.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || !ts[0].Start.Equal(minute) || ts[0].Acked != 42 || ts[0].Retried != 3 || ts[0].Dead != 1 || ts[0].Waits != 20 || ts[0].Records != 2 {
		t.Fatalf("ThroughputList = %+v; want one minute at %v: 42 acked, 3 retried, 1 dead, 20 waits, 2 records", ts, minute)
	}
	// The 19th of 20 waits is 190ms: the p95 is its bucket's bound.
	if p := ts[0].WaitQuantile(0.95); p < 190*time.Millisecond || p > 190*time.Millisecond*119/100 {
		t.Errorf("p95 wait %v; want 190ms to 19%% more", p)
	}

	// A list from within a minute reads that minute's records, also when
	// the names of the minute's start and of since begin differently: the
	// list reads names by prefixes of their first digits (blocks of 1000 s),
	// and since lies in the block after the minute's start.
	across := time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	for across.Unix()/1000 == across.Add(59*time.Second).Unix()/1000 {
		across = across.Add(-time.Minute)
	}
	if err := worker.ThroughputRecord(ctx, c, q, "billing-1", worker.Throughput{Start: across, Acked: 7}); err != nil {
		t.Fatal(err)
	}
	since := across.Add(time.Duration(1000-across.Unix()%1000+1) * time.Second)
	ts, err = worker.ThroughputList(ctx, c, q, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) == 0 || !ts[0].Start.Equal(across) || ts[0].Acked != 7 {
		t.Errorf("ThroughputList from %v = %+v; want the minute %v first, with 7 acked", since, ts, across)
	}
}
