package worker

import (
	"testing"
	"time"

	"github.com/fila-go/fila"
)

func mustSchedule(t *testing.T, p Periodic) *schedule {
	t.Helper()
	p.Name, p.Queue, p.Message = "s", "q", fila.Message{Kind: "k"}
	s, err := parseSchedule(p)
	if err != nil {
		t.Fatalf("parseSchedule(%+v): %v", p, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// checkTicks checks that s's ticks from just before want[0] are exactly want
// (the sequence next walks), and that next and prev agree with it at
// instants strewn between them: every process, whenever it starts, must
// compute the same ticks.
func checkTicks(t *testing.T, s *schedule, want []time.Time) {
	t.Helper()
	tick := want[0].Add(-time.Nanosecond)
	for i, w := range want {
		tick = s.next(tick)
		if !tick.Equal(w) {
			t.Fatalf("tick %d = %v; want %v", i, tick, w)
		}
		if tick.Location() != time.UTC {
			t.Errorf("tick %d is in %v; want UTC", i, tick.Location())
		}
	}
	for i := 1; i < len(want); i++ {
		lo, hi := want[i-1], want[i]
		step := max(hi.Sub(lo)/37, time.Nanosecond)
		for x := lo; x.Before(hi); x = x.Add(step) {
			if n := s.next(x); !n.Equal(hi) {
				t.Fatalf("next(%v) = %v; want %v", x, n, hi)
			}
			if p, ok := s.prev(x); !ok || !p.Equal(lo) {
				t.Fatalf("prev(%v) = %v, %v; want %v", x, p, ok, lo)
			}
		}
	}
}

func TestEveryTicks(t *testing.T) {
	t.Run("1s", func(t *testing.T) {
		checkTicks(t, mustSchedule(t, Periodic{Every: time.Second}), []time.Time{
			utc("2026-12-01T09:59:59Z"), utc("2026-12-01T10:00:00Z"), utc("2026-12-01T10:00:01Z"),
		})
	})
	t.Run("90s since the epoch", func(t *testing.T) {
		// 90s does not divide an hour: ticks are multiples of 90s since
		// 1970, not since the hour.
		s := mustSchedule(t, Periodic{Every: 90 * time.Second})
		base := time.Unix(1_800_000_000/90*90, 0).UTC()
		checkTicks(t, s, []time.Time{base, base.Add(90 * time.Second), base.Add(180 * time.Second)})
	})
	t.Run("daily at UTC midnight whatever the zone", func(t *testing.T) {
		checkTicks(t, mustSchedule(t, Periodic{Every: 24 * time.Hour}), []time.Time{
			utc("2026-03-07T00:00:00Z"), utc("2026-03-08T00:00:00Z"), utc("2026-03-09T00:00:00Z"),
		})
	})
	t.Run("a tick is its own prev and not its own next", func(t *testing.T) {
		s := mustSchedule(t, Periodic{Every: time.Minute})
		at := utc("2026-12-01T10:00:00Z")
		if p, _ := s.prev(at); !p.Equal(at) {
			t.Errorf("prev(%v) = %v", at, p)
		}
		if n := s.next(at); !n.Equal(at.Add(time.Minute)) {
			t.Errorf("next(%v) = %v", at, n)
		}
	})
	t.Run("before the epoch", func(t *testing.T) {
		s := mustSchedule(t, Periodic{Every: time.Hour})
		checkTicks(t, s, []time.Time{utc("1969-12-31T22:00:00Z"), utc("1969-12-31T23:00:00Z"), utc("1970-01-01T00:00:00Z")})
	})
}

func TestCronTicks(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	for _, tc := range []struct {
		name string
		p    Periodic
		want []string
	}{
		{"every 15 minutes, UTC by default", Periodic{Cron: "*/15 * * * *"},
			[]string{"2026-12-01T10:00:00Z", "2026-12-01T10:15:00Z", "2026-12-01T10:30:00Z"}},
		{"@hourly", Periodic{Cron: "@hourly"},
			[]string{"2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z", "2026-12-01T12:00:00Z"}},
		{"weekdays at 9 in New York", Periodic{Cron: "0 9 * * 1-5", Location: ny},
			// Friday 4 Dec 2026, then Monday: EST is UTC-5.
			[]string{"2026-12-04T14:00:00Z", "2026-12-07T14:00:00Z", "2026-12-08T14:00:00Z"}},
		{"@daily across spring forward", Periodic{Cron: "@daily", Location: ny},
			// Midnight EST is 05:00Z, midnight EDT 04:00Z: the day of the
			// change is 23 hours long.
			[]string{"2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "2026-03-10T04:00:00Z"}},
		{"a skipped wall time does not run that day", Periodic{Cron: "30 2 * * *", Location: ny},
			// 02:30 does not exist on 8 March 2026 in New York.
			[]string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"a repeated wall time runs at both instants", Periodic{Cron: "30 1 * * *", Location: ny},
			// 01:30 EDT (05:30Z) and 01:30 EST (06:30Z) on 1 November 2026.
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{"hourly across fall back", Periodic{Cron: "0 * * * *", Location: ny},
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		{"@monthly", Periodic{Cron: "@monthly", Location: ny},
			[]string{"2026-10-01T04:00:00Z", "2026-11-01T04:00:00Z", "2026-12-01T05:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]time.Time, len(tc.want))
			for i, w := range tc.want {
				want[i] = utc(w)
			}
			checkTicks(t, mustSchedule(t, tc.p), want)
		})
	}
}

func TestCronPrevFarBack(t *testing.T) {
	// Leap days only: prev must look back years.
	s := mustSchedule(t, Periodic{Cron: "0 12 29 2 *"})
	p, ok := s.prev(utc("2027-06-01T00:00:00Z"))
	if want := utc("2024-02-29T12:00:00Z"); !ok || !p.Equal(want) {
		t.Errorf("prev = %v, %v; want %v", p, ok, want)
	}
}

func TestMarkAndDedupNames(t *testing.T) {
	tick := utc("2026-12-01T10:00:00.5Z")
	if got, want := markName("nightly", tick), "periodic/nightly/1796119200500000000"; got != want {
		t.Errorf("markName = %q; want %q", got, want)
	}
	if got, want := dedupKey("nightly", tick), "fila.periodic/nightly/1796119200500000000"; got != want {
		t.Errorf("dedupKey = %q; want %q", got, want)
	}
}
