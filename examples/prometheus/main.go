// Command prometheus runs a Fila worker instrumented with package filaotel
// and serves its metrics in the Prometheus format on /metrics, through the
// OpenTelemetry Prometheus exporter. It runs on the in-memory broker by
// default; set FILA_URL to watch a real one:
//
//	go run ./examples/prometheus -demo
//	curl -s localhost:9464/metrics | grep -E '^(fila|messaging)_'
//	go run ./examples/prometheus -demo -port 9465    # another port
//	FILA_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable&fila_migrate=true' go run ./examples/prometheus -demo
//
// Without -queue the worker works a queue of its own, emails-<random>, which
// is deleted with everything in it when the program stops (Ctrl-C); a queue
// named with -queue is worked and observed, and left alone. On PostgreSQL,
// fila_migrate=true creates Fila's tables (schema "fila") if they are
// missing; they are left in place.
//
// The metrics to alert on, as Prometheus sees them:
//
//	fila_queue_oldest_ready_age_seconds{messaging_destination_name=~"emails-.*"}
//	fila_queue_dead_letters{messaging_destination_name=~"emails-.*",fila_message_kind="report.build"}
//	histogram_quantile(0.95, sum by (le, fila_message_kind) (rate(messaging_process_duration_seconds_bucket[5m])))
//
// With -demo the program enqueues a mix of jobs every second: most succeed,
// some fail once and are retried, some fail for good and are dead-lettered.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filaotel"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

func main() {
	var (
		cfg  config
		host string
		port int
	)
	flag.StringVar(&host, "host", "127.0.0.1", "interface the /metrics endpoint listens on")
	flag.IntVar(&port, "port", 9464, "port of the /metrics endpoint")
	flag.StringVar(&cfg.queue, "queue", "", "queue to work and observe, left alone at exit (default: a new emails-<random> queue, deleted at exit)")
	flag.DurationVar(&cfg.poll, "poll", 5*time.Second, "how often queue stats are read")
	flag.BoolVar(&cfg.demo, "demo", false, "enqueue sample jobs every second")
	flag.Parse()
	cfg.addr = net.JoinHostPort(host, strconv.Itoa(port))
	if cfg.queue == "" {
		cfg.queue = "emails-" + suffix()
		cfg.deleteQueue = true
	}
	cfg.url = os.Getenv("FILA_URL")
	if cfg.url == "" {
		cfg.url = "mem://"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus example:", err)
		os.Exit(1)
	}
}

type config struct {
	url   string
	queue string
	addr  string
	poll  time.Duration
	demo  bool
	// deleteQueue deletes queue when run returns: it was made for this run.
	deleteQueue bool
	// backoff is the worker's retry schedule; default 1s.
	backoff worker.Backoff
	logger  *slog.Logger
}

// app is the instrumented worker and its /metrics handler.
type app struct {
	client  *fila.Client
	inst    *filaotel.Instrumentation
	worker  *worker.Worker
	obs     *filaotel.Observer
	mp      *sdkmetric.MeterProvider
	metrics http.Handler
}

// newApp opens the broker and wires the worker, the observer and the
// Prometheus exporter together. Close releases them.
func newApp(ctx context.Context, cfg config) (*app, error) {
	if cfg.backoff == nil {
		cfg.backoff = worker.ConstantBackoff(time.Second)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	client, err := fila.Open(ctx, cfg.url, fila.WithLogger(cfg.logger))
	if err != nil {
		return nil, err
	}
	a := &app{client: client}

	// The OpenTelemetry Prometheus exporter is a metric reader that a
	// Prometheus registry collects from on each scrape.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		client.Close()
		return nil, err
	}
	a.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	a.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	// Worker: the instrumentation adds the job span and run-time middleware
	// and counts outcomes.
	a.inst = filaotel.New(client, filaotel.WithMeterProvider(a.mp))
	wcfg := worker.Config{
		Queues:  map[string]worker.QueueConfig{cfg.queue: {Concurrency: 4}},
		Backoff: cfg.backoff,
		Logger:  cfg.logger,
	}
	a.inst.Instrument(&wcfg)
	if a.worker, err = worker.New(client, wcfg); err != nil {
		a.Close()
		return nil, err
	}
	a.worker.HandleFunc("email.send", work)
	a.worker.HandleFunc("report.build", work)

	// Observer: queue gauges from polled stats.
	if a.obs, err = filaotel.NewObserver(client, []string{cfg.queue},
		filaotel.WithMeterProvider(a.mp), filaotel.WithPollInterval(cfg.poll), filaotel.WithLogger(cfg.logger)); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Close stops the metrics and closes the client.
func (a *app) Close() {
	if a.obs != nil {
		_ = a.obs.Close()
	}
	if a.mp != nil {
		_ = a.mp.Shutdown(context.Background())
	}
	_ = a.client.Close()
}

// work is the demo handler: the body says how the job goes.
func work(ctx context.Context, d *fila.Delivery) error {
	switch string(d.Body) {
	case "fail-once":
		if d.Attempt == 1 {
			return errors.New("upstream timed out")
		}
	case "bad":
		return worker.Permanent(errors.New("malformed request"))
	}
	select {
	case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond): // the work
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func run(ctx context.Context, cfg config) error {
	a, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if cfg.deleteQueue {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.client.QueueDelete(dctx, cfg.queue, fila.QueueDeleteParams{Force: true}); err != nil {
				fmt.Fprintf(os.Stderr, "deleting queue %s: %v\n", cfg.queue, err)
				return
			}
			fmt.Printf("deleted queue %s\n", cfg.queue)
		}()
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", a.metrics)
	srv := &http.Server{Addr: cfg.addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- srv.ListenAndServe() }()
	go func() { errc <- a.obs.Run(ctx) }()
	go func() { errc <- a.worker.Run(ctx) }()
	if cfg.demo {
		go demo(ctx, a, cfg.queue)
	}
	fmt.Printf("broker %s, queue %s, metrics on http://%s/metrics\n", fila.Redact(cfg.url), cfg.queue, cfg.addr)

	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// demo enqueues a mix of jobs every second until ctx ends.
func demo(ctx context.Context, a *app, queue string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for _, m := range []fila.Message{
			{Kind: "email.send", Body: []byte("ok")},
			{Kind: "email.send", Body: []byte("ok")},
			{Kind: "email.send", Body: []byte("fail-once")},
			{Kind: "report.build", Body: []byte("ok")},
		} {
			if rand.IntN(10) == 0 {
				m.Body = []byte("bad")
			}
			if _, err := a.inst.Enqueue(ctx, queue, m); err != nil && ctx.Err() == nil {
				slog.Warn("demo enqueue failed", slog.Any("error", err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// suffix returns 8 random hex digits, for a queue name no other run uses.
func suffix() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
