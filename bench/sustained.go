package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// sample is one 10-second sample of a sustained run.
type sample struct {
	At         time.Duration
	Throughput float64 // acks per second in the interval
	Backlog    int64   // enqueued minus acked
	P95ms      float64 // p95 enqueue-to-start in the interval
	DeadTup    int64   // n_dead_tup summed over the system's tables (PostgreSQL)
	HistLen    int64   // InnoDB's history list length, server-wide (MySQL/MariaDB)
	SizeBytes  int64   // pg_total_relation_size (MySQL: data_length + index_length) summed over the system's tables
	Load       float64 // the machine's 1-minute load average at the sample (-1 unknown, 0 not read)
}

// sustainedRun is the samples of one system in one phase.
type sustainedRun struct {
	Broker  string // "mysql", or "" for PostgreSQL
	System  string
	Phase   string // "no idle transaction" or "idle REPEATABLE READ transaction open"
	Tables  string // the tables summed, as "schema: a, b, c"
	Samples []sample
	Note    string
}

// pgTableSet is the tables of one Postgres system: those of Schema whose
// name starts with Prefix, or, with Exclude, those whose name does not.
// Partitions are listed in pg_stat_user_tables under their own names, which
// start with their parent's, so a prefix takes them in too.
type pgTableSet struct {
	Schema, Prefix string
	Exclude        bool
}

func (t pgTableSet) String() string {
	switch {
	case t.Prefix == "":
		return "every table of schema " + t.Schema
	case t.Exclude:
		return "every table of schema " + t.Schema + " not named " + t.Prefix + "*"
	}
	return "every table of schema " + t.Schema + " named " + t.Prefix + "*"
}

// pgTableWhere selects a pgTableSet in pg_stat_user_tables, given $1 the
// schema, $2 the prefix and $3 Exclude.
const pgTableWhere = `schemaname = $1 AND starts_with(relname, $2) <> $3`

// pgSustained is a Postgres system whose tables the sustained run watches.
type pgSustained interface {
	System
	pgTables() pgTableSet
}

// pgTables: Fila's SKIP LOCKED mode uses every table of its schema but the
// log mode's (log_*), the log mode those only.
func (s *filaSystem) pgTables() pgTableSet {
	return pgTableSet{Schema: s.pgSchema, Prefix: "log_", Exclude: !s.pgLog}
}
func (s *riverSystem) pgTables() pgTableSet { return pgTableSet{Schema: s.schema} }
func (s *rawPG) pgTables() pgTableSet       { return pgTableSet{Schema: s.schema} }

// tableNames lists a pgTableSet's tables, sorted.
func (e *pgEnv) tableNames(ctx context.Context, t pgTableSet) ([]string, error) {
	rows, err := e.pool.Query(ctx, `SELECT relname FROM pg_stat_user_tables WHERE `+pgTableWhere+` ORDER BY relname`,
		t.Schema, t.Prefix, t.Exclude)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// vacuumTables runs one plain VACUUM over every table of t, except Fila's
// log-mode tables (log_*): they have no dead tuples to remove, and a VACUUM
// of a still empty partition records it as empty, which makes the plans the
// driver caches while it is small sequential scans (its migration turns
// autovacuum off on them for that reason).
func (e *pgEnv) vacuumTables(ctx context.Context, t pgTableSet) error {
	names, err := e.tableNames(ctx, t)
	if err != nil || len(names) == 0 {
		return err
	}
	q := make([]string, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, "log_") {
			continue
		}
		q = append(q, pgx.Identifier{t.Schema, n}.Sanitize())
	}
	if len(q) == 0 {
		return nil
	}
	_, err = e.pool.Exec(ctx, `VACUUM `+strings.Join(q, ", "))
	return err
}

// sustainedScenario runs a fixed offered rate for d on each system, sampling
// every interval, in each of phases: false without and true with an idle
// REPEATABLE READ transaction held open on another connection (which pins
// the xmin horizon, so VACUUM cannot remove the dead tuples of deleted or
// updated rows).
//
// Dead tuples and size are summed over every table of the system (see
// pgTables). Dead tuples are only removed by vacuum: where the server runs
// with autovacuum=off (as this project's CI configuration does),
// vacuumEvery > 0 runs a plain VACUUM of those tables at that interval in its
// place.
func sustainedScenario(ctx context.Context, env *pgEnv, systems []pgSustained, rate float64, d, interval, vacuumEvery time.Duration, c int, phases []bool) ([]sustainedRun, error) {
	var out []sustainedRun
	var av string
	_ = env.pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&av)
	if av == "off" && vacuumEvery <= 0 {
		logf("postgres: the server runs with autovacuum=off and --vacuum-every is 0: nothing removes dead tuples")
	}
	for _, s := range systems {
		for _, idle := range phases {
			run, err := sustainedOnce(ctx, env, s, rate, d, interval, vacuumEvery, c, idle)
			run.Note = joinNote(fmt.Sprintf("server autovacuum=%s", av), run.Note)
			if vacuumEvery > 0 {
				run.Note = joinNote(run.Note, fmt.Sprintf("VACUUM of the system's tables every %v", vacuumEvery))
			}
			if err != nil {
				return out, fmt.Errorf("%s: %w", s.Name(), err)
			}
			out = append(out, run)
		}
	}
	return out, nil
}

func sustainedOnce(ctx context.Context, env *pgEnv, s pgSustained, rate float64, d, interval, vacuumEvery time.Duration, c int, idle bool) (sustainedRun, error) {
	run := sustainedRun{System: s.Name(), Phase: susPhaseName(idle)}
	if err := s.Setup(ctx); err != nil {
		return run, err
	}
	defer func() {
		if err := s.Teardown(context.WithoutCancel(ctx)); err != nil {
			logf("%s teardown: %v", s.Name(), err)
		}
	}()
	tables := s.pgTables()
	// Start from vacuumed tables, so dead tuples left by earlier scenarios
	// do not count.
	if err := env.vacuumTables(ctx, tables); err != nil {
		return run, err
	}
	if idle {
		conn, err := pgx.Connect(ctx, env.url)
		if err != nil {
			return run, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			return run, err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		// The snapshot is taken at the first statement; from then on the
		// transaction holds back the xmin horizon (of the whole database)
		// while it sits idle.
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables WHERE `+pgTableWhere,
			tables.Schema, tables.Prefix, tables.Exclude).Scan(&n); err != nil {
			return run, err
		}
	}
	vctx, stopVacuum := context.WithCancel(ctx)
	vacDone := make(chan struct{})
	go func() {
		defer close(vacDone)
		if vacuumEvery <= 0 {
			return
		}
		t := time.NewTicker(vacuumEvery)
		defer t.Stop()
		for {
			select {
			case <-vctx.Done():
				return
			case <-t.C:
				if err := env.vacuumTables(vctx, tables); err != nil && vctx.Err() == nil {
					logf("vacuum: %v", err)
				}
			}
		}
	}()
	err := sustainedDrive(ctx, "postgres", s, rate, d, interval, c, &run, func(ctx context.Context, smp *sample) string {
		var names string
		_ = env.pool.QueryRow(ctx, `SELECT coalesce(sum(n_dead_tup), 0)::bigint,
				coalesce(sum(pg_total_relation_size(relid)), 0)::bigint,
				coalesce(string_agg(relname, ', ' ORDER BY relname), '')
			FROM pg_stat_user_tables WHERE `+pgTableWhere, tables.Schema, tables.Prefix, tables.Exclude).
			Scan(&smp.DeadTup, &smp.SizeBytes, &names)
		if names != "" {
			run.Tables = tables.Schema + ": " + names
		}
		return fmt.Sprintf("dead %d size %s", smp.DeadTup, humanBytes(smp.SizeBytes))
	})
	stopVacuum()
	<-vacDone
	if run.Tables == "" {
		run.Tables = tables.String()
	}
	return run, err
}

func susPhaseName(idle bool) string {
	if idle {
		return "idle REPEATABLE READ transaction open"
	}
	return "no idle transaction"
}

// sustainedDrive offers rate to s for d with consumers at concurrency c,
// appending a sample to run every interval: throughput, backlog and p95 of
// the interval, then whatever probe adds (the broker's table statistics),
// whose text goes to the progress line.
func sustainedDrive(ctx context.Context, broker string, s System, rate float64, d, interval time.Duration, c int,
	run *sustainedRun, probe func(ctx context.Context, smp *sample) string) error {
	start := time.Now().Add(200 * time.Millisecond)
	rec := newLatencyRecorder(start)
	cons, err := s.Start(ctx, c, rec.onStart)
	if err != nil {
		return err
	}
	pctx, stopProd := context.WithCancel(ctx)
	prod := startProducer(pctx, s, rate, start, d, 32)
	progress.set(fmt.Sprintf("%s %s: sustained %.0f msg/s, %s", broker, s.Name(), rate, run.Phase))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastDone int64
	lastT := start
	end := start.Add(d)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		now := time.Now()
		if now.After(end.Add(interval / 2)) {
			break
		}
		done := cons.Done()
		rec.mu.Lock()
		p95 := float64(rec.window.ValueAtQuantile(95)) / 1000
		rec.window.Reset()
		rec.mu.Unlock()
		smp := sample{
			At:         now.Sub(start).Round(time.Second),
			Throughput: float64(done-lastDone) / now.Sub(lastT).Seconds(),
			Backlog:    prod.sent.Load() - done,
			P95ms:      p95,
			Load:       loadAvg1(),
		}
		detail := probe(ctx, &smp)
		run.Samples = append(run.Samples, smp)
		progress.set(fmt.Sprintf("%s %s: sustained, %s: t=%v %.0f msg/s backlog %d p95 %.1fms %s",
			broker, s.Name(), run.Phase, smp.At, smp.Throughput, smp.Backlog, smp.P95ms, detail))
		lastDone, lastT = done, now
	}
	stopProd()
	prod.wg.Wait()
	if err := cons.Stop(); err != nil {
		logf("%s stop: %v", s.Name(), err)
	}
	if f := prod.failed.Load(); f > 0 {
		run.Note = joinNote(run.Note, fmt.Sprintf("%d enqueues failed", f))
	}
	return nil
}

// sustainedSummary is one run's figures in a line: the peak of the summed
// dead tuples (MySQL: of the history list length), the summed size at the
// first and last sample, the mean throughput against the offered rate, the
// range of the per-sample p95, and whether throughput held (mean at least
// 98% of the offered rate and the backlog at the end under one interval's
// worth of messages).
func sustainedSummary(r sustainedRun, rate float64) string {
	if len(r.Samples) == 0 {
		return "no samples"
	}
	garbage, what := func(s sample) int64 { return s.DeadTup }, "dead tuples"
	if r.Broker == "mysql" {
		garbage, what = func(s sample) int64 { return s.HistLen }, "history list length"
	}
	var peak sample
	var sum float64
	minTP, minP, maxP := r.Samples[0].Throughput, r.Samples[0].P95ms, r.Samples[0].P95ms
	for i, s := range r.Samples {
		if i == 0 || garbage(s) > garbage(peak) {
			peak = s
		}
		sum += s.Throughput
		minTP, minP, maxP = min(minTP, s.Throughput), min(minP, s.P95ms), max(maxP, s.P95ms)
	}
	first, last := r.Samples[0], r.Samples[len(r.Samples)-1]
	mean := sum / float64(len(r.Samples))
	interval := first.At
	if len(r.Samples) > 1 {
		interval = r.Samples[1].At - first.At
	}
	held := "held"
	if mean < 0.98*rate || float64(last.Backlog) > rate*max(interval, time.Second).Seconds() {
		held = "did not hold"
	}
	return fmt.Sprintf("max %s %d (at %v); size %s at %v → %s at %v; throughput mean %.0f msg/s (min sample %.0f) of %.0f offered, backlog at end %d: %s; p95 per sample %.1f–%.1f ms",
		what, garbage(peak), peak.At, humanBytes(first.SizeBytes), first.At, humanBytes(last.SizeBytes), last.At,
		mean, minTP, rate, last.Backlog, held, minP, maxP)
}

// sustainedMarkdown renders the sustained samples, PostgreSQL's runs and
// then MySQL's.
func sustainedMarkdown(runs []sustainedRun, rate float64, d time.Duration) string {
	var pg, my []sustainedRun
	for _, r := range runs {
		if r.Broker == "mysql" {
			my = append(my, r)
		} else {
			pg = append(pg, r)
		}
	}
	var b strings.Builder
	if len(pg) > 0 {
		fmt.Fprintf(&b, "### PostgreSQL sustained: %.0f msg/s offered for %v per phase\n\n", rate, d)
		b.WriteString("Dead tuples (n_dead_tup) and size (pg_total_relation_size: heap, indexes, TOAST) are summed over every table of the system, listed under each run. " +
			"Load is the machine's 1-minute load average at the sample, marked " + loadMark + " above the number of CPUs.\n\n")
		sustainedRuns(&b, pg, rate, "n_dead_tup (sum)", func(s sample) int64 { return s.DeadTup })
	}
	if len(my) > 0 {
		fmt.Fprintf(&b, "### MySQL / MariaDB sustained: %.0f msg/s offered for %v per phase\n\n", rate, d)
		b.WriteString("History list length is InnoDB's count of undo logs not yet purged, server-wide " +
			"(information_schema.INNODB_METRICS trx_rseg_history_len); size is data_length + index_length of every table of the system's database " +
			"(InnoDB's estimate, refreshed with its statistics). " +
			"Load is the machine's 1-minute load average at the sample, marked " + loadMark + " above the number of CPUs.\n\n")
		sustainedRuns(&b, my, rate, "history list length", func(s sample) int64 { return s.HistLen })
	}
	return b.String()
}

func sustainedRuns(b *strings.Builder, runs []sustainedRun, rate float64, garbageCol string, garbage func(sample) int64) {
	for _, r := range runs {
		fmt.Fprintf(b, "**%s**, %s", r.System, r.Phase)
		if r.Note != "" {
			fmt.Fprintf(b, " (%s)", r.Note)
		}
		fmt.Fprintf(b, "\n\nTables summed: %s.\n\nSummary: %s.\n", r.Tables, sustainedSummary(r, rate))
		fmt.Fprintf(b, "\n| t | throughput msg/s | backlog | p95 ms | %s | size (sum) | load |\n|---:|---:|---:|---:|---:|---:|---:|\n", garbageCol)
		for _, s := range r.Samples {
			load := fmtLoad(s.Load)
			if underLoad(result{LoadBefore: s.Load}) {
				load += loadMark
			}
			fmt.Fprintf(b, "| %v | %.0f | %d | %.1f | %d | %s | %s |\n", s.At, s.Throughput, s.Backlog, s.P95ms, garbage(s), humanBytes(s.SizeBytes), load)
		}
		b.WriteString("\n")
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
