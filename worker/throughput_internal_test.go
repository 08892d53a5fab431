package worker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

// TestThroughputName: a record's name reads back as what was counted, the
// histogram's quantiles are bucket bounds within 19% above the waits, and a
// histogram too wide for a mark is made coarser, then left out, never cut.
func TestThroughputName(t *testing.T) {
	start := time.Unix(1_764_000_000, 0)
	c := &tpCounts{acked: 7, retried: 2, dead: 1, waits: 4, hist: map[int]int64{}}
	for _, d := range []time.Duration{500 * time.Microsecond, 10 * time.Millisecond, 10 * time.Millisecond, 3 * time.Second} {
		c.hist[waitBucketOf(d, waitRes)]++
	}
	name := throughputName(start, "0123456789abcdef", c)
	got, ok := parseThroughput(name)
	if !ok || !got.Start.Equal(start) || got.Acked != 7 || got.Retried != 2 || got.Dead != 1 || got.Waits != 4 || got.Records != 1 {
		t.Fatalf("parseThroughput(%q) = %+v, %v", name, got, ok)
	}
	for _, tc := range []struct {
		q    float64
		wait time.Duration
	}{{0.25, time.Millisecond}, {0.5, 10 * time.Millisecond}, {0.75, 10 * time.Millisecond}, {1, 3 * time.Second}} {
		if w := got.WaitQuantile(tc.q); w < tc.wait || w > tc.wait*119/100 {
			t.Errorf("WaitQuantile(%v) = %v; want %v to 19%% more", tc.q, w, tc.wait)
		}
	}
	if w := (Throughput{}).WaitQuantile(0.95); w != 0 {
		t.Errorf("WaitQuantile of no waits = %v; want 0", w)
	}

	// Every bucket filled, with large counts: the name must still fit.
	wide := &tpCounts{acked: 1 << 60, waits: 1 << 60, hist: map[int]int64{}}
	for b := 0; b <= waitRes*waitMaxLog2; b++ {
		wide.hist[b] = 1<<40 + int64(b)
	}
	name = throughputName(start, "0123456789abcdef", wide)
	if len(name) > backend.MaxMarkName {
		t.Fatalf("a wide histogram's name is %d bytes; a mark holds %d", len(name), backend.MaxMarkName)
	}
	got, ok = parseThroughput(name)
	if !ok || got.Acked != 1<<60 || got.Waits != 1<<60 {
		t.Errorf("the wide record reads back as %+v, %v", got, ok)
	}
	if len(got.waits) > 0 {
		var n int64
		for _, b := range got.waits {
			n += b.n
		}
		var want int64
		for _, v := range wide.hist {
			want += v
		}
		if n != want {
			t.Errorf("a coarser histogram counts %d waits; want %d", n, want)
		}
	}

	for _, bad := range []string{
		"throughput/", "throughput/17640000x0/id?a=1&r=0&d=0&n=0", "throughput/1764000000/id", "throughput/1764000000/id?a=-1&r=0&d=0&n=0",
		"throughput/1764000000/id?a=1&d=0&n=0", "worker/1764000000/id?a=1&r=0&d=0&n=0",
	} {
		if got, ok := parseThroughput(bad); ok {
			t.Errorf("parseThroughput(%q) = %+v; want it refused", bad, got)
		}
	}
	// A broken histogram leaves the counts.
	got, ok = parseThroughput("throughput/1764000000/id?a=3&r=0&d=0&n=1&s=4&w=" + strings.Repeat("x", 5))
	if !ok || got.Acked != 3 || len(got.waits) != 0 {
		t.Errorf("a record with a broken histogram = %+v, %v; want its counts without waits", got, ok)
	}
}

// TestThroughputFlush: a minute's record is written once the minute is
// over, not before, records of several runs of one minute are summed, and
// the final flush writes the open minute.
func TestThroughputFlush(t *testing.T) {
	ctx := context.Background()
	marks := memory.NewBroker(memory.BrokerOptions{}).Open()
	defer marks.Close()
	t0 := time.Now().Truncate(time.Minute).Add(-10 * time.Minute).Add(10 * time.Second)
	r1 := newThroughputRecorder(marks, "run1", slog.Default())
	r2 := newThroughputRecorder(marks, "run2", slog.Default())
	ack := JobEvent{Queue: "q", Attempt: 1, Outcome: OutcomeAck, EnqueuedAt: t0, Started: t0.Add(20 * time.Millisecond)}
	r1.add(ack, t0)
	r1.add(JobEvent{Queue: "q", Attempt: 2, Outcome: OutcomeRetry}, t0)
	r1.add(JobEvent{Queue: "q", Outcome: OutcomeLeaseLost}, t0) // not counted
	r2.add(ack, t0.Add(time.Second))
	r1.add(JobEvent{Queue: "q", Attempt: 1, Outcome: OutcomeDead}, t0.Add(time.Minute))

	list := func() []Throughput {
		t.Helper()
		names, err := marks.MarkList(ctx, "q", markThroughputPrefix)
		if err != nil {
			t.Fatal(err)
		}
		var out []Throughput
		for _, n := range names {
			tp, ok := parseThroughput(n)
			if !ok {
				t.Fatalf("unreadable record %q", n)
			}
			if k := len(out) - 1; k >= 0 && out[k].Start.Equal(tp.Start) {
				out[k].Add(tp)
			} else {
				out = append(out, tp)
			}
		}
		return out
	}
	r1.flush(ctx, t0.Add(30*time.Second), false)
	if got := list(); len(got) != 0 {
		t.Fatalf("records written within their minute: %+v", got)
	}
	r1.flush(ctx, t0.Add(65*time.Second), false)
	r2.flush(ctx, t0.Add(65*time.Second), false)
	got := list()
	m0 := t0.Truncate(time.Minute)
	if len(got) != 1 || !got[0].Start.Equal(m0) || got[0].Acked != 2 || got[0].Retried != 1 || got[0].Waits != 2 || got[0].Records != 2 {
		t.Fatalf("after the first minute: %+v; want one minute at %v with 2 acked by 2 runs, 1 retried", got, m0)
	}
	if w := got[0].WaitQuantile(0.5); w < 20*time.Millisecond || w > 24*time.Millisecond {
		t.Errorf("median wait %v; want 20ms to 24ms", w)
	}
	r1.flush(ctx, t0.Add(70*time.Second), true)
	got = list()
	if len(got) != 2 || got[1].Dead != 1 || !got[1].Start.Equal(m0.Add(time.Minute)) {
		t.Fatalf("after the final flush: %+v; want the second minute with 1 dead", got)
	}
	if ps := throughputPrefixes(t0, t0.Add(time.Hour)); len(ps) < 4 || len(ps) > 5 || len(ps[0]) != len(markThroughputPrefix)+7 {
		t.Errorf("prefixes for an hour: %q; want 4 or 5 blocks of 1000s", ps)
	}
	if ps := throughputPrefixes(t0, t0.Add(24*time.Hour)); len(ps) != 1 || ps[0] != markThroughputPrefix {
		t.Errorf("prefixes for a day: %q; want the whole prefix", ps)
	}
}
