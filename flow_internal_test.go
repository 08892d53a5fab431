package fila

import (
	"testing"
	"time"
)

// TestLimitsMarks: limits read back from their mark as they were set, the
// newest mark wins, and a mark this version cannot read is passed over
// (and listed for deletion with the older ones).
func TestLimitsMarks(t *testing.T) {
	l, err := QueueLimits{Concurrency: 7, Rate: 3, Per: time.Minute, Burst: 2}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	old := markLimitsPrefix + "00000000000000000001?" + QueueLimits{Concurrency: 1}.encode()
	newest := markLimitsPrefix + "00000000000000000002?" + l.encode()
	bad := markLimitsPrefix + "00000000000000000003?c=x"
	got, older := limitsFromMarks([]string{newest, bad, old})
	if got != l {
		t.Errorf("limits = %+v; want %+v", got, l)
	}
	if len(older) != 2 {
		t.Errorf("older marks %q; want the unreadable and the old one", older)
	}
	if got, _ := limitsFromMarks(nil); !got.IsZero() {
		t.Errorf("no marks read as %+v; want none", got)
	}
	rate := QueueLimits{Rate: 1, Per: time.Second, Burst: 10}
	now := time.Now().Unix() // chunks of one delivery, a second each
	if chunkFresh(now-60, rate) || !chunkFresh(now-5, rate) || !chunkFresh(now, rate) || chunkFresh(now+2, rate) {
		t.Errorf("with a burst of 10 chunks of 1s, want the chunks of 60s ago and 2s ahead stale, of 5s ago and now fresh")
	}
	// A high rate groups deliveries: at most about 100 chunks a second,
	// never more deliveries in one than the burst.
	for _, tc := range []struct {
		lim   QueueLimits
		g     int
		dur   time.Duration
		burst int64
	}{
		{QueueLimits{Rate: 50, Per: time.Second, Burst: 10}, 1, 20 * time.Millisecond, 10},
		{QueueLimits{Rate: 100_000, Per: time.Second, Burst: 10_000}, 1000, 10 * time.Millisecond, 10},
		{QueueLimits{Rate: 100_000, Per: time.Second, Burst: 1}, 1, 10 * time.Microsecond, 1},
		{QueueLimits{Rate: 3, Per: time.Minute, Burst: 1}, 1, 20 * time.Second, 1},
	} {
		g, dur, burst, _ := chunking(tc.lim)
		if g != tc.g || time.Duration(dur) != tc.dur || burst != tc.burst {
			t.Errorf("chunking(%v) = %d a chunk, every %v, burst %d; want %d, %v, %d", tc.lim, g, time.Duration(dur), burst, tc.g, tc.dur, tc.burst)
		}
	}
	if s := rate.String(); s != "rate 1/1s burst 10" {
		t.Errorf("String = %q", s)
	}
}
