package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestMetricsEndpoint scrapes /metrics after a known sequence of jobs — 3
// succeed, 1 fails once then succeeds, 1 fails for good — and finds the
// three metrics with the right values: the oldest ready age, dead letters
// per kind, and the run-time histogram per kind.
func TestMetricsEndpoint(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testMetricsEndpoint(t, "mem://", "memory") })
	t.Run("postgres", func(t *testing.T) {
		u, err := neturl.Parse(testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("fila_migrate", "true")
		u.RawQuery = q.Encode()
		testMetricsEndpoint(t, u.String(), "postgres")
	})
}

func testMetricsEndpoint(t *testing.T, url, system string) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	queue := "prom_" + hex.EncodeToString(b)
	ctx := context.Background()
	a, err := newApp(ctx, config{
		url: url, queue: queue, poll: time.Hour, // the test polls itself
		backoff: worker.ConstantBackoff(10 * time.Millisecond),
		logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.metrics)
	defer srv.Close()

	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.worker.Run(wctx) }()
	for _, m := range []fila.Message{
		{Kind: "email.send", Body: []byte("ok")},
		{Kind: "email.send", Body: []byte("ok")},
		{Kind: "email.send", Body: []byte("ok")},
		{Kind: "email.send", Body: []byte("fail-once")},
		{Kind: "report.build", Body: []byte("bad")},
	} {
		if _, err := a.inst.Enqueue(ctx, queue, m); err != nil {
			t.Fatal(err)
		}
	}
	// Wait (by scraping) until the six job runs are counted.
	deadline := time.Now().Add(20 * time.Second)
	for total(scrape(t, srv.URL)["fila_job_outcomes_total"]) < 6 {
		if time.Now().After(deadline) {
			t.Fatal("the six job runs were not counted within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopWorker()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// A message that has waited a minute, with no worker to run it.
	if _, err := a.client.Enqueue(ctx, queue, fila.Message{Kind: "email.send", RunAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.client.QueueDelete(ctx, queue, fila.QueueDeleteParams{Force: true}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}()
	if err := a.obs.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, srv.URL)
	dest := map[string]string{"messaging_destination_name": queue, "messaging_system": system}

	// 1. Oldest ready age.
	age := find(t, fams, "fila_queue_oldest_ready_age_seconds", dest)
	if v := age.GetGauge().GetValue(); v < 60 || v > 90 {
		t.Errorf("oldest ready age = %vs; want about 60s", v)
	}

	// 2. Dead letters per kind.
	dead := find(t, fams, "fila_queue_dead_letters", with(dest, "fila_message_kind", "report.build"))
	if v := dead.GetGauge().GetValue(); v != 1 {
		t.Errorf("dead letters of report.build = %v; want 1", v)
	}
	if n := len(fams["fila_queue_dead_letters"].GetMetric()); n != 1 {
		t.Errorf("%d dead-letter series; want only report.build", n)
	}

	// 3. Run-time histogram per kind: email.send ran 4 times without error
	// (3 ok, the retried one's second run) and once with an error;
	// report.build once, permanently failed.
	proc := with(dest, "messaging_operation_name", "process")
	ok := with(proc, "fila_message_kind", "email.send")
	for _, c := range []struct {
		labels map[string]string
		count  uint64
	}{
		{ok, 4},
		{with(ok, "error_type", "_OTHER"), 1},
		{with(with(proc, "fila_message_kind", "report.build"), "error_type", "permanent"), 1},
	} {
		h := find(t, fams, "messaging_process_duration_seconds", c.labels).GetHistogram()
		if h.GetSampleCount() != c.count {
			t.Errorf("run-time histogram %v: count %d; want %d", c.labels, h.GetSampleCount(), c.count)
		}
		if len(h.GetBucket()) < 10 || h.GetSampleSum() <= 0 {
			t.Errorf("run-time histogram %v: %d buckets, sum %v", c.labels, len(h.GetBucket()), h.GetSampleSum())
		}
	}
	if n := len(fams["messaging_process_duration_seconds"].GetMetric()); n != 3 {
		t.Errorf("%d run-time series; want 3", n)
	}

	// And the outcomes per kind.
	for _, c := range []struct {
		kind, outcome string
		n             float64
	}{{"email.send", "ack", 4}, {"email.send", "retry", 1}, {"report.build", "dead", 1}} {
		m := find(t, fams, "fila_job_outcomes_total", with(with(dest, "fila_message_kind", c.kind), "fila_job_outcome", c.outcome))
		if v := m.GetCounter().GetValue(); v != c.n {
			t.Errorf("outcome %s/%s = %v; want %v", c.kind, c.outcome, v, c.n)
		}
	}
	ready := find(t, fams, "fila_queue_messages", with(dest, "fila_message_state", "ready"))
	if v := ready.GetGauge().GetValue(); v != 1 {
		t.Errorf("ready messages = %v; want 1", v)
	}
}

// scrape fetches and parses the metrics endpoint.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// find returns the series of family name whose labels include want.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		var names []string
		for n := range fams {
			names = append(names, n)
		}
		t.Fatalf("no metric %s; have %s", name, strings.Join(names, ", "))
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := len(labels) == len(want)
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	t.Fatalf("no %s series with exactly the labels %v; have %v", name, want, f.GetMetric())
	return nil
}

func total(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for mk, mv := range m {
		out[mk] = mv
	}
	return out
}
