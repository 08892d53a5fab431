package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestTopicSusFlags(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.wants("topic-sustained") {
		t.Fatal("--scenario all includes topic-sustained")
	}
	if st := cfg.topicSus; st.rate != 500 || st.dur != 30*time.Minute || st.stallAfter != 10*time.Minute ||
		st.interval != 30*time.Second || st.rotate != 0 || st.conc != cfg.latencyConc {
		t.Fatalf("topic-sustained defaults %+v", st)
	}
	cfg, err = parseFlags([]string{"--scenario", "topic-sustained", "--topic-sus-duration", "2m", "--topic-sus-interval", "10s"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.wants("topic-sustained") || cfg.topicSus.stallAfter != 40*time.Second || cfg.topicSus.interval != 10*time.Second {
		t.Fatalf("short run: %+v", cfg.topicSus)
	}
	cfg, err = parseFlags([]string{"--topic-sus-duration", "2m", "--topic-sus-stall-after", "30s", "--topic-sus-rotate", "20s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.topicSus.stallAfter != 30*time.Second || cfg.topicSus.rotate != 20*time.Second {
		t.Fatalf("explicit stall and rotation: %+v", cfg.topicSus)
	}
	if _, err := parseFlags([]string{"--topic-sus-rate", "0"}); err == nil {
		t.Fatal("--topic-sus-rate 0 accepted")
	}
}

func TestLagWarnHandler(t *testing.T) {
	c := newLagWarnCounter()
	l := slog.New(lagWarnHandler{next: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}), c: c})
	d := l.With(slog.String("driver", "postgres"))
	d.Warn(lagWarnPrefix+": rotation keeps ...", slog.String("topic", "t"), slog.String("subscription", "t-sub04"), slog.Int64("unread", 10))
	d.Warn(lagWarnPrefix+": rotation keeps ...", slog.String("topic", "t"), slog.String("subscription", "t-sub04"))
	d.WithGroup("g").Warn(lagWarnPrefix+": rotation keeps ...", slog.String("subscription", "t-sub01"))
	d.Warn("postgres log mode: rotation held back")
	d.Info(lagWarnPrefix + ": at info")
	s := c.snapshot()
	if s.Count != 3 || s.Named["t-sub04"] != 2 || s.Named["t-sub01"] != 1 || len(s.First) != 2 || s.Others["postgres log mode: rotation held back"] != 1 {
		t.Fatalf("counted %+v", s)
	}
}

func TestTopicSustainedMarkdown(t *testing.T) {
	start := time.Now()
	subs := []string{"t-sub00", "t-sub01", "t-sub02", "t-sub03", "t-sub04"}
	run := &topicSusRun{st: topicSusSettings{rate: 500, dur: time.Minute, stallAfter: 20 * time.Second, interval: 10 * time.Second, conc: 100},
		Start: start, Subs: subs, Stalled: 4, StalledAt: 20 * time.Second,
		Tables: "s: log_messages_0", Notes: []string{"server autovacuum=off"},
		Warn: lagWarnSnapshot{Count: 2, First: map[string]time.Time{"t-sub04": start.Add(50 * time.Second)}, Named: map[string]int64{"t-sub04": 2}}}
	for i := 1; i <= 6; i++ {
		lag := int64(i-2) * 5000
		if i <= 2 {
			lag = 3
		}
		run.Samples = append(run.Samples, topicSusSample{At: time.Duration(i) * 10 * time.Second, PubRate: 500, P95ms: 5,
			Lag: []int64{2, 7, 1, 0, lag}, Rate: []float64{500, 498, 502, 500, 0}, DeadTup: int64(i * 10), SizeBytes: int64(i) << 20,
			Sent: int64(i) * 5000, StalledDone: 10_000, Load1: 1.5, Gen: i / 3, GenAge: time.Duration(i%3) * 10 * time.Second})
	}
	md := topicSustainedMarkdown(run)
	for _, want := range []string{"Max dead tuples in the log tables: 60 (at 1m0s)", "lag at the end 2, 7, 1, 0 (limit: 2 s of publishing, 1000): kept up",
		"lag at the end 20000; by the last sample 30000 published, of which it acked 10000: 20000 not acked", "naming the stalled subscription 2, first at 50 s (30 s after its consumer stopped)",
		"| 20s (stalled) | 7 | 3 | 498–502 |", "| 1m0s | 7 | 20000 |", "server autovacuum=off",
		"current generation changed 2 times between samples; longest time since the last rotation at a sample 20s (at 20s); at the end 0s",
		"| 1.50 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	run.Samples[5].Lag[1] = 1000
	if md := topicSustainedMarkdown(run); !strings.Contains(md, "did not keep up") {
		t.Errorf("a live lag of 2 s kept up:\n%s", md)
	}
	if got := topicSusRows(60); len(got) != 12 || got[0] != 4 || got[11] != 59 {
		t.Errorf("rows of 60 samples: %v", got)
	}
	if got := topicSusRows(23); len(got) != 5 || got[4] != 22 {
		t.Errorf("rows of 23 samples: %v", got)
	}
}
