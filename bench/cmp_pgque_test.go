package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStartBatchOnMemory drains a queue with the comparison's batch
// consumer on the in-memory driver (no AckReceive there: AckBatch, then
// Receive): every message is acked once.
func TestStartBatchOnMemory(t *testing.T) {
	ctx := context.Background()
	s, err := newFilaSystem(ctx, "mem://bench-batch-"+randSuffix(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 2500
	if err := preload(ctx, s, n, 100); err != nil {
		t.Fatal(err)
	}
	seen := 0
	c, err := s.startBatch(ctx, s.runQueue(), 1000, func([]byte) { seen++ })
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Done() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if c.Done() != n || seen != n {
		t.Fatalf("done %d, handled %d; want %d", c.Done(), seen, n)
	}
}

func TestPgqueFlagsAndReport(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.wants("pgque") {
		t.Fatal("--scenario all includes pgque")
	}
	cfg, err = parseFlags([]string{"--scenario", "pgque", "--pgque-sql", "/x/pgque.sql", "--pgque-fanout-subs", "2,4"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.wants("pgque") || cfg.pgque.sqlPath != "/x/pgque.sql" || !slices.Equal(cfg.pgque.fanSubs, []int{2, 4}) ||
		cfg.pgque.drainN != 100_000 || cfg.pgque.fanN != 20_000 || cfg.pgque.enqueueDur != cfg.enqueueDur {
		t.Fatalf("cfg.pgque = %+v", cfg.pgque)
	}
	if _, err := parseFlags([]string{"--pgque-drain-batch", "1001"}); err == nil {
		t.Fatal("--pgque-drain-batch above Fila's MaxReceive accepted")
	}
	rs := []result{
		{Scenario: "drain", System: "pgque", Value: 100_000, Unit: "msg/s", Higher: true},
		{Scenario: "drain", System: filaLogName, Value: 25_000, Unit: "msg/s", Higher: true},
		{Scenario: "drain", System: "fila", Value: 50_000, Unit: "msg/s", Higher: true, Note: "noisy"},
		{Scenario: "rows", System: filaLogName, Value: 3.07, Unit: "rows"},
	}
	md := pgqueMarkdown(rs, []string{"PgQue skipped"}, cfg)
	for _, want := range []string{"| drain | msg/s | 100,000 | 25,000 | 50,000* | ×0.25 | ×0.50 |", "| rows | rows |  | 3.07 |  |  |  |",
		"- PgQue skipped", "- drain, fila: noisy"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
