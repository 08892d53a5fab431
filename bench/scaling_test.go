package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestScalingOnMemory runs the scaling scenario at a tiny size on the
// in-memory driver: both backlogs are measured, the top-up holds them, the
// probe times its calls, and the report pairs them in one row.
func TestScalingOnMemory(t *testing.T) {
	ctx := context.Background()
	s, err := newFilaSystem(ctx, "mem://bench-scaling-"+randSuffix(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	st := scalingSettings{small: 50, large: 500, largeRabbit: 100, conc: 8, warm: 100 * time.Millisecond, window: time.Second, rate: 50, runs: 1}
	settled := 0
	cases, err := scalingScenario(ctx, "memory", []System{s}, st, func(context.Context, System) error { settled++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0].Backlog != 50 || cases[1].Backlog != 500 || settled != 4 {
		t.Fatalf("%d cases, %d settles: %+v", len(cases), settled, cases)
	}
	for _, c := range cases {
		if c.Rate <= 0 || c.Acked <= 0 || c.EnqCalls < 40 || c.EnqP50 <= 0 || c.EnqP95 < c.EnqP50 || c.BacklogMax > int64(c.Backlog)+int64(st.topBatch())+50 {
			t.Errorf("backlog %d: %+v", c.Backlog, c)
		}
	}
	md := scalingMarkdown(cases, []string{scalingSkip["mongo"]}, st)
	for _, want := range []string{"| memory | fila | 1 | ", "acked/s, backlog 50 |", "Enqueue p50 / p95, 500 |", "MongoDB: skipped", "batches of 5 from 8 goroutines"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestScalingFlags(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.wants("scaling") {
		t.Fatal("--scenario all includes scaling")
	}
	if st := cfg.scaling; st.small != 1000 || st.large != 1_000_000 || st.largeRabbit != 100_000 || st.conc != 100 ||
		st.warm != 5*time.Second || st.window != 15*time.Second || st.rate != 200 || st.runs != 1 || st.topBatch() != 100 || !st.vacuum {
		t.Fatalf("scaling defaults %+v", st)
	}
	cfg, err = parseFlags([]string{"--scenario", "scaling", "--scaling-large", "20000", "--scaling-runs", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.wants("scaling") || cfg.scaling.largeFor("postgres") != 20000 || cfg.scaling.largeFor("rabbitmq") != 100_000 || cfg.scaling.runs != 2 {
		t.Fatalf("cfg.scaling = %+v", cfg.scaling)
	}
	if _, err := parseFlags([]string{"--scaling-small", "0"}); err == nil {
		t.Fatal("--scaling-small 0 accepted")
	}
}
