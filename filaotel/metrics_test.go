package filaotel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filaotel"
	"github.com/fila-go/fila/worker"
)

// TestWorkerMetrics runs a known sequence of jobs — 3 succeed, 1 fails once
// then succeeds, 1 fails permanently — and checks the duration histogram per
// kind, the outcomes per kind, and the observer's gauges.
func TestWorkerMetrics(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := open(t, b.url(t))
			q := tempQueue(t, c, "metrics")
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			inst := filaotel.New(c, filaotel.WithMeterProvider(mp))

			var rec recorder
			cfg := worker.Config{
				Queues:   map[string]worker.QueueConfig{q: {Concurrency: 2}},
				Lease:    5 * time.Second,
				Backoff:  worker.ConstantBackoff(10 * time.Millisecond),
				OnJobEnd: rec.onEnd,
				Logger:   quiet,
			}
			inst.Instrument(&cfg)
			w, err := worker.New(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			w.HandleFunc("ok", func(ctx context.Context, d *fila.Delivery) error {
				time.Sleep(20 * time.Millisecond)
				return nil
			})
			w.HandleFunc("flaky", func(ctx context.Context, d *fila.Delivery) error {
				if d.Attempt == 1 {
					return errors.New("first try fails")
				}
				return nil
			})
			w.HandleFunc("bad", func(ctx context.Context, d *fila.Delivery) error {
				return worker.Permanent(errors.New("cannot be done"))
			})
			stop := runWorker(t, w)

			ctx := context.Background()
			for _, k := range []string{"ok", "ok", "ok", "flaky", "bad"} {
				if _, err := inst.Enqueue(ctx, q, fila.Message{Kind: k}); err != nil {
					t.Fatal(err)
				}
			}
			rec.wait(t, 6)
			stop()
			t.Cleanup(func() { _, _ = c.DeadPurge(context.Background(), q, fila.DeadFilter{}) })

			obs, err := filaotel.NewObserver(c, []string{q}, filaotel.WithMeterProvider(mp))
			if err != nil {
				t.Fatal(err)
			}
			defer obs.Close()
			// One message that no worker runs: poll until its age shows.
			before := time.Now()
			if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "ok"}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { drain(t, c, q) })
			var age float64
			if b.partialStats {
				// No oldest ready time: the gauge stays silent.
				if err := obs.Poll(ctx); err != nil {
					t.Fatal(err)
				}
				if _, ok := collect(t, reader)[filaotel.MetricOldestReadyAge]; ok {
					t.Errorf("%s reports no oldest ready time, yet the age gauge has a value", b.name)
				}
				age = 1 // skip the wait below
			}
			for deadline := time.Now().Add(10 * time.Second); age < 0.3; {
				if time.Now().After(deadline) {
					t.Fatalf("oldest ready age stuck at %vs", age)
				}
				time.Sleep(20 * time.Millisecond)
				if err := obs.Poll(ctx); err != nil {
					t.Fatal(err)
				}
				g := collect(t, reader)[filaotel.MetricOldestReadyAge].Data.(metricdata.Gauge[float64])
				if len(g.DataPoints) != 1 {
					t.Fatalf("oldest ready age points: %+v", g.DataPoints)
				}
				age = g.DataPoints[0].Value
			}
			if limit := time.Since(before).Seconds() + 0.5; !b.partialStats && age > limit {
				t.Errorf("oldest ready age %vs; the message is at most %vs old", age, limit)
			}

			ms := collect(t, reader)
			sys := "messaging.system=" + c.DriverName()
			dest := "messaging.destination.name=" + q

			// Duration histogram per kind (and error.type for failures).
			hist, ok := ms[filaotel.MetricProcessDuration].Data.(metricdata.Histogram[float64])
			if !ok || ms[filaotel.MetricProcessDuration].Unit != "s" {
				t.Fatalf("%s missing or not a histogram in seconds: %+v", filaotel.MetricProcessDuration, ms[filaotel.MetricProcessDuration])
			}
			counts := map[string]uint64{}
			for _, dp := range hist.DataPoints {
				counts[attrsString(dp.Attributes)] += dp.Count
				if k, _ := dp.Attributes.Value(filaotel.AttrKind); k.AsString() == "ok" && func() bool { v, _ := dp.Min.Value(); return v < 0.02 }() {
					t.Errorf("ok jobs sleep 20ms; min duration %v", dp.Min)
				}
			}
			want := map[string]uint64{
				"fila.message.kind=ok," + dest + ",messaging.operation.name=process," + sys:                       3,
				"fila.message.kind=flaky," + dest + ",messaging.operation.name=process," + sys:                    1,
				"error.type=_OTHER,fila.message.kind=flaky," + dest + ",messaging.operation.name=process," + sys:  1,
				"error.type=permanent,fila.message.kind=bad," + dest + ",messaging.operation.name=process," + sys: 1,
			}
			checkCounts(t, "duration histogram", counts, want)

			// Outcomes per kind.
			sum, ok := ms[filaotel.MetricJobOutcomes].Data.(metricdata.Sum[int64])
			if !ok || !sum.IsMonotonic {
				t.Fatalf("%s missing or not a counter", filaotel.MetricJobOutcomes)
			}
			outcomes := map[string]uint64{}
			for _, dp := range sum.DataPoints {
				outcomes[attrsString(dp.Attributes)] += uint64(dp.Value)
			}
			checkCounts(t, "outcomes", outcomes, map[string]uint64{
				"fila.job.outcome=ack,fila.message.kind=ok," + dest + "," + sys:      3,
				"fila.job.outcome=retry,fila.message.kind=flaky," + dest + "," + sys: 1,
				"fila.job.outcome=ack,fila.message.kind=flaky," + dest + "," + sys:   1,
				"fila.job.outcome=dead,fila.message.kind=bad," + dest + "," + sys:    1,
			})

			// Sent messages.
			sent := ms[filaotel.MetricSentMessages].Data.(metricdata.Sum[int64])
			if len(sent.DataPoints) != 1 || sent.DataPoints[0].Value != 5 {
				t.Errorf("sent messages = %+v; want 5", sent.DataPoints)
			}

			// Observer gauges.
			gauge := func(name string) map[string]uint64 {
				m := map[string]uint64{}
				for _, dp := range ms[name].Data.(metricdata.Gauge[int64]).DataPoints {
					m[attrsString(dp.Attributes)] = uint64(dp.Value)
				}
				return m
			}
			checkCounts(t, "queue messages", gauge(filaotel.MetricQueueMessages), map[string]uint64{
				"fila.message.state=ready," + dest + "," + sys:   1,
				"fila.message.state=delayed," + dest + "," + sys: 0,
				"fila.message.state=leased," + dest + "," + sys:  0,
				"fila.message.state=dead," + dest + "," + sys:    1,
			})
			if b.partialStats {
				if _, ok := ms[filaotel.MetricDeadLetters]; ok {
					t.Errorf("%s reports no dead letters per kind, yet the gauge has values", b.name)
				}
				return
			}
			checkCounts(t, "dead letters", gauge(filaotel.MetricDeadLetters), map[string]uint64{
				"fila.message.kind=bad," + dest + "," + sys: 1,
			})

			// A purged kind reports 0 rather than vanishing.
			if _, err := c.DeadPurge(ctx, q, fila.DeadFilter{}); err != nil {
				t.Fatal(err)
			}
			if err := obs.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			ms = collect(t, reader)
			checkCounts(t, "dead letters after purge", gauge(filaotel.MetricDeadLetters), map[string]uint64{
				"fila.message.kind=bad," + dest + "," + sys: 0,
			})
		})
	}
}

func checkCounts(t *testing.T, what string, got, want map[string]uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d series, want %d:\n got  %v\n want %v", what, len(got), len(want), got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s{%s} = %d; want %d (all: %v)", what, k, got[k], v, got)
		}
	}
}

// drain acks whatever is ready in q.
func drain(t testing.TB, c *fila.Client, q string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		s, err := c.QueueStats(ctx, q)
		if err != nil || s.Ready == 0 {
			return
		}
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 100})
		if err != nil {
			return
		}
		_ = c.AckBatch(ctx, ds)
	}
}

func TestObserverErrors(t *testing.T) {
	c := open(t, "mem://"+unique("obs"))
	if _, err := filaotel.NewObserver(c, []string{}); err == nil {
		t.Error("NewObserver with an empty, non-nil queue list succeeded")
	}
	if _, err := filaotel.NewObserver(c, []string{"bad name"}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("NewObserver with a bad queue name: %v", err)
	}
	// A failing poll (closed client) reports the error, and Run returns when
	// its context ends.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := filaotel.NewObserver(c, []string{"q"}, filaotel.WithMeterProvider(mp), filaotel.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- obs.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := collect(t, reader)[filaotel.MetricQueueMessages]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the observer reported nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	c.Close()
	if err := obs.Poll(context.Background()); !errors.Is(err, fila.ErrClosed) {
		t.Errorf("Poll on a closed client = %v; want ErrClosed", err)
	}
	if err := obs.Close(); err != nil {
		t.Error(err)
	}
	if n := len(collect(t, reader)); n != 0 {
		t.Errorf("after Close the observer still reports %d metrics", n)
	}
}

// TestPanickingJob checks that a panic is recorded (duration with
// error.type=panic, span in error) and still reaches the worker, which
// retries the job.
func TestPanickingJob(t *testing.T) {
	c := open(t, "mem://"+unique("panic"))
	q := unique("panic")
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inst := filaotel.New(c, filaotel.WithMeterProvider(mp))
	var rec recorder
	cfg := worker.Config{
		Queues:   map[string]worker.QueueConfig{q: {Concurrency: 1}},
		Backoff:  worker.ConstantBackoff(time.Millisecond),
		OnJobEnd: rec.onEnd,
		Logger:   quiet,
	}
	inst.Instrument(&cfg)
	w, err := worker.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.HandleFunc("boom", func(ctx context.Context, d *fila.Delivery) error {
		if d.Attempt == 1 {
			panic("boom")
		}
		return nil
	})
	runWorker(t, w)
	if _, err := c.Enqueue(context.Background(), q, fila.Message{Kind: "boom"}); err != nil {
		t.Fatal(err)
	}
	ends := rec.wait(t, 2)
	if ends[0].Outcome != worker.OutcomeRetry || ends[1].Outcome != worker.OutcomeAck {
		t.Fatalf("outcomes %s, %s; want retry then ack", ends[0].Outcome, ends[1].Outcome)
	}
	hist := collect(t, reader)[filaotel.MetricProcessDuration].Data.(metricdata.Histogram[float64])
	got := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		et, _ := dp.Attributes.Value(filaotel.AttrErrorType)
		got[et.AsString()] += dp.Count
	}
	if got["panic"] != 1 || got[""] != 1 || len(got) != 2 {
		t.Errorf("durations by error.type = %v; want one panic, one success", got)
	}
}

// TestObserverEveryQueue: an Observer made without queue names reports
// every queue QueueList names at each poll, picking up new queues and
// dropping deleted ones.
func TestObserverEveryQueue(t *testing.T) {
	c := open(t, "mem://"+unique("obsall"))
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := filaotel.NewObserver(c, nil, filaotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	queuesReported := func() []string {
		t.Helper()
		if err := obs.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		if m, ok := collect(t, reader)[filaotel.MetricQueueMessages]; ok {
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				v, _ := dp.Attributes.Value(filaotel.AttrDestination)
				seen[v.AsString()] = true
			}
		}
		out := make([]string, 0, len(seen))
		for q := range seen {
			out = append(out, q)
		}
		slices.Sort(out)
		return out
	}
	if got := queuesReported(); len(got) != 0 {
		t.Errorf("an empty broker reported %v", got)
	}
	for _, q := range []string{"a", "b"} {
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := queuesReported(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("reported %v, want [a b]", got)
	}
	if err := c.QueueDelete(ctx, "a", fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := queuesReported(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after deleting a, reported %v, want [b]", got)
	}
}

// TestObserverLimits: on every broker that keeps limits the observer
// reports a queue's concurrency limit and the slots held, and counts its
// client's receives that waited for room; on RabbitMQ, which keeps none,
// polls still work and report no limit.
func TestObserverLimits(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			c := open(t, b.url(t))
			q := tempQueue(t, c, "obslim")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			obs, err := filaotel.NewObserver(c, []string{q}, filaotel.WithMeterProvider(mp))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { obs.Close() })
			for range 2 {
				if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k"}); err != nil {
					t.Fatal(err)
				}
			}
			err = c.QueueLimitsSet(ctx, q, fila.QueueLimits{Concurrency: 1})
			if b.name == "rabbitmq" {
				if !errors.Is(err, fila.ErrUnsupported) {
					t.Fatalf("QueueLimitsSet on RabbitMQ = %v; want ErrUnsupported", err)
				}
				if err := obs.Poll(ctx); err != nil {
					t.Errorf("Poll where limits are unsupported = %v; want nil", err)
				}
				for _, name := range []string{filaotel.MetricConcurrencyLimit, filaotel.MetricConcurrencyHeld, filaotel.MetricThrottledReceives} {
					if _, ok := collect(t, reader)[name]; ok {
						t.Errorf("%s reported where limits are unsupported", name)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			held, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
			if err != nil || len(held) != 1 {
				t.Fatalf("Receive = %d deliveries, %v; want 1", len(held), err)
			}
			// A second Receive waits for the only slot, and ends with its
			// context.
			short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
			if ds, err := c.Receive(short, q, fila.ReceiveParams{Max: 1}); len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Receive while the slot is held = %d deliveries, %v; want none and its deadline", len(ds), err)
			}
			cancelShort()
			if err := obs.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			got := collect(t, reader)
			gauge := func(name string) int64 {
				t.Helper()
				m, ok := got[name]
				if !ok {
					t.Fatalf("%s not reported", name)
				}
				dps := m.Data.(metricdata.Gauge[int64]).DataPoints
				if len(dps) != 1 {
					t.Fatalf("%s: %d data points; want 1", name, len(dps))
				}
				return dps[0].Value
			}
			if v := gauge(filaotel.MetricConcurrencyLimit); v != 1 {
				t.Errorf("concurrency limit reported as %d; want 1", v)
			}
			if v := gauge(filaotel.MetricConcurrencyHeld); v != 1 {
				t.Errorf("slots held reported as %d; want 1", v)
			}
			m, ok := got[filaotel.MetricThrottledReceives]
			if !ok {
				t.Fatalf("%s not reported", filaotel.MetricThrottledReceives)
			}
			waits := map[string]int64{}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value(filaotel.AttrLimit)
				waits[v.AsString()] = dp.Value
			}
			if waits["concurrency"] != 1 || waits["rate"] != 0 {
				t.Errorf("throttled receives %v; want one for concurrency", waits)
			}
			w, ok := got[filaotel.MetricThrottledWait]
			if !ok || len(w.Data.(metricdata.Sum[float64]).DataPoints) != 1 || w.Data.(metricdata.Sum[float64]).DataPoints[0].Value <= 0 {
				t.Errorf("%s: %+v; want the time the receive waited", filaotel.MetricThrottledWait, w.Data)
			}
			if err := held[0].Ack(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
