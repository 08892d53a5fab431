package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// report is everything one run measured.
type report struct {
	results   []result
	fanPub    []fanoutPublish
	fanDrain  []fanoutDrain
	sustained []sustainedRun
	// pgque: the PgQue comparison's figures (scenario pgque), and its notes.
	pgque      []result
	pgqueNotes []string
	topicSus   *topicSusRun // scenario topic-sustained
	// scaling: the scaling scenario's measurements, and its notes (brokers
	// skipped).
	scaling      []scalingCase
	scalingNotes []string
	workflow     []workflowCase // scenario workflow
	started      time.Time
	delay        time.Duration // the delay scenario's Delay, for its row names
	took         time.Duration
}

// run measures every selected scenario on every selected broker, closing
// (and cleaning up) each broker's systems before the next broker starts.
func run(ctx context.Context, cfg config) (*report, error) {
	rep := &report{started: time.Now(), delay: cfg.delay}
	defer func() { rep.took = time.Since(rep.started) }()
	var errs []error
	if cfg.wants("pgque") {
		if err := pgqueComparison(ctx, cfg, rep); err != nil {
			logf("pgque comparison: %v", err)
			errs = append(errs, fmt.Errorf("pgque comparison: %w", err))
		}
	}
	if cfg.wants("topic-sustained") && ctx.Err() == nil {
		if err := topicSustained(ctx, cfg, rep); err != nil {
			logf("topic-sustained: %v", err)
			errs = append(errs, fmt.Errorf("topic-sustained: %w", err))
		}
	}
	// The brokers run the other scenarios; with none, none is connected.
	others := slices.ContainsFunc(cfg.scenarios, func(s string) bool { return !slices.Contains(standaloneScenarios, s) })
	for _, b := range cfg.brokers {
		if ctx.Err() != nil || !others {
			break
		}
		if err := runBroker(ctx, cfg, b, rep); err != nil {
			logf("%s: %v", b, err)
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
		}
	}
	return rep, errors.Join(errs...)
}

func runBroker(ctx context.Context, cfg config, broker string, rep *report) (err error) {
	if why := scalingSkip[broker]; why != "" && cfg.wants("scaling") {
		rep.scalingNotes = append(rep.scalingNotes, why)
		logf("%s", why)
		if !slices.ContainsFunc(cfg.scenarios, func(s string) bool { return s != "scaling" && !slices.Contains(standaloneScenarios, s) }) {
			return nil
		}
	}
	progress.set(broker + ": connecting")
	var systems []System
	var closeEnv func()
	var pg *pgEnv
	var my *mysqlEnv
	var late []System // filtered out, but closed last (they own cleanup clients)
	preloadBatch := 1000
	burnN, rates, fanN := cfg.burnN, cfg.rates, cfg.fanoutN
	add := func(s System, e error) {
		if e != nil {
			if err == nil {
				err = e
			}
			return
		}
		if cfg.keep(s.Name()) {
			systems = append(systems, s)
		} else {
			_ = s.Close(context.WithoutCancel(ctx))
		}
	}
	switch broker {
	case "postgres":
		e, perr := newPGEnv(ctx, cfg.pgURL)
		if perr != nil {
			return perr
		}
		pg = e
		closeEnv = e.pool.Close
		add(e.filaSystem(ctx))
		if cfg.named(filaLogName) {
			add(e.filaLogSystem(ctx))
		}
		add(e.rawSystem(ctx))
		add(e.riverSystem(ctx, 0))
		add(e.riverSystem(ctx, time.Millisecond))
	case "mysql":
		e, merr := newMySQLEnv(ctx, cfg.mysqlURL)
		if merr != nil {
			return merr
		}
		my = e
		closeEnv = func() { _ = e.db.Close() }
		add(e.filaSystem(ctx))
		add(e.rawSystem(ctx))
	case "redis":
		e, rerr := newRedisEnv(ctx, cfg.redisURL)
		if rerr != nil {
			return rerr
		}
		closeEnv = func() {}
		// The Fila system owns the cleanup client, so it closes last.
		f, ferr := e.filaSystem(ctx)
		add(e.rawSystem(ctx))
		add(e.asynqSystem(ctx, 0))
		add(e.asynqSystem(ctx, time.Millisecond))
		keepFirst(&systems, &late, f, ferr, &err, cfg)
	case "rabbitmq":
		e, aerr := newAMQPEnv(ctx, cfg.amqpURL)
		if aerr != nil {
			return aerr
		}
		closeEnv = func() {}
		f, ferr := e.filaSystem(ctx)
		add(e.rawSystem(ctx))
		keepFirst(&systems, &late, f, ferr, &err, cfg)
	case "memory":
		closeEnv = func() {}
		add(newFilaSystem(ctx, "mem://bench-"+randSuffix(), nil, nil))
	case "mongo":
		e, merr := newMongoEnv(ctx, cfg.mongoURL)
		if merr != nil {
			return merr
		}
		closeEnv = func() { _ = e.client.Disconnect(context.Background()) }
		add(e.filaSystem(ctx))
		add(e.rawSystem(ctx))
		preloadBatch = 100
		burnN, rates, fanN = cfg.mongoBurnN, cfg.mongoRates, cfg.mongoBurnN
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		// Close in reverse, so the Fila system (first) closes last.
		for i := len(systems) - 1; i >= 0; i-- {
			if cerr := systems[i].Close(cctx); cerr != nil {
				logf("%s %s close: %v", broker, systems[i].Name(), cerr)
			}
		}
		for _, s := range late {
			if cerr := s.Close(cctx); cerr != nil {
				logf("%s %s close: %v", broker, s.Name(), cerr)
			}
		}
		closeEnv()
	}()
	if err != nil {
		return err
	}
	var errs []error
	record := func(rs []result, e error) {
		rep.results = append(rep.results, rs...)
		if e != nil {
			logf("%s: %v", broker, e)
			errs = append(errs, e)
		}
	}
	for _, s := range systems {
		if cfg.wants("enqueue") {
			record(stamped(broker+" "+s.Name()+" enqueue", func() ([]result, error) {
				return enqueueScenario(ctx, broker, s, cfg.enqueueDur)
			}))
		}
	}
	// Burn-down and latency go case by case, every system in turn, so the
	// figures a ratio compares are seconds apart, not minutes: a load spike
	// from elsewhere then lands on both sides less often.
	if cfg.wants("burn-down") {
		for _, c := range cfg.burnConcs {
			n := burnN
			if broker != "mongo" {
				n = max(n, cfg.burnPerSlot*c)
			}
			for _, s := range systems {
				record(stamped(fmt.Sprintf("%s %s burn-down c=%d", broker, s.Name(), c), func() ([]result, error) {
					return burnDownScenario(ctx, broker, s, n, []int{c}, cfg.burnLimit, preloadBatch)
				}))
			}
		}
	}
	if cfg.wants("latency") {
		for _, rate := range rates {
			for _, s := range systems {
				record(stamped(fmt.Sprintf("%s %s latency %.0f/s", broker, s.Name(), rate), func() ([]result, error) {
					return latencyScenario(ctx, broker, s, []float64{rate}, cfg.latencyDur, cfg.latencyConc)
				}))
			}
		}
	}
	for _, s := range systems {
		if cfg.wants("delay") {
			rate := cfg.delayRate
			if broker == "mongo" {
				rate = min(rate, rates[0])
			}
			record(stamped(broker+" "+s.Name()+" delay", func() ([]result, error) {
				return delayScenario(ctx, broker, s, cfg.delay, rate, cfg.latencyDur, cfg.latencyConc)
			}))
		}
	}
	if cfg.wants("fanout") {
		for _, s := range systems {
			var pubs []fanoutPublish
			var drains []fanoutDrain
			var ferr error
			load := loadAround(broker+" "+s.Name()+" fan-out", func() {
				pubs, drains, ferr = fanoutScenario(ctx, broker, s, fanoutSettings{
					d: cfg.enqueueDur, subs: cfg.fanoutSubs, n: fanN, drainSubs: cfg.fanoutDrainK,
					conc: cfg.fanoutConc, limit: cfg.burnLimit, batch: preloadBatch,
				})
			})
			for i := range pubs {
				pubs[i].Load = load
			}
			for i := range drains {
				drains[i].Load = load
			}
			rep.fanPub = append(rep.fanPub, pubs...)
			rep.fanDrain = append(rep.fanDrain, drains...)
			if ferr != nil {
				logf("%s %s: %v", broker, s.Name(), ferr)
				errs = append(errs, fmt.Errorf("%s fanout: %w", s.Name(), ferr))
			}
		}
	}
	if cfg.wants("priority") {
		for _, s := range systems {
			record(stamped(broker+" "+s.Name()+" priority", func() ([]result, error) {
				return priorityScenario(ctx, broker, s, burnN, 10, cfg.burnLimit, preloadBatch)
			}))
		}
	}
	if cfg.wants("routing") {
		for _, s := range systems {
			record(stamped(broker+" "+s.Name()+" routing", func() ([]result, error) {
				return routingScenario(ctx, broker, s, cfg.enqueueDur)
			}))
		}
	}
	if cfg.wants("scaling") && scalingSkip[broker] == "" {
		var fila []System
		for _, s := range systems {
			if _, ok := s.(*filaSystem); ok {
				fila = append(fila, s)
			}
		}
		var settle func(context.Context, System) error
		if pg != nil && cfg.scaling.vacuum {
			settle = func(ctx context.Context, s System) error { return pg.analyzeTables(ctx, s.(*filaSystem).pgTables()) }
		}
		if my != nil && cfg.scaling.vacuum {
			settle = func(ctx context.Context, _ System) error { return my.waitPurge(ctx, 1, 2*time.Minute) }
		}
		if broker == "rabbitmq" && cfg.scaling.largeRabbit != cfg.scaling.large {
			rep.scalingNotes = append(rep.scalingNotes, fmt.Sprintf("RabbitMQ: the large backlog is %s (--scaling-large-rabbitmq), not %s: "+
				"a quorum queue of a million messages may raise the shared server's memory alarm", commas(int64(cfg.scaling.largeRabbit)), commas(int64(cfg.scaling.large))))
		}
		cases, serr := scalingScenario(ctx, broker, fila, cfg.scaling, settle)
		rep.scaling = append(rep.scaling, cases...)
		if serr != nil {
			logf("%s: %v", broker, serr)
			errs = append(errs, serr)
		}
	}
	if cfg.wants("workflow") {
		cases, werr := workflowScenario(ctx, broker, systems, cfg.workflow)
		rep.workflow = append(rep.workflow, cases...)
		if werr != nil {
			logf("%s: %v", broker, werr)
			errs = append(errs, werr)
		}
	}
	if broker == "postgres" && cfg.wants("sustained") {
		var sus []pgSustained
		for _, s := range systems {
			if h, ok := s.(pgSustained); ok {
				if _, isRaw := s.(*rawPG); isRaw {
					continue
				}
				if r, isRiver := s.(*riverSystem); isRiver && (r.cooldown == 0 || !cfg.susBaselines) {
					continue
				}
				sus = append(sus, h)
			}
		}
		runs, serr := sustainedScenario(ctx, pg, sus, cfg.susRate, cfg.susDur, cfg.susInterval, cfg.vacuumEvery, cfg.susConc, cfg.susPhases)
		rep.sustained = append(rep.sustained, runs...)
		if serr != nil {
			errs = append(errs, serr)
		}
	}
	if broker == "mysql" && cfg.wants("sustained") {
		var sus []*filaSystem
		for _, s := range systems {
			if f, ok := s.(*filaSystem); ok {
				sus = append(sus, f)
			}
		}
		runs, serr := mysqlSustainedScenario(ctx, my, sus, cfg.susRate, cfg.susDur, cfg.susInterval, cfg.susConc, cfg.susPhases)
		rep.sustained = append(rep.sustained, runs...)
		if serr != nil {
			errs = append(errs, serr)
		}
	}
	return errors.Join(errs...)
}

// keepFirst puts the Fila system first in systems (so it closes last: it
// owns the broker's cleanup client), or in late when --systems filters it
// out.
func keepFirst(systems, late *[]System, f *filaSystem, ferr error, err *error, cfg config) {
	switch {
	case ferr != nil:
		if *err == nil {
			*err = ferr
		}
	case cfg.keep(f.Name()):
		*systems = append([]System{f}, *systems...)
	default:
		*late = append(*late, f)
	}
}
