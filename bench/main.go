// Command bench measures Fila against the raw client of each broker and
// against River (PostgreSQL) and asynq (Redis), in one run on the same
// servers, and prints Markdown tables with the ratios. It is its own Go
// module so the main module never depends on River or asynq. Run it from
// this directory:
//
//	go run . --broker all --scenario all                 # quick preset, ~15 min
//	go run . --preset full --broker postgres --scenario burn-down
//	go run . --scenario pgque --pgque-sql ~/pgque/sql/pgque.sql  # Fila against PgQue, ~5 min
//	go run . --broker postgres,redis,mysql --scenario scaling --systems fila,fila-log  # backlog 1k against 1M
//
// See BENCHMARKS.md at the repository root for the scenarios, the exact
// commands and the latest figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	brokers   []string
	scenarios []string
	systems   []string

	enqueueDur   time.Duration
	burnN        int
	burnPerSlot  int
	mongoBurnN   int
	mongoRates   []float64
	burnLimit    time.Duration
	burnConcs    []int
	rates        []float64
	latencyDur   time.Duration
	latencyConc  int
	susRate      float64
	susDur       time.Duration
	susInterval  time.Duration
	vacuumEvery  time.Duration
	susConc      int
	susBaselines bool
	susPhases    []bool // idle transaction off/on, in order
	delay        time.Duration
	delayRate    float64
	fanoutSubs   []int
	fanoutN      int
	fanoutDrainK int
	fanoutConc   int

	pgque pgqueSettings // the PgQue comparison (scenario pgque)

	topicSus topicSusSettings // scenario topic-sustained

	scaling scalingSettings // scenario scaling

	workflow workflowSettings // scenario workflow

	pgURL, redisURL, amqpURL, mongoURL, mysqlURL string
	cpuProfile                                   string
}

var allBrokers = []string{"postgres", "redis", "rabbitmq", "mongo", "mysql"}
var allScenarios = []string{"enqueue", "burn-down", "latency", "delay", "sustained", "fanout", "routing", "priority"}

// optionalScenarios run only when named: they are not part of "all".
// pgque is the comparison with PgQue (issue 37), on PostgreSQL only; it
// makes its own databases, so --broker does not apply to it. So does
// topic-sustained (topicsustained.go): Fila's PostgreSQL log mode, one
// topic with a stalled subscription, for half an hour.
// scaling (scaling.go) measures Fila's drain at a backlog of 1,000 and of
// 1,000,000 on each broker: preloading a million messages per system takes
// minutes, longer than the whole quick preset's share of a broker.
// workflow (workflow.go) measures what a workflow's bookkeeping costs a
// chain of steps against the same chain of plain messages.
var optionalScenarios = []string{"pgque", "topic-sustained", "scaling", "workflow"}

// optionalBrokers run only when named: memory (the in-memory driver, Fila
// only) is not part of "all".
var optionalBrokers = []string{"memory"}

// standaloneScenarios connect no broker of --broker: they make their own
// databases.
var standaloneScenarios = []string{"pgque", "topic-sustained"}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	// SIGTERM too: a long run (topic-sustained takes half an hour) that is
	// stopped still prints what it measured.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() { progress.run(stopProgress); close(progressDone) }()
	rep, err := run(ctx, cfg)
	close(stopProgress)
	<-progressDone
	fmt.Print(rep.markdown(cfg))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var cfg config
	broker := fs.String("broker", "all", "postgres, redis, rabbitmq, mongo, mysql (MySQL or MariaDB), all, or a comma-separated list; "+
		"also memory (not in all): Fila on the in-memory driver")
	scenario := fs.String("scenario", "all", "enqueue, burn-down, latency, delay, sustained, fanout, routing, priority, all, or a comma-separated list; "+
		"also pgque (not in all): Fila's PostgreSQL log and skip-locked modes against PgQue, see the --pgque flags; "+
		"and topic-sustained (not in all): Fila's PostgreSQL log mode, a topic with 5 subscriptions of which one stops consuming, see the --topic-sus flags; "+
		"and scaling (not in all): Fila's drain and single-Enqueue time at a small and a large backlog, see the --scaling flags; "+
		"and workflow (not in all): chains of steps as a workflow against chains of plain messages, time and round trips, see the --workflow flags")
	systems := fs.String("systems", "", "only systems whose name contains one of these comma-separated words (e.g. fila,raw); default all. "+
		"The word fila-log adds Fila's PostgreSQL log storage mode (fila_mode=log) as its own system, which runs only when named")
	preset := fs.String("preset", "quick", "quick (all brokers in ~15 min) or full (the sizes of issue 11)")
	fs.DurationVar(&cfg.enqueueDur, "enqueue-duration", 0, "time per enqueue measurement (quick 3s, full 10s)")
	fs.IntVar(&cfg.burnN, "burn-n", 0, "messages preloaded per burn-down (quick 5000, full 100000)")
	fs.IntVar(&cfg.burnPerSlot, "burn-per-slot", 300, "at least this many messages per worker slot in a burn-down (so at c=100 at least 30,000): "+
		"a shorter drain measures the consumers' start; not on MongoDB/FerretDB")
	fs.DurationVar(&cfg.burnLimit, "burn-limit", 0, "longest drain per burn-down; the rate is then done/limit (quick 15s, full 3m)")
	fs.IntVar(&cfg.mongoBurnN, "mongo-burn-n", 0, "messages preloaded per burn-down on MongoDB/FerretDB (quick 300, full 3000)")
	mongoRates := fs.String("mongo-rates", "20,50", "offered rates (msg/s) of the latency scenario on MongoDB/FerretDB, which is far slower")
	burnConcs := fs.String("burn-concurrency", "1,10,100", "worker concurrencies of the burn-down")
	rates := fs.String("rates", "500,1000,2000", "offered rates (msg/s) of the latency scenario")
	fs.DurationVar(&cfg.latencyDur, "latency-duration", 0, "time per offered rate (quick 10s, full 30s)")
	fs.IntVar(&cfg.latencyConc, "latency-concurrency", 100, "consumer concurrency in the latency and sustained scenarios")
	fs.DurationVar(&cfg.delay, "delay", time.Second, "the Delay of every message in the delay scenario")
	fs.Float64Var(&cfg.delayRate, "delay-rate", 50, "offered rate (msg/s) of delayed messages in the delay scenario (MongoDB/FerretDB: its first --mongo-rates)")
	fanoutSubs := fs.String("fanout-subs", "1,5,20", "subscription counts of the fanout scenario's publish measurements (each --enqueue-duration long)")
	fs.IntVar(&cfg.fanoutN, "fanout-n", 0, "messages published to the drained subscriptions in the fanout scenario, and preloaded in its one-queue burn-down (quick 20000, full 100000; MongoDB: --mongo-burn-n)")
	fs.IntVar(&cfg.fanoutDrainK, "fanout-drain-subs", 5, "subscriptions drained in the fanout scenario, each holding --fanout-n messages")
	fs.IntVar(&cfg.fanoutConc, "fanout-concurrency", 100, "consumer concurrency per subscription in the fanout scenario's drain")
	fs.Float64Var(&cfg.susRate, "sustained-rate", 500, "offered rate (msg/s) of the sustained run (PostgreSQL, MySQL)")
	fs.DurationVar(&cfg.susDur, "sustained-duration", 0, "length of each sustained phase (quick 1m, full 10m; 30m for the long run)")
	fs.DurationVar(&cfg.susInterval, "sustained-interval", 10*time.Second, "sampling interval of the sustained run")
	fs.DurationVar(&cfg.vacuumEvery, "vacuum-every", 0, "run VACUUM on the hot table at this interval during the sustained run, standing in for autovacuum where the server has it off (0: rely on autovacuum)")
	susPhases := fs.String("sustained-phases", "both", "phases of the sustained run: both (without, then with an idle REPEATABLE READ transaction), idle (only with it) or plain (only without it)")
	fs.BoolVar(&cfg.susBaselines, "sustained-river", true, "also run River (FetchCooldown 1ms) in the sustained scenario")
	fs.StringVar(&cfg.pgURL, "postgres-url", getenv("FILA_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL")
	fs.StringVar(&cfg.redisURL, "redis-url", getenv("FILA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis URL")
	fs.StringVar(&cfg.amqpURL, "rabbitmq-url", getenv("FILA_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL")
	fs.StringVar(&cfg.mysqlURL, "mysql-url", getenv("FILA_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"), "MySQL or MariaDB URL (each system makes its own database on that server)")
	fs.StringVar(&cfg.mongoURL, "mongo-url", getenv("FILA_TEST_MONGO_URL", "mongodb://127.0.0.1:27017/"), "MongoDB (or FerretDB) URL")
	fs.StringVar(&cfg.pgque.sqlPath, "pgque-sql", os.Getenv("FILA_BENCH_PGQUE_SQL"), "PgQue's install script (sql/pgque.sql of github.com/NikolayS/pgque) for the pgque scenario; "+
		"default $FILA_BENCH_PGQUE_SQL; without it PgQue is skipped and only Fila's two modes run")
	fs.IntVar(&cfg.pgque.fanN, "pgque-fanout-n", 20_000, "pgque scenario: events published per fan-out case")
	pgqueSubs := fs.String("pgque-fanout-subs", "1,3,10", "pgque scenario: subscription counts of the fan-out cases")
	fs.IntVar(&cfg.pgque.fanBatch, "pgque-fanout-batch", 100, "pgque scenario: events per publish call in the fan-out")
	fs.IntVar(&cfg.pgque.drainN, "pgque-drain-n", 100_000, "pgque scenario: backlog drained by one consumer")
	fs.IntVar(&cfg.pgque.drainBatch, "pgque-drain-batch", 1000, "pgque scenario: most messages per receive in the drain (at most 1000, Fila's MaxReceive)")
	fs.DurationVar(&cfg.pgque.tick, "pgque-tick", 10*time.Millisecond, "pgque scenario: how often PgQue's ticker runs")
	fs.DurationVar(&cfg.pgque.poll, "pgque-poll", 10*time.Millisecond, "pgque scenario: how long PgQue's consumer sleeps after an empty receive "+
		"(its Go client's default is 30s; every empty receive locks the subscription row, a WAL record and a commit)")
	fs.DurationVar(&cfg.pgque.limit, "pgque-limit", 3*time.Minute, "pgque scenario: longest wait for a fan-out's consumers or a drain")
	fs.Float64Var(&cfg.pgque.rate, "pgque-rate", 500, "pgque scenario: offered rate (msg/s) of its latency case")
	fs.Float64Var(&cfg.topicSus.rate, "topic-sus-rate", 500, "topic-sustained: offered publish rate (events/s, single Publish calls)")
	fs.DurationVar(&cfg.topicSus.dur, "topic-sus-duration", 30*time.Minute, "topic-sustained: how long to publish")
	fs.DurationVar(&cfg.topicSus.stallAfter, "topic-sus-stall-after", 0, "topic-sustained: when one subscription's consumer stops "+
		"(default 10m; a third of --topic-sus-duration when that is under 30m)")
	fs.DurationVar(&cfg.topicSus.interval, "topic-sus-interval", 30*time.Second, "topic-sustained: sampling interval")
	fs.DurationVar(&cfg.topicSus.rotate, "topic-sus-rotate", 0, "topic-sustained: fila_rotate_interval of the log mode (default: the driver's, 1m)")
	fs.IntVar(&cfg.scaling.small, "scaling-small", 1000, "scaling: the small backlog")
	fs.IntVar(&cfg.scaling.large, "scaling-large", 1_000_000, "scaling: the large backlog (not RabbitMQ)")
	fs.IntVar(&cfg.scaling.largeRabbit, "scaling-large-rabbitmq", 100_000, "scaling: the large backlog on RabbitMQ "+
		"(a quorum queue of a million messages may raise the shared server's memory alarm)")
	fs.IntVar(&cfg.scaling.conc, "scaling-concurrency", 100, "scaling: the consumer's concurrency")
	fs.DurationVar(&cfg.scaling.warm, "scaling-warmup", 5*time.Second, "scaling: warm-up after the consumer starts, not measured")
	fs.DurationVar(&cfg.scaling.window, "scaling-window", 15*time.Second, "scaling: the measured window")
	fs.Float64Var(&cfg.scaling.rate, "scaling-rate", 200, "scaling: offered rate (calls/s) of the single-Enqueue probe during the window")
	fs.IntVar(&cfg.scaling.runs, "scaling-runs", 1, "scaling: measurements of each system and backlog (small then large, per run)")
	fs.BoolVar(&cfg.scaling.vacuum, "scaling-vacuum", true, "scaling: on PostgreSQL, VACUUM (ANALYZE) Fila's tables before each preload "+
		"(the dead tuples of earlier runs) and after it (standing in for the autovacuum the servers here have off); "+
		"on MySQL/MariaDB, wait before and after each preload until InnoDB's history list is empty (at most 2m)")
	fs.IntVar(&cfg.workflow.runs, "workflow-runs", 30, "workflow: chains of each kind (plain, workflow) per system")
	fs.IntVar(&cfg.workflow.steps, "workflow-steps", 10, "workflow: steps per chain")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of this process to the file (combine with --systems fila)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.brokers, err = pickList(*broker, allBrokers, optionalBrokers...); err != nil {
		return cfg, err
	}
	if cfg.scenarios, err = pickList(*scenario, allScenarios, optionalScenarios...); err != nil {
		return cfg, err
	}
	if *systems != "" {
		cfg.systems = strings.Split(*systems, ",")
	}
	switch *susPhases {
	case "both":
		cfg.susPhases = []bool{false, true}
	case "idle":
		cfg.susPhases = []bool{true}
	case "plain":
		cfg.susPhases = []bool{false}
	default:
		return cfg, fmt.Errorf("bad --sustained-phases %q: want both, idle or plain", *susPhases)
	}
	for _, f := range strings.Split(*burnConcs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("bad --burn-concurrency %q", f)
		}
		cfg.burnConcs = append(cfg.burnConcs, n)
	}
	for _, f := range strings.Split(*pgqueSubs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("bad --pgque-fanout-subs %q", f)
		}
		cfg.pgque.fanSubs = append(cfg.pgque.fanSubs, n)
	}
	if p := cfg.pgque; p.fanN < 1 || p.fanBatch < 1 || p.drainN < 1 || p.drainBatch < 1 || p.drainBatch > fila1000 ||
		p.tick <= 0 || p.poll <= 0 || p.limit <= 0 || p.rate <= 0 {
		return cfg, fmt.Errorf("bad --pgque-* setting: sizes, durations and the rate must be positive, --pgque-drain-batch at most %d", fila1000)
	}
	for _, f := range strings.Split(*fanoutSubs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("bad --fanout-subs %q", f)
		}
		cfg.fanoutSubs = append(cfg.fanoutSubs, n)
	}
	if cfg.fanoutDrainK < 1 || cfg.fanoutConc < 1 {
		return cfg, fmt.Errorf("bad --fanout-drain-subs %d or --fanout-concurrency %d: want at least 1", cfg.fanoutDrainK, cfg.fanoutConc)
	}
	if cfg.topicSus.stallAfter == 0 {
		cfg.topicSus.stallAfter = topicSusStallDefault(cfg.topicSus.dur)
	}
	if t := cfg.topicSus; t.rate <= 0 || t.dur <= 0 || t.interval <= 0 || t.stallAfter <= 0 || t.rotate < 0 {
		return cfg, fmt.Errorf("bad --topic-sus-* setting: the rate, duration, interval and stall time must be positive, the rotation interval not negative")
	}
	if sc := cfg.scaling; sc.small < 1 || sc.large < 1 || sc.largeRabbit < 1 || sc.conc < 1 || sc.warm < 0 || sc.window <= 0 || sc.rate <= 0 || sc.runs < 1 {
		return cfg, fmt.Errorf("bad --scaling-* setting: backlogs, concurrency, window, rate and runs must be positive, the warm-up not negative")
	}
	if w := cfg.workflow; w.runs < 1 || w.steps < 1 || w.steps > 1000 {
		return cfg, fmt.Errorf("bad --workflow-runs %d or --workflow-steps %d: want at least 1 (steps at most 1000)", w.runs, w.steps)
	}
	if cfg.rates, err = parseRates(*rates); err != nil {
		return cfg, err
	}
	if cfg.mongoRates, err = parseRates(*mongoRates); err != nil {
		return cfg, err
	}
	if cfg.delayRate <= 0 || cfg.delay < 0 {
		return cfg, fmt.Errorf("bad --delay-rate %v or --delay %v: want a positive rate and a delay of zero or more", cfg.delayRate, cfg.delay)
	}
	var p struct {
		enq, burnLimit, lat, sus time.Duration
		burnN, mongoBurnN, fanN  int
	}
	switch *preset {
	case "quick":
		p.enq, p.burnN, p.burnLimit, p.lat, p.sus, p.mongoBurnN = 3*time.Second, 5000, 15*time.Second, 10*time.Second, time.Minute, 300
		// The fan-out drain is longer than burn-down's 5,000: a queue that
		// drains at 80,000 msg/s would be done in 60 ms.
		p.fanN = 20_000
	case "full":
		p.enq, p.burnN, p.burnLimit, p.lat, p.sus, p.mongoBurnN = 10*time.Second, 100_000, 3*time.Minute, 30*time.Second, 10*time.Minute, 3000
		p.fanN = 100_000
	default:
		return cfg, fmt.Errorf("unknown --preset %q", *preset)
	}
	setDefault(&cfg.enqueueDur, p.enq)
	setDefault(&cfg.burnN, p.burnN)
	setDefault(&cfg.mongoBurnN, p.mongoBurnN)
	setDefault(&cfg.fanoutN, p.fanN)
	setDefault(&cfg.burnLimit, p.burnLimit)
	setDefault(&cfg.latencyDur, p.lat)
	setDefault(&cfg.susDur, p.sus)
	cfg.susConc = cfg.latencyConc
	cfg.topicSus.conc = cfg.latencyConc
	cfg.pgque.enqueueDur, cfg.pgque.latencyDur, cfg.pgque.latConc = cfg.enqueueDur, cfg.latencyDur, cfg.latencyConc
	return cfg, nil
}

func parseRates(v string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(v, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("bad rate %q", f)
		}
		out = append(out, r)
	}
	return out, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// pickList is the names of v: "all" (every name of all), or a
// comma-separated list of names of all or of extra (which "all" leaves out).
func pickList(v string, all []string, extra ...string) ([]string, error) {
	if v == "all" {
		return all, nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(all, f) && !slices.Contains(extra, f) {
			return nil, fmt.Errorf("unknown %q: want one of %s or all", f, strings.Join(append(slices.Clone(all), extra...), ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

func (cfg config) wants(scenario string) bool { return slices.Contains(cfg.scenarios, scenario) }

// named reports whether --systems names this word exactly: the systems that
// run only on request (fila-log) are built only then.
func (cfg config) named(word string) bool { return slices.Contains(cfg.systems, word) }

func (cfg config) keep(name string) bool {
	if len(cfg.systems) == 0 {
		return true
	}
	for _, w := range cfg.systems {
		if w != "" && strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// addParams appends query parameters to a URL.
func addParams(raw string, params ...string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.RawQuery
	for _, p := range params {
		if q != "" {
			q += "&"
		}
		q += p
	}
	u.RawQuery = q
	return u.String()
}
