package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestLoadMarks: a figure taken while the load average exceeded the CPUs
// is marked in both report layouts, with its loads listed; a quiet one is
// not.
func TestLoadMarks(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	busy := float64(runtime.NumCPU()) + 1.5
	rep := &report{results: []result{
		{Broker: "postgres", Scenario: "burn-down c=10", System: "fila", Value: 1000, Unit: "msg/s", Higher: true, LoadBefore: 0.5, LoadAfter: 0.7},
		{Broker: "postgres", Scenario: "burn-down c=10", System: "river", Value: 900, Unit: "msg/s", Higher: true, LoadBefore: 0.6, LoadAfter: busy},
	}}
	md := rep.markdown(cfg)
	for _, want := range []string{"| burn-down c=10 | msg/s | 1,000 | 900† (×1.11) |", "Figures taken under load (cells marked †)",
		"- † postgres, burn-down c=10, river: taken under load (1-minute load average 0.60 before, "} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| 1,000† ") || strings.Contains(md, "c=10, fila: taken under load") {
		t.Errorf("a quiet figure is marked:\n%s", md)
	}

	rs := []result{
		{Scenario: "drain", System: "pgque", Value: 100_000, Unit: "msg/s", Higher: true, LoadBefore: busy, LoadAfter: 0.2},
		{Scenario: "drain", System: filaLogName, Value: 25_000, Unit: "msg/s", Higher: true, LoadBefore: 0.2, LoadAfter: 0.2},
	}
	md = pgqueMarkdown(rs, nil, cfg)
	for _, want := range []string{"| drain | msg/s | 100,000† | 25,000 |", "- † drain, pgque: taken under load"} {
		if !strings.Contains(md, want) {
			t.Errorf("PgQue report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "25,000†") {
		t.Errorf("a quiet PgQue-comparison figure is marked:\n%s", md)
	}
}

// TestFanoutLoadMarks: the fan-out tables mark a system whose run was
// taken under load.
func TestFanoutLoadMarks(t *testing.T) {
	cfg, err := parseFlags([]string{"--fanout-subs", "1"})
	if err != nil {
		t.Fatal(err)
	}
	busy := result{LoadBefore: float64(runtime.NumCPU()) + 1, LoadAfter: 0.5}
	pubs := []fanoutPublish{
		{Broker: "redis", System: "fila", Case: fanoutCases[0].label, Publish: []fanoutPoint{{Subs: 1, Publish: 100, Enqueue: 100}}, Load: busy},
		{Broker: "redis", System: "raw", Case: fanoutCases[0].label, Publish: []fanoutPoint{{Subs: 1, Publish: 100, Enqueue: 100}}},
	}
	md := fanoutMarkdown(pubs, nil, cfg)
	for _, want := range []string{"| redis | fila† | ", "| redis | raw | ", "- † redis fila fan-out: taken under load"} {
		if !strings.Contains(md, want) {
			t.Errorf("fan-out report lacks %q:\n%s", want, md)
		}
	}
}
