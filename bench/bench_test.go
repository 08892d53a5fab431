package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/fila-go/fila/memory"
)

// TestScenariosOnMemory runs every generic scenario at a tiny size on Fila's
// in-memory driver, so the harness itself (counting, pacing, reporting) is
// checked without any server.
func TestScenariosOnMemory(t *testing.T) {
	ctx := context.Background()
	s, err := newFilaSystem(ctx, "mem://bench-test-"+randSuffix(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	rep := &report{started: time.Now()}
	rs, err := enqueueScenario(ctx, "memory", s, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rep.results = append(rep.results, rs...)
	rs, err = burnDownScenario(ctx, "memory", s, 200, []int{1, 8}, 10*time.Second, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Note != "" || r.Value <= 0 {
			t.Errorf("%s: drained at %.0f msg/s (%s); want all 200 done", r.Scenario, r.Value, r.Note)
		}
	}
	rep.results = append(rep.results, rs...)
	rs, err = latencyScenario(ctx, "memory", s, []float64{200}, time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Value <= 0 || r.Value > 1000 || r.Note != "" {
			t.Errorf("%s: %.2f ms (%s)", r.Scenario, r.Value, r.Note)
		}
	}
	rep.results = append(rep.results, rs...)
	rs, err = delayScenario(ctx, "memory", s, 200*time.Millisecond, 20, time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		// The memory driver wakes a waiting receiver at the run-at; a
		// second late would mean the scenario measured something else.
		if r.Value <= 0 || r.Value > 1000 || r.Note != "" {
			t.Errorf("%s: %.2f ms (%s)", r.Scenario, r.Value, r.Note)
		}
	}
	rep.results = append(rep.results, rs...)

	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	md := rep.markdown(cfg)
	if !strings.Contains(md, "burn-down c=8") || !strings.Contains(md, "latency 200/s p99") ||
		!strings.Contains(md, "delay 200ms lateness max") {
		t.Errorf("report lacks rows:\n%s", md)
	}
}

// TestFanoutOnMemory runs the fan-out scenario at a tiny size on the
// in-memory driver (topics through the portable layer's marks): every
// publish reaches its subscriptions, every drain finishes, the report has
// its rows, and no subscription queue is left behind.
func TestFanoutOnMemory(t *testing.T) {
	ctx := context.Background()
	s, err := newFilaSystem(ctx, "mem://bench-fanout-"+randSuffix(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	st := fanoutSettings{d: 100 * time.Millisecond, subs: []int{1, 3}, n: 200, drainSubs: 3, conc: 8, limit: 10 * time.Second, batch: 50}
	pubs, drains, err := fanoutScenario(ctx, "memory", s, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) != len(fanoutCases) || len(drains) != 1 {
		t.Fatalf("%d publish rows and %d drain rows; want %d and 1", len(pubs), len(drains), len(fanoutCases))
	}
	for _, p := range pubs {
		if p.Unsupported != "" || len(p.Publish) != 2 {
			t.Errorf("%s: %+v", p.Case, p)
		}
		for _, pt := range p.Publish {
			if pt.Publish <= 0 || pt.Enqueue <= 0 {
				t.Errorf("%s, %d subscriptions: publish %.0f msg/s, enqueue %.0f msg/s", p.Case, pt.Subs, pt.Publish, pt.Enqueue)
			}
		}
	}
	d := drains[0]
	if len(d.Notes) != 0 || d.Single <= 0 || d.SingleRuns[1] <= 0 || len(d.Apart) != 3 || len(d.Together) != 3 || d.ApartTotal <= 0 || d.TogetherTotal <= 0 {
		t.Errorf("drain: %+v", d)
	}
	queues, err := s.client.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if strings.Contains(q, "-sub") {
			t.Errorf("subscription queue %s left behind", q)
		}
	}

	cfg, err := parseFlags([]string{"--fanout-subs", "1,3", "--scenario", "fanout"})
	if err != nil {
		t.Fatal(err)
	}
	pubs = append(pubs, fanoutPublish{Broker: "rabbitmq", System: "fila", Case: fanoutCases[0].label, Unsupported: "topics: unsupported"})
	drains = append(drains, fanoutDrain{Broker: "rabbitmq", System: "fila", Unsupported: "topics: unsupported"})
	md := (&report{started: time.Now(), fanPub: pubs, fanDrain: drains}).markdown(cfg)
	for _, want := range []string{"| 3 subscriptions |", "| memory | fila | batch of 100, 1 goroutine |", "all at once, total",
		"| rabbitmq | fila | single, 1 goroutine | unsupported |", "RabbitMQ publish to 5 subscriptions ≥ 0.8× enqueue (single, 1 goroutine) | unsupported"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestBodyTimeRoundTrip(t *testing.T) {
	now := time.Now()
	got, ok := bodyTime(makeBody(now))
	if !ok || !got.Equal(time.Unix(0, now.UnixNano())) {
		t.Fatalf("bodyTime = %v, %v; want %v", got, ok, now)
	}
	if _, ok := bodyTime([]byte("short")); ok {
		t.Fatal("short body parsed")
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--preset", "full", "--broker", "postgres,redis", "--burn-n", "10"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.burnN != 10 || cfg.susDur != 10*time.Minute || len(cfg.brokers) != 2 {
		t.Fatalf("cfg = %+v", cfg)
	}
	if _, err := parseFlags([]string{"--delay-rate", "0"}); err == nil {
		t.Fatal("--delay-rate 0 accepted")
	}
	if _, err := parseFlags([]string{"--broker", "kafka"}); err == nil {
		t.Fatal("unknown broker accepted")
	}
	if !slices.Equal(cfg.susPhases, []bool{false, true}) {
		t.Fatalf("default sustained phases %v; want both", cfg.susPhases)
	}
	cfg, err = parseFlags([]string{"--sustained-phases", "idle", "--systems", "fila-log"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.susPhases, []bool{true}) || !cfg.named(filaLogName) || !cfg.keep(filaLogName) || cfg.keep("fila") {
		t.Fatalf("cfg = %+v", cfg)
	}
	if cfg, _ := parseFlags([]string{"--systems", "fila"}); cfg.named(filaLogName) {
		t.Fatal("--systems fila asks for fila-log")
	}
	if _, err := parseFlags([]string{"--fanout-subs", "1,0"}); err == nil {
		t.Fatal("--fanout-subs 0 accepted")
	}
	if cfg, _ := parseFlags(nil); !slices.Equal(cfg.fanoutSubs, []int{1, 5, 20}) || cfg.fanoutDrainK != 5 || cfg.fanoutConc != 100 || cfg.fanoutN != 20_000 {
		t.Fatalf("fan-out defaults %v, %d, %d, %d; want [1 5 20], 5, 100, 20000", cfg.fanoutSubs, cfg.fanoutDrainK, cfg.fanoutConc, cfg.fanoutN)
	}
	if _, err := parseFlags([]string{"--sustained-phases", "some"}); err == nil {
		t.Fatal("bad --sustained-phases accepted")
	}
}

func TestSustainedMarkdown(t *testing.T) {
	run := sustainedRun{System: "fila-log", Phase: "idle REPEATABLE READ transaction open", Tables: "s: log_dead, log_messages_0",
		Samples: []sample{
			{At: 10 * time.Second, Throughput: 500, Backlog: 3, P95ms: 4, DeadTup: 100, SizeBytes: 1 << 20, Load: 99},
			{At: 20 * time.Second, Throughput: 499, Backlog: 5, P95ms: 9, DeadTup: 300, SizeBytes: 3 << 20},
			{At: 30 * time.Second, Throughput: 501, Backlog: 2, P95ms: 6, DeadTup: 200, SizeBytes: 2 << 20},
		}}
	md := sustainedMarkdown([]sustainedRun{run}, 500, 30*time.Second)
	for _, want := range []string{"Tables summed: s: log_dead, log_messages_0.", "max dead tuples 300 (at 20s)",
		"1.0 MiB at 10s → 2.0 MiB at 30s", "throughput mean 500 msg/s", ": held;", "p95 per sample 4.0–9.0 ms",
		"| 10s | 500 | 3 | 4.0 | 100 | 1.0 MiB | 99.00† |", "| 20s | 499 | 5 | 9.0 | 300 | 3.0 MiB | 0.00 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("sustained report lacks %q:\n%s", want, md)
		}
	}
	run.Samples[2].Backlog = 10_000
	if md := sustainedMarkdown([]sustainedRun{run}, 500, 30*time.Second); !strings.Contains(md, "did not hold") {
		t.Errorf("a growing backlog held:\n%s", md)
	}
	if got := (pgTableSet{Schema: "s", Prefix: "log_", Exclude: true}).String(); got != "every table of schema s not named log_*" {
		t.Errorf("pgTableSet = %q", got)
	}
}

func TestLatencyRecorderClampsLongLatencies(t *testing.T) {
	start := time.Now().Add(-3 * time.Hour)
	rec := newLatencyRecorder(start)
	rec.onStart(makeBody(start.Add(time.Minute))) // started about 2h59m late
	if got := rec.window.ValueAtQuantile(95); got < latencyCapUs {
		t.Fatalf("p95 of a latency over the cap = %dµs; want at least the cap %dµs, not a dropped value", got, latencyCapUs)
	}
}

func TestMySQLConfig(t *testing.T) {
	cfg, err := mysqlConfig("mysql://root:pw@db.example:3307/test?fila_migrate=true&parseTime=true&fila_prefix=x")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "root" || cfg.Passwd != "pw" || cfg.Net != "tcp" || cfg.Addr != "db.example:3307" || cfg.DBName != "test" || !cfg.ParseTime {
		t.Errorf("config = %+v", cfg)
	}
	for k := range cfg.Params {
		if strings.HasPrefix(k, "fila_") {
			t.Errorf("Fila's parameter %s passed to the driver", k)
		}
	}
	if cfg, err = mysqlConfig("mysql://root@127.0.0.1/test"); err != nil || cfg.Addr != "127.0.0.1:3306" {
		t.Errorf("default port: %+v, %v", cfg, err)
	}
	if _, err := mysqlConfig("postgres://x@y/z"); err == nil {
		t.Error("postgres URL accepted")
	}
}

func TestMySQLSustainedMarkdown(t *testing.T) {
	runs := []sustainedRun{
		{System: "fila", Phase: "no idle transaction", Samples: []sample{{At: 10 * time.Second, Throughput: 500, DeadTup: 7}}},
		{Broker: "mysql", System: "fila", Phase: "idle REPEATABLE READ transaction open", Tables: "db: fila_messages",
			Samples: []sample{
				{At: 10 * time.Second, Throughput: 500, Backlog: 1, P95ms: 3, HistLen: 900, SizeBytes: 1 << 20},
				{At: 20 * time.Second, Throughput: 500, Backlog: 2, P95ms: 5, HistLen: 1800, SizeBytes: 2 << 20},
			}},
	}
	md := sustainedMarkdown(runs, 500, 20*time.Second)
	for _, want := range []string{"### PostgreSQL sustained", "### MySQL / MariaDB sustained", "max history list length 1800 (at 20s)",
		"| history list length |", "| 20s | 500 | 2 | 5.0 | 1800 | 2.0 MiB |", "max dead tuples 7"} {
		if !strings.Contains(md, want) {
			t.Errorf("sustained report lacks %q:\n%s", want, md)
		}
	}
}
