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
	DeadTup    int64   // n_dead_tup of the hot table
	SizeBytes  int64   // pg_total_relation_size of the hot table
}

// sustainedRun is the samples of one system in one phase.
type sustainedRun struct {
	System  string
	Phase   string // "no idle transaction" or "idle REPEATABLE READ transaction open"
	Samples []sample
	Note    string
}

// pgHotTable names a Postgres system's hot table, for n_dead_tup and size.
type pgHotTable interface {
	System
	hotTable() (schema, table string)
}

func (s *filaSystem) hotTable() (string, string)  { return s.pgSchema, "messages" }
func (s *riverSystem) hotTable() (string, string) { return s.schema, "river_job" }
func (s *rawPG) hotTable() (string, string)       { return s.schema, "jobs" }

// sustainedScenario runs a fixed offered rate for d on each system, sampling
// every interval, first without and then with an idle REPEATABLE READ
// transaction held open on another connection (which pins the xmin horizon,
// so VACUUM cannot remove the dead tuples of deleted or updated rows).
//
// Dead tuples are only removed by vacuum: where the server runs with
// autovacuum=off (as this project's CI configuration does), vacuumEvery > 0
// runs a plain VACUUM of the hot table at that interval in its place.
func sustainedScenario(ctx context.Context, env *pgEnv, systems []pgHotTable, rate float64, d, interval, vacuumEvery time.Duration, c int) ([]sustainedRun, error) {
	var out []sustainedRun
	var av string
	_ = env.pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&av)
	if av == "off" && vacuumEvery <= 0 {
		logf("postgres: the server runs with autovacuum=off and --vacuum-every is 0: nothing removes dead tuples")
	}
	for _, s := range systems {
		for _, idle := range []bool{false, true} {
			run, err := sustainedOnce(ctx, env, s, rate, d, interval, vacuumEvery, c, idle)
			run.Note = joinNote(fmt.Sprintf("server autovacuum=%s", av), run.Note)
			if vacuumEvery > 0 {
				run.Note = joinNote(run.Note, fmt.Sprintf("VACUUM of the hot table every %v", vacuumEvery))
			}
			if err != nil {
				return out, fmt.Errorf("%s: %w", s.Name(), err)
			}
			out = append(out, run)
		}
	}
	return out, nil
}

func sustainedOnce(ctx context.Context, env *pgEnv, s pgHotTable, rate float64, d, interval, vacuumEvery time.Duration, c int, idle bool) (sustainedRun, error) {
	run := sustainedRun{System: s.Name(), Phase: "no idle transaction"}
	if idle {
		run.Phase = "idle REPEATABLE READ transaction open"
	}
	if err := s.Setup(ctx); err != nil {
		return run, err
	}
	defer func() {
		if err := s.Teardown(context.WithoutCancel(ctx)); err != nil {
			logf("%s teardown: %v", s.Name(), err)
		}
	}()
	schema, table := s.hotTable()
	// Start from a vacuumed table, so dead tuples left by earlier scenarios
	// do not count.
	if _, err := env.pool.Exec(ctx, `VACUUM `+schema+`.`+table); err != nil {
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
		// transaction holds back the xmin horizon while it sits idle.
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.`+table).Scan(&n); err != nil {
			return run, err
		}
	}
	start := time.Now().Add(200 * time.Millisecond)
	rec := newLatencyRecorder(start)
	cons, err := s.Start(ctx, c, rec.onStart)
	if err != nil {
		return run, err
	}
	pctx, stopProd := context.WithCancel(ctx)
	prod := startProducer(pctx, s, rate, start, d, 32)
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
			case <-pctx.Done():
				return
			case <-t.C:
				if _, err := env.pool.Exec(pctx, `VACUUM `+schema+`.`+table); err != nil && pctx.Err() == nil {
					logf("vacuum: %v", err)
				}
			}
		}
	}()
	progress.set(fmt.Sprintf("postgres %s: sustained %.0f msg/s, %s", s.Name(), rate, run.Phase))
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
		}
		_ = env.pool.QueryRow(ctx, `SELECT coalesce(n_dead_tup, 0), pg_total_relation_size(relid)
			FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2`, schema, table).Scan(&smp.DeadTup, &smp.SizeBytes)
		run.Samples = append(run.Samples, smp)
		progress.set(fmt.Sprintf("postgres %s: sustained, %s: t=%v %.0f msg/s backlog %d p95 %.1fms dead %d",
			s.Name(), run.Phase, smp.At, smp.Throughput, smp.Backlog, smp.P95ms, smp.DeadTup))
		lastDone, lastT = done, now
	}
	stopProd()
	prod.wg.Wait()
	<-vacDone
	if err := cons.Stop(); err != nil {
		logf("%s stop: %v", s.Name(), err)
	}
	if f := prod.failed.Load(); f > 0 {
		run.Note = fmt.Sprintf("%d enqueues failed", f)
	}
	return run, nil
}

// sustainedMarkdown renders the sustained samples.
func sustainedMarkdown(runs []sustainedRun, rate float64, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### PostgreSQL sustained: %.0f msg/s offered for %v per phase\n\n", rate, d)
	for _, r := range runs {
		fmt.Fprintf(&b, "**%s**, %s", r.System, r.Phase)
		if r.Note != "" {
			fmt.Fprintf(&b, " (%s)", r.Note)
		}
		b.WriteString("\n\n| t | throughput msg/s | backlog | p95 ms | n_dead_tup | table size |\n|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range r.Samples {
			fmt.Fprintf(&b, "| %v | %.0f | %d | %.1f | %d | %s |\n", s.At, s.Throughput, s.Backlog, s.P95ms, s.DeadTup, humanBytes(s.SizeBytes))
		}
		b.WriteString("\n")
	}
	return b.String()
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
