package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PgQue comparison (issue 37, scenario "pgque"): Fila's PostgreSQL log
// mode (fila_mode=log) and skip-locked mode against PgQue, on the same
// server in the same run, each system in a database of its own (created
// for the run, dropped at its end). Every case runs each system in turn, so
// the figures a ratio compares are seconds apart. The cases are those of
// the table:
//
//   - fan-out: N events published (batches of --pgque-fanout-batch, one
//     goroutine) to a topic with k subscriptions, each consumed meanwhile by
//     one batch consumer; WAL bytes per event (pg_current_wal_lsn() around
//     the publish, and around publish + consumption), rows inserted per
//     event (n_tup_ins of the system's schema, publish + consumption),
//     publish throughput, and the time from the first publish until every
//     subscription has consumed everything;
//   - drain: a backlog of --pgque-drain-n read by one consumer in batches
//     of up to --pgque-drain-batch, each batch acked as a whole;
//   - enqueue: the enqueue scenario's three cases (single calls from 1 and
//     8 goroutines, batches of 100);
//   - latency: send → handler start at --pgque-rate (the latency scenario;
//     Fila through its worker, PgQue through its consumer loop).
//
// A "topic" of PgQue is a queue, its subscriptions are consumers (cursors
// over the queue's one event log); Fila's are a topic and its subscription
// queues (fanout.go).

// cmpSystem is a system of the comparison.
type cmpSystem interface {
	fanouter
	// startBatch runs one consumer of the subscription (or the run's queue)
	// that takes up to max messages per call and acks each batch whole.
	startBatch(ctx context.Context, queue string, max int, onStart func([]byte)) (Consumer, error)
	// runQueue is the run's queue as startBatch names it.
	runQueue() string
	// connect reopens what disconnect closed.
	connect(ctx context.Context) error
	// disconnect closes every connection of the system, so their backends
	// exit and flush their table statistics.
	disconnect() error
}

func (s *filaSystem) runQueue() string  { return s.queue }
func (s *pgqueSystem) runQueue() string { return s.queue }

// batchPreloader is a system with its own way to fill the run's queue for a
// batch drain (PgQue: a tick after each send, so batches hold one send).
type batchPreloader interface {
	preloadBatches(ctx context.Context, n, batch int) error
}

// pgqueSettings are the comparison's sizes.
type pgqueSettings struct {
	sqlPath    string
	fanN       int
	fanSubs    []int
	fanBatch   int
	drainN     int
	drainBatch int
	tick, poll time.Duration
	limit      time.Duration
	enqueueDur time.Duration
	latencyDur time.Duration
	rate       float64
	latConc    int
}

// cmpEntry is one system of the comparison and its database.
type cmpEntry struct {
	sys    cmpSystem
	db     string
	schema string        // the schema whose tables' n_tup_ins are summed
	stats  *pgxpool.Pool // one connection to db, for LSNs and statistics
	close  func(ctx context.Context) error
}

// cmpCleanupApp is the application_name of the connections that only clean
// up (Fila's Teardown and Close).
const cmpCleanupApp = "fila-bench-cleanup"

// pgqueCmpBroker is the Broker of the comparison's results.
const pgqueCmpBroker = "postgres (PgQue comparison)"

// pgqueComparison runs the comparison and adds its figures to rep.
func pgqueComparison(ctx context.Context, cfg config, rep *report) (err error) {
	st := cfg.pgque
	progress.set("pgque comparison: connecting")
	admin, err := pgxpool.New(ctx, cfg.pgURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	var entries []*cmpEntry
	var dbs []string
	var createdRoles []string
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, e := range entries {
			if cerr := e.close(cctx); cerr != nil {
				logf("pgque comparison: %s close: %v", e.sys.Name(), cerr)
			}
			e.stats.Close()
		}
		for _, db := range dbs {
			if _, derr := admin.Exec(cctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{db}.Sanitize()+` WITH (FORCE)`); derr != nil {
				logf("pgque comparison: drop database %s: %v", db, derr)
			}
		}
		// PgQue's install creates three roles, which are the cluster's:
		// drop those this run created (none is left in use once its
		// database is gone).
		for _, r := range createdRoles {
			if _, derr := admin.Exec(cctx, `DROP ROLE IF EXISTS `+pgx.Identifier{r}.Sanitize()); derr != nil {
				logf("pgque comparison: drop role %s: %v", r, derr)
			}
		}
	}()
	newDB := func(name string) (string, *pgxpool.Pool, error) {
		if _, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			return "", nil, err
		}
		// template0: CREATE DATABASE from template1 fails while anyone else
		// on the shared server is connected to template1.
		if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE template0`); err != nil {
			return "", nil, err
		}
		dbs = append(dbs, name)
		u, err := withDatabase(cfg.pgURL, name)
		if err != nil {
			return "", nil, err
		}
		pc, err := pgxpool.ParseConfig(u)
		if err != nil {
			return "", nil, err
		}
		pc.MaxConns = 1
		stats, err := pgxpool.NewWithConfig(ctx, pc)
		return u, stats, err
	}
	addFila := func(name, db string, open func(*pgEnv) (*filaSystem, error)) error {
		if !cfg.keep(name) {
			return nil
		}
		u, stats, err := newDB(db)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// The pool Fila's system cleans up with is marked, so quiesce
		// does not wait for it (it deletes and drops, never inserts).
		pc, err := pgxpool.ParseConfig(u)
		if err != nil {
			stats.Close()
			return err
		}
		pc.ConnConfig.RuntimeParams["application_name"] = cmpCleanupApp
		cleanup, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			stats.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		env := &pgEnv{url: u, pool: cleanup, suffix: randSuffix()}
		s, err := open(env)
		if err != nil {
			env.pool.Close()
			stats.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		entries = append(entries, &cmpEntry{sys: s, db: db, schema: s.pgSchema, stats: stats,
			close: func(ctx context.Context) error {
				err := s.Close(ctx)
				env.pool.Close()
				return err
			}})
		return nil
	}
	pgqueNote := ""
	if cfg.keep("pgque") {
		if st.sqlPath == "" {
			pgqueNote = "PgQue skipped: pass --pgque-sql=/path/to/pgque/sql/pgque.sql (or set FILA_BENCH_PGQUE_SQL) to compare with it"
			logf("pgque comparison: %s", pgqueNote)
		} else {
			var before []string
			rows, err := admin.Query(ctx, `SELECT rolname FROM pg_roles WHERE rolname IN ('pgque_reader', 'pgque_writer', 'pgque_admin')`)
			if err == nil {
				before, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil {
				return err
			}
			u, stats, err := newDB("fila_bench_pgque")
			if err != nil {
				return fmt.Errorf("pgque: %w", err)
			}
			progress.set("pgque comparison: installing PgQue")
			err = installPgque(ctx, u, st.sqlPath)
			for _, r := range []string{"pgque_reader", "pgque_writer", "pgque_admin"} {
				if !slices.Contains(before, r) {
					createdRoles = append(createdRoles, r)
				}
			}
			if err != nil {
				stats.Close()
				return fmt.Errorf("pgque: %w", err)
			}
			s, err := newPgqueSystem(ctx, u, st.tick, st.poll)
			if err != nil {
				stats.Close()
				return fmt.Errorf("pgque: %w", err)
			}
			entries = append(entries, &cmpEntry{sys: s, db: "fila_bench_pgque", schema: "pgque", stats: stats, close: s.Close})
		}
	}
	if err := addFila(filaLogName, "fila_bench_fila_log", func(e *pgEnv) (*filaSystem, error) { return e.filaLogSystem(ctx) }); err != nil {
		return err
	}
	if err := addFila("fila", "fila_bench_fila", func(e *pgEnv) (*filaSystem, error) { return e.filaSystem(ctx) }); err != nil {
		return err
	}
	if pgqueNote != "" {
		rep.pgqueNotes = append(rep.pgqueNotes, pgqueNote)
	}

	var errs []error
	record := func(rs []result, e error) {
		rep.pgque = append(rep.pgque, rs...)
		if e != nil {
			logf("pgque comparison: %v", e)
			errs = append(errs, e)
		}
	}
	for _, k := range st.fanSubs {
		for _, e := range entries {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rs, err := stamped(fmt.Sprintf("pgque comparison: %s fan-out to %d", e.sys.Name(), k), func() ([]result, error) {
				return fanoutCmp(ctx, e, k, st)
			})
			if err != nil {
				err = fmt.Errorf("%s fan-out to %d: %w", e.sys.Name(), k, err)
			}
			record(rs, err)
		}
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rs, err := stamped("pgque comparison: "+e.sys.Name()+" drain", func() ([]result, error) {
			return drainCmp(ctx, e, st)
		})
		if err != nil {
			err = fmt.Errorf("%s drain: %w", e.sys.Name(), err)
		}
		record(rs, err)
	}
	for _, c := range enqueueCases {
		for _, e := range entries {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			record(stamped("pgque comparison: "+e.sys.Name()+" "+c.label, func() ([]result, error) {
				r, err := enqueueCaseRun(ctx, pgqueCmpBroker, e.sys, c, st.enqueueDur)
				return []result{r}, err
			}))
		}
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		record(stamped("pgque comparison: "+e.sys.Name()+" latency", func() ([]result, error) {
			return latencyScenario(ctx, pgqueCmpBroker, e.sys, []float64{st.rate}, st.latencyDur, st.latConc)
		}))
	}
	return errors.Join(errs...)
}

// withDatabase is raw with its database replaced by db.
func withDatabase(raw, db string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	u.Path = "/" + db
	return u.String(), nil
}

// walLSN is the server's current WAL position in bytes (the whole
// server's: other databases' writes count too, see backgroundWAL).
func (e *cmpEntry) walLSN(ctx context.Context) (int64, error) {
	var n int64
	err := e.stats.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&n)
	return n, err
}

// backgroundWAL is the server's WAL rate, in bytes/s, over d while this
// system is idle: what other databases on the shared server write.
func (e *cmpEntry) backgroundWAL(ctx context.Context, d time.Duration) (float64, error) {
	a, err := e.walLSN(ctx)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	sleepCtx(ctx, d)
	b, err := e.walLSN(ctx)
	return float64(b-a) / time.Since(start).Seconds(), err
}

// quiesce waits until no client connection to the database is left but the
// statistics one (a backend flushes its table statistics as it exits).
func (e *cmpEntry) quiesce(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := e.stats.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
	AND application_name <> $1`, cmpCleanupApp).Scan(&n)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d connections to %s still open after 10s", n, e.db)
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
}

// tupIns is the sum of n_tup_ins over the tables of the system's schema.
func (e *cmpEntry) tupIns(ctx context.Context) (int64, error) {
	var n int64
	err := e.stats.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1`, e.schema).Scan(&n)
	return n, err
}

// settledInserts closes the system's connections, waits for their backends
// to exit and returns tupIns; the system is reconnected after.
func (e *cmpEntry) settledInserts(ctx context.Context) (int64, error) {
	if err := e.sys.disconnect(); err != nil {
		return 0, err
	}
	if err := e.quiesce(ctx); err != nil {
		return 0, err
	}
	n, err := e.tupIns(ctx)
	if cerr := e.sys.connect(ctx); err == nil {
		err = cerr
	}
	return n, err
}

// bgNote says how much of a WAL-per-event figure the server's background
// rate could account for, when that is more than 2% of it.
func bgNote(bg float64, d time.Duration, events int, perEvent float64) string {
	share := bg * d.Seconds() / float64(events)
	if perEvent <= 0 || share < 0.02*perEvent {
		return ""
	}
	return fmt.Sprintf("other databases wrote %.0f kB/s of WAL just before: up to %.0f of these bytes per event", bg/1000, share)
}

// fanoutCmp is one fan-out case on one system.
func fanoutCmp(ctx context.Context, e *cmpEntry, k int, st pgqueSettings) (out []result, err error) {
	s, name := e.sys, e.sys.Name()
	label := fmt.Sprintf("fan-out, %s events to %d %s", commas(int64(st.fanN)), k, plural(k, "subscription"))
	progress.set(fmt.Sprintf("pgque comparison: %s, %s: subscribing", label, name))
	if err := s.Setup(ctx); err != nil {
		return nil, err
	}
	t, err := subscribeAll(ctx, s, k)
	defer func() {
		cctx := context.WithoutCancel(ctx)
		if cerr := s.connect(cctx); cerr != nil {
			logf("%s: %v", name, cerr)
		}
		if cerr := t.close(cctx); cerr != nil {
			logf("%s: %v", name, cerr)
		}
		if terr := s.Teardown(cctx); terr != nil {
			logf("%s teardown: %v", name, terr)
		}
	}()
	if err != nil {
		return nil, err
	}
	ins0, err := e.settledInserts(ctx)
	if err != nil {
		return nil, err
	}
	bg, err := e.backgroundWAL(ctx, time.Second)
	if err != nil {
		return nil, err
	}
	max := fila1000
	if _, ok := s.(*pgqueSystem); ok {
		max = math.MaxInt32 // the Go client's default: the whole batch
	}
	cons := make([]Consumer, 0, k)
	stopAll := func() {
		for _, c := range cons {
			if err := c.Stop(); err != nil {
				logf("%s stop: %v", name, err)
			}
		}
		cons = nil
	}
	defer stopAll()
	for _, q := range t.queues {
		c, err := s.startBatch(ctx, q, max, func([]byte) {})
		if err != nil {
			return nil, err
		}
		cons = append(cons, c)
	}
	total := int64(k) * int64(st.fanN)
	consumed := func() int64 {
		var sum int64
		for _, c := range cons {
			sum += min(c.Done(), int64(st.fanN))
		}
		return sum
	}
	progress.set(fmt.Sprintf("pgque comparison: %s, %s: publish", label, name))
	wal0, err := e.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	pub := publisher{s, t.topic, k}
	for left := st.fanN; left > 0; {
		b := min(st.fanBatch, left)
		bodies := make([][]byte, b)
		for i := range bodies {
			bodies[i] = makeBody(time.Now())
		}
		if err := pub.Enqueue(ctx, bodies); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		left -= b
		progress.setCount(int64(st.fanN-left), int64(st.fanN))
	}
	pubTook := time.Since(start)
	wal1, err := e.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	progress.set(fmt.Sprintf("pgque comparison: %s, %s: consume", label, name))
	for consumed() < total && time.Since(start) < st.limit && ctx.Err() == nil {
		progress.setCount(consumed(), total)
		time.Sleep(5 * time.Millisecond)
	}
	allTook := time.Since(start)
	got := consumed()
	wal2, err := e.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	stopAll()
	ins1, err := e.settledInserts(ctx)
	if err != nil {
		return nil, err
	}
	n := float64(st.fanN)
	mk := func(what string, v float64, unit string, higher bool, note string) {
		out = append(out, result{Broker: pgqueCmpBroker, Scenario: label + ": " + what, System: name,
			Value: v, Unit: unit, Higher: higher, Note: note})
	}
	walPub := float64(wal1-wal0) / n
	walAll := float64(wal2-wal0) / n
	mk("WAL bytes per event, publish", walPub, "B", false, bgNote(bg, pubTook, st.fanN, walPub))
	mk("WAL bytes per event, publish and consume", walAll, "B", false, bgNote(bg, allTook, st.fanN, walAll))
	mk("rows inserted per event, publish and consume", float64(ins1-ins0)/n, "rows", false, "")
	mk("publish throughput", n/pubTook.Seconds(), "events/s", true, "")
	note := ""
	if got < total {
		note = fmt.Sprintf("stopped at the %v limit: %d of %d consumed", st.limit, got, total)
	}
	mk("until every subscription consumed everything", allTook.Seconds(), "s", false, note)
	return out, nil
}

// fila1000 is the most messages Fila's Receive returns (fila.MaxReceive).
const fila1000 = 1000

// drainCmp preloads the run's queue and drains it with one batch consumer.
func drainCmp(ctx context.Context, e *cmpEntry, st pgqueSettings) ([]result, error) {
	s, name := e.sys, e.sys.Name()
	label := fmt.Sprintf("drain a backlog of %s, one consumer, batches of up to %s", commas(int64(st.drainN)), commas(int64(st.drainBatch)))
	if err := s.Setup(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if terr := s.Teardown(context.WithoutCancel(ctx)); terr != nil {
			logf("%s teardown: %v", name, terr)
		}
	}()
	progress.set(fmt.Sprintf("pgque comparison: %s: preload %d", name, st.drainN))
	var err error
	if p, ok := s.(batchPreloader); ok {
		err = p.preloadBatches(ctx, st.drainN, st.drainBatch)
	} else {
		err = preload(ctx, s, st.drainN, st.drainBatch)
	}
	if err != nil {
		return nil, fmt.Errorf("preload: %w", err)
	}
	progress.set(fmt.Sprintf("pgque comparison: %s: %s", name, label))
	wal0, err := e.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	c, err := s.startBatch(ctx, s.runQueue(), st.drainBatch, func([]byte) {})
	if err != nil {
		return nil, err
	}
	n := int64(st.drainN)
	for c.Done() < n && time.Since(start) < st.limit && ctx.Err() == nil {
		progress.setCount(c.Done(), n)
		time.Sleep(2 * time.Millisecond)
	}
	el := time.Since(start)
	done := c.Done()
	wal1, werr := e.walLSN(ctx)
	if err := c.Stop(); err != nil {
		logf("%s stop: %v", name, err)
	}
	if werr != nil {
		return nil, werr
	}
	note := ""
	if done < n {
		note = fmt.Sprintf("stopped at the %v limit: %d of %d done", st.limit, done, n)
	}
	return []result{
		{Broker: pgqueCmpBroker, Scenario: label, System: name, Value: float64(done) / el.Seconds(), Unit: "msg/s", Higher: true, Note: note},
		{Broker: pgqueCmpBroker, Scenario: label + ": WAL bytes per message", System: name, Value: float64(wal1-wal0) / float64(max(done, 1)), Unit: "B"},
	}, nil
}

// pgqueMarkdown renders the comparison: one row per figure, PgQue then
// Fila's two modes, then each mode's figure divided by PgQue's.
func pgqueMarkdown(rs []result, notes []string, cfg config) string {
	st := cfg.pgque
	var b strings.Builder
	fmt.Fprintf(&b, "### PostgreSQL: Fila against PgQue (issue 37)\n\n"+
		"Each system in a database of its own on the same server, each case run by every system in turn. "+
		"Fan-out: %s events in batches of %d from one goroutine, each subscription consumed meanwhile by one batch consumer "+
		"(Fila: Receive/AckReceive of up to %d; PgQue: receive of the whole batch, ack); WAL from pg_current_wal_lsn() "+
		"(the whole server's), rows from n_tup_ins of the system's schema. Drain: %s preloaded, one consumer, batches of up to %d "+
		"(PgQue: one tick per send of %d). Enqueue: %v per case. Latency: %.0f msg/s for %v, Fila's worker at concurrency %d, "+
		"PgQue's consumer loop polling every %v; PgQue ticks every %v. "+
		"Quotients are the Fila figure divided by PgQue's: above 1 is better for Fila in throughput, worse in bytes, rows, "+
		"seconds and milliseconds.\n\n",
		commas(int64(st.fanN)), st.fanBatch, fila1000, commas(int64(st.drainN)), st.drainBatch, st.drainBatch,
		st.enqueueDur, st.rate, st.latencyDur, st.latConc, st.poll, st.tick)
	systems := []string{"pgque", filaLogName, "fila"}
	var rows []string
	for _, r := range rs {
		if !slices.Contains(rows, r.Scenario) {
			rows = append(rows, r.Scenario)
		}
	}
	find := func(row, sys string) (result, bool) {
		for _, r := range rs {
			if r.Scenario == row && r.System == sys {
				return r, true
			}
		}
		return result{}, false
	}
	b.WriteString("| figure | unit | PgQue | Fila log | Fila skip-locked | log ÷ PgQue | skip-locked ÷ PgQue |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, row := range rows {
		unit := ""
		cells := make([]string, 0, 5)
		for _, sys := range systems {
			r, ok := find(row, sys)
			if !ok {
				cells = append(cells, "")
				continue
			}
			unit = r.Unit
			c := cmpFormat(r.Value, r.Unit)
			if r.Skipped {
				c = "n/a"
			}
			if r.Note != "" {
				c += "*"
				notes = append(notes, fmt.Sprintf("%s, %s: %s", row, sys, r.Note))
			}
			if underLoad(r) {
				c += loadMark
				notes = append(notes, loadNote(row+", "+sys, r))
			}
			cells = append(cells, c)
		}
		base, hasBase := find(row, "pgque")
		for _, sys := range systems[1:] {
			r, ok := find(row, sys)
			if !ok || !hasBase || base.Value <= 0 || r.Skipped || base.Skipped {
				cells = append(cells, "")
				continue
			}
			cells = append(cells, fmt.Sprintf("×%.2f", r.Value/base.Value))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row, unit, strings.Join(cells, " | "))
	}
	b.WriteString("\n")
	if len(notes) > 0 {
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cmpFormat(v float64, unit string) string {
	switch unit {
	case "ms":
		return formatValue(v, unit)
	case "s", "rows":
		return fmt.Sprintf("%.2f", v)
	}
	return commas(int64(math.Round(v)))
}
