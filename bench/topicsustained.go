package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The topic-sustained scenario (not in "all"): Fila's PostgreSQL log mode
// (fila_mode=log) only, in a database of its own (created for the run,
// dropped at its end). One topic with topicSusSubs subscriptions, each
// consumed by its own worker; a publisher sends single Publish calls of
// 64-byte bodies at a fixed rate; after --topic-sus-stall-after the
// consumer of one subscription stops, and the others go on. An idle
// REPEATABLE READ transaction is held open on another connection of the
// same database for the whole run (as in the sustained scenario's idle
// phase), pinning the xmin horizon.
//
// Every interval it samples each subscription's lag (QueueStats Ready:
// its unread and ready events), the rate each subscription acked in the
// interval, the dead tuples and size summed over the log mode's tables
// (log_* of the schema, partitions included), and the driver's warning
// about a subscription that is not keeping up, counted by the handler of
// the logger Fila is opened with (fila.WithLogger, which reaches the driver
// as backend.OpenOptions.Logger).

// topicSusSubs is the number of subscriptions of the topic; the last one
// stalls.
const topicSusSubs = 5

// topicSusDB starts the name of the scenario's database. Each run makes
// its own (the name ends in a random suffix), so two runs on one server do
// not drop each other's; a run that is killed leaves its database behind.
const topicSusDB = "fila_bench_topic_sustained_"

// topicSusSettings are the scenario's flags.
type topicSusSettings struct {
	rate       float64
	dur        time.Duration
	stallAfter time.Duration // set by parseFlags: 10m, or a third of dur when dur < 30m
	interval   time.Duration
	rotate     time.Duration // fila_rotate_interval; 0: the driver's default (1m)
	conc       int           // worker concurrency per subscription
}

// topicSusStallDefault is the stall time when --topic-sus-stall-after is
// not given: 10m, or a third of the duration when that is under 30m.
func topicSusStallDefault(dur time.Duration) time.Duration {
	if dur < 30*time.Minute {
		return dur / 3
	}
	return 10 * time.Minute
}

// topicSusSample is one sample of the run.
type topicSusSample struct {
	At        time.Duration
	Lag       []int64   // per subscription: QueueStats Ready; -1 when the call failed
	Rate      []float64 // per subscription: acks per second in the interval
	P95ms     float64   // live subscriptions: p95 publish-to-handler start in the interval
	PubRate   float64   // publishes per second in the interval
	DeadTup   int64     // n_dead_tup summed over the log tables
	SizeBytes int64     // pg_total_relation_size summed over the log tables
	Warnings  int64     // lag warnings logged so far
	// Sent and StalledDone: publishes so far and the stalled subscription's
	// acks so far; its lag should be about their difference.
	Sent, StalledDone int64
	Load1             float64 // the machine's 1-minute load average (-1: unknown)
	// Gen and GenAge: the log mode's current generation (log_state.cur)
	// and the time since it became current, i.e. since the last rotation
	// (-1: not read). Copied: a copy is done and waits for its TRUNCATE.
	Gen    int
	GenAge time.Duration
	Copied bool
}

// topicSusRun is what the scenario measured.
type topicSusRun struct {
	st        topicSusSettings
	Start     time.Time     // the publish schedule's start; sample times count from it
	Subs      []string      // subscription queues, in order
	Stalled   int           // index of the stalled subscription in Subs
	StalledAt time.Duration // when its consumer was told to stop
	StopTook  time.Duration // how long that consumer's Stop took
	Samples   []topicSusSample
	Tables    string
	Warn      lagWarnSnapshot
	Notes     []string
}

// lagWarnPrefix starts the driver's warning about a lagging subscription
// (postgres/logmode.go, warnLag).
const lagWarnPrefix = "postgres log mode: a topic subscription is not keeping up"

// lagWarnCounter counts the driver's warnings: the lag warnings, with the
// time each subscription was first named, and every other warning by its
// message.
type lagWarnCounter struct {
	mu     sync.Mutex
	count  int64
	first  map[string]time.Time // subscription → first lag warning naming it
	named  map[string]int64     // subscription → lag warnings naming it
	others map[string]int64     // any other record at Warn or above → count
}

func newLagWarnCounter() *lagWarnCounter {
	return &lagWarnCounter{first: map[string]time.Time{}, named: map[string]int64{}, others: map[string]int64{}}
}

func (c *lagWarnCounter) record(r slog.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.HasPrefix(r.Message, lagWarnPrefix) {
		if r.Level >= slog.LevelWarn {
			c.others[r.Message]++
		}
		return
	}
	c.count++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "subscription" {
			return true
		}
		q := a.Value.String()
		c.named[q]++
		if _, ok := c.first[q]; !ok {
			at := r.Time
			if at.IsZero() {
				at = time.Now()
			}
			c.first[q] = at
		}
		return false
	})
}

// lagWarnSnapshot is a copy of a lagWarnCounter's figures.
type lagWarnSnapshot struct {
	Count  int64
	First  map[string]time.Time
	Named  map[string]int64
	Others map[string]int64
}

func (c *lagWarnCounter) snapshot() lagWarnSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := lagWarnSnapshot{Count: c.count, First: map[string]time.Time{}, Named: map[string]int64{}, Others: map[string]int64{}}
	for k, v := range c.first {
		s.First[k] = v
	}
	for k, v := range c.named {
		s.Named[k] = v
	}
	for k, v := range c.others {
		s.Others[k] = v
	}
	return s
}

func (c *lagWarnCounter) total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// lagWarnHandler passes records on to its handler (the bench's quiet
// stderr logger) and lets its counter see every record at Warn or above.
type lagWarnHandler struct {
	next slog.Handler
	c    *lagWarnCounter
}

func (h lagWarnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h lagWarnHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.c.record(r)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h lagWarnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return lagWarnHandler{next: h.next.WithAttrs(as), c: h.c}
}

func (h lagWarnHandler) WithGroup(name string) slog.Handler {
	return lagWarnHandler{next: h.next.WithGroup(name), c: h.c}
}

// topicSustained runs the scenario and adds its figures to rep.
func topicSustained(ctx context.Context, cfg config, rep *report) error {
	run, err := topicSustainedRun(ctx, cfg.pgURL, cfg.topicSus)
	if run != nil {
		rep.topicSus = run
	}
	return err
}

func topicSustainedRun(ctx context.Context, pgURL string, st topicSusSettings) (_ *topicSusRun, err error) {
	run := &topicSusRun{st: st, Stalled: topicSusSubs - 1}
	dbName := topicSusDB + randSuffix()
	run.Notes = append(run.Notes, "database "+dbName+" (dropped at the end)")
	progress.set("topic-sustained: creating database " + dbName)
	admin, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	dbIdent := pgx.Identifier{dbName}.Sanitize()
	// template0: CREATE DATABASE from template1 fails while anyone else on
	// the shared server is connected to template1.
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+dbIdent+` TEMPLATE template0`); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, derr := admin.Exec(cctx, `DROP DATABASE IF EXISTS `+dbIdent+` WITH (FORCE)`); derr != nil {
			logf("topic-sustained: drop database %s: %v", dbName, derr)
		}
	}()
	dbURL, err := withDatabase(pgURL, dbName)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 2
	stats, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	defer stats.Close()
	var av string
	_ = stats.QueryRow(ctx, `SHOW autovacuum`).Scan(&av)
	run.Notes = append(run.Notes, "server autovacuum="+av)

	schema := "bench_fila_log_" + randSuffix()
	params := []string{"fila_schema=" + schema, "fila_migrate=true", "fila_mode=log"}
	if st.rotate > 0 {
		params = append(params, "fila_rotate_interval="+st.rotate.String())
	}
	warns := newLagWarnCounter()
	logger := slog.New(lagWarnHandler{next: quietLogger().Handler(), c: warns})
	progress.set("topic-sustained: opening Fila (fila_mode=log)")
	client, err := fila.Open(ctx, addParams(dbURL, params...), fila.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := client.Close(); cerr != nil {
			logf("topic-sustained: close: %v", cerr)
		}
	}()
	s := &filaSystem{client: client, name: filaLogName, pgSchema: schema, pgLog: true}
	tables := s.pgTables()
	t, err := subscribeAll(ctx, s, topicSusSubs)
	if err != nil {
		return nil, err
	}
	run.Subs = t.queues
	// No unsubscribe at the end: the database is dropped.

	// The idle transaction: a snapshot taken by its first statement, then
	// nothing until the run ends.
	idle, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = idle.Close(context.WithoutCancel(ctx)) }()
	tx, err := idle.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return nil, err
	}
	idlePID := idle.PgConn().PID()
	var xmin *string
	if err := stats.QueryRow(ctx, `SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = $1`, idlePID).Scan(&xmin); err != nil {
		return nil, err
	}
	if xmin == nil {
		return nil, fmt.Errorf("the idle REPEATABLE READ transaction (pid %d) holds no xmin", idlePID)
	}
	xminAtStart := *xmin

	start := time.Now().Add(200 * time.Millisecond)
	run.Start = start
	rec := newLatencyRecorder(start)
	cons := make([]Consumer, len(t.queues))
	stopped := make([]bool, len(t.queues))
	var consMu sync.Mutex
	defer func() {
		consMu.Lock()
		defer consMu.Unlock()
		for i, c := range cons {
			if c != nil && !stopped[i] {
				stopped[i] = true
				if serr := c.Stop(); serr != nil {
					logf("topic-sustained: stop %s: %v", t.queues[i], serr)
				}
			}
		}
	}()
	for i, q := range t.queues {
		onStart := rec.onStart
		if i == run.Stalled {
			onStart = func([]byte) {}
		}
		c, err := s.startQueue(ctx, q, st.conc, onStart)
		if err != nil {
			return run, err
		}
		cons[i] = c
	}
	pctx, stopProd := context.WithCancel(ctx)
	defer stopProd()
	prod := startPaced(pctx, filaLogName+" publish", st.rate, start, st.dur, 32, func(ctx context.Context, intended time.Time) error {
		_, err := client.Publish(ctx, t.topic, fila.Message{Kind: "bench", Body: makeBody(intended)})
		return err
	})
	// The stall: the consumer of the last subscription stops for good.
	stallDone := make(chan struct{})
	go func() {
		defer close(stallDone)
		sleepCtx(pctx, time.Until(start.Add(st.stallAfter)))
		if pctx.Err() != nil {
			return
		}
		consMu.Lock()
		defer consMu.Unlock()
		i := run.Stalled
		stopped[i] = true
		t0 := time.Now()
		run.StalledAt = t0.Sub(start)
		if serr := cons[i].Stop(); serr != nil {
			logf("topic-sustained: stop %s: %v", t.queues[i], serr)
		}
		run.StopTook = time.Since(t0).Round(10 * time.Millisecond)
		logf("topic-sustained: t=%v: the consumer of %s stopped (Stop took %v)", run.StalledAt.Round(time.Second), t.queues[i], run.StopTook)
	}()

	progress.set(fmt.Sprintf("topic-sustained: publishing %.0f msg/s to %d subscriptions", st.rate, topicSusSubs))
	tick := time.NewTicker(st.interval)
	defer tick.Stop()
	lastDone := make([]int64, len(cons))
	var lastSent int64
	lastT := start
	end := start.Add(st.dur)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		now := time.Now()
		if now.After(end.Add(st.interval/2)) || ctx.Err() != nil {
			break
		}
		dt := now.Sub(lastT).Seconds()
		sent := prod.sent.Load()
		smp := topicSusSample{At: now.Sub(start).Round(time.Second), PubRate: float64(sent-lastSent) / dt,
			Lag: make([]int64, len(cons)), Rate: make([]float64, len(cons)), Sent: sent, Load1: loadAvg1()}
		for i, c := range cons {
			d := c.Done()
			smp.Rate[i] = float64(d-lastDone[i]) / dt
			lastDone[i] = d
		}
		smp.StalledDone = lastDone[run.Stalled]
		for i, q := range t.queues {
			qs, qerr := client.QueueStats(ctx, q)
			if qerr != nil {
				if ctx.Err() == nil {
					logf("topic-sustained: stats of %s: %v", q, qerr)
				}
				smp.Lag[i] = -1
				continue
			}
			smp.Lag[i] = qs.Ready
		}
		rec.mu.Lock()
		smp.P95ms = float64(rec.window.ValueAtQuantile(95)) / 1000
		rec.window.Reset()
		rec.mu.Unlock()
		var names string
		if qerr := stats.QueryRow(ctx, `SELECT coalesce(sum(n_dead_tup), 0)::bigint,
				coalesce(sum(pg_total_relation_size(relid)), 0)::bigint,
				coalesce(string_agg(relname, ', ' ORDER BY relname), '')
			FROM pg_stat_user_tables WHERE `+pgTableWhere, tables.Schema, tables.Prefix, tables.Exclude).
			Scan(&smp.DeadTup, &smp.SizeBytes, &names); qerr != nil && ctx.Err() == nil {
			logf("topic-sustained: table statistics: %v", qerr)
		}
		if names != "" {
			run.Tables = names
		}
		smp.Gen, smp.GenAge = -1, -1
		var genAgeUs int64
		if qerr := stats.QueryRow(ctx, `SELECT cur, (extract(epoch FROM clock_timestamp() - since) * 1e6)::int8, copied IS NOT NULL FROM `+
			pgx.Identifier{schema, "log_state"}.Sanitize()).Scan(&smp.Gen, &genAgeUs, &smp.Copied); qerr != nil {
			if ctx.Err() == nil {
				logf("topic-sustained: log_state: %v", qerr)
			}
		} else {
			smp.GenAge = time.Duration(genAgeUs) * time.Microsecond
		}
		smp.Warnings = warns.total()
		run.Samples = append(run.Samples, smp)
		liveMax, _ := topicSusLive(smp, run.Stalled)
		lo, hi := topicSusLiveRates(smp, run.Stalled)
		progress.set(fmt.Sprintf("topic-sustained: t=%v publish %.0f msg/s; live lag max %d, %.0f–%.0f msg/s, p95 %.1fms; stalled lag %d; dead %d size %s; lag warnings %d; generation %d for %v; load %.2f",
			smp.At, smp.PubRate, liveMax, lo, hi, smp.P95ms, smp.Lag[run.Stalled], smp.DeadTup, humanBytes(smp.SizeBytes), smp.Warnings,
			smp.Gen, smp.GenAge.Round(time.Second), smp.Load1))
		lastSent, lastT = sent, now
	}
	stopProd()
	prod.wg.Wait()
	<-stallDone
	if f := prod.failed.Load(); f > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%d publishes failed", f))
	}
	// Was the idle transaction still open, with the same snapshot?
	var state string
	xmin = nil
	if qerr := stats.QueryRow(context.WithoutCancel(ctx), `SELECT state, backend_xmin::text FROM pg_stat_activity WHERE pid = $1`, idlePID).
		Scan(&state, &xmin); qerr != nil {
		run.Notes = append(run.Notes, fmt.Sprintf("idle transaction (pid %d): not found at the end: %v", idlePID, qerr))
	} else {
		x := "none"
		if xmin != nil {
			x = *xmin
		}
		run.Notes = append(run.Notes, fmt.Sprintf("idle transaction (pid %d): backend_xmin %s at the start, %s at the end, state %q",
			idlePID, xminAtStart, x, state))
	}
	run.Warn = warns.snapshot()
	if run.Tables == "" {
		run.Tables = tables.String()
	} else {
		run.Tables = schema + ": " + run.Tables
	}
	return run, nil
}

// loadAvg1 is the machine's 1-minute load average, -1 where
// /proc/loadavg cannot be read: the bench shares the machine (and the
// server) with whatever else runs there.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// topicSusLive is the largest lag of the live subscriptions in a sample
// (-1 if none was read) and whether every live one was read.
func topicSusLive(s topicSusSample, stalled int) (int64, bool) {
	m, all := int64(-1), true
	for i, l := range s.Lag {
		if i == stalled {
			continue
		}
		if l < 0 {
			all = false
			continue
		}
		m = max(m, l)
	}
	return m, all
}

// topicSusLiveRates is the lowest and highest rate of the live
// subscriptions in a sample.
func topicSusLiveRates(s topicSusSample, stalled int) (float64, float64) {
	lo, hi, first := 0.0, 0.0, true
	for i, r := range s.Rate {
		if i == stalled {
			continue
		}
		if first {
			lo, hi, first = r, r, false
		}
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}

// topicSusRows are the samples the table shows: every one up to 20, else
// every 5th (and the last).
func topicSusRows(n int) []int {
	var out []int
	for i := range n {
		if n <= 20 || (i+1)%5 == 0 || i == n-1 {
			out = append(out, i)
		}
	}
	return out
}

// topicSustainedMarkdown renders the run.
func topicSustainedMarkdown(r *topicSusRun) string {
	start := r.Start
	st := r.st
	var b strings.Builder
	rotate := "1m (the driver's default)"
	if st.rotate > 0 {
		rotate = st.rotate.String()
	}
	stalledName := ""
	if r.Stalled < len(r.Subs) {
		stalledName = r.Subs[r.Stalled]
	}
	fmt.Fprintf(&b, "### PostgreSQL log mode: one topic, %d subscriptions, one stalled, %.0f msg/s for %v\n\n", topicSusSubs, st.rate, st.dur)
	fmt.Fprintf(&b, "Fila's PostgreSQL log mode (fila_mode=log, fila_rotate_interval %s) in a database of its own. "+
		"One topic with %d subscriptions, each consumed by its own worker (concurrency %d); single Publish calls of %d-byte bodies "+
		"on a fixed schedule from 32 goroutines, %.0f msg/s offered for %v. The consumer of the last subscription (%s) stops after %v; "+
		"the other %d (live) go on. An idle REPEATABLE READ transaction (BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1) is open "+
		"on another connection to the same database for the whole run. Sampled every %v. Lag: the subscription's QueueStats Ready. Rate: its acks per second "+
		"in the interval. p95: publish (scheduled time) to handler start, live subscriptions, in the interval. Dead tuples (n_dead_tup) "+
		"and size (pg_total_relation_size) summed over the log mode's tables (%s). Lag warnings: records of the driver's logger whose "+
		"message starts with %q, counted so far.\n\n",
		rotate, topicSusSubs, st.conc, bodySize, st.rate, st.dur, stalledName, st.stallAfter, topicSusSubs-1,
		st.interval, r.Tables, lagWarnPrefix)
	if len(r.Samples) == 0 {
		b.WriteString("No samples.\n\n")
		return b.String()
	}
	// Summary.
	first, last := r.Samples[0], r.Samples[len(r.Samples)-1]
	var peak topicSusSample
	var maxLive int64
	var maxLiveAt time.Duration
	var pubSum, minPub float64
	minLoad, maxLoad := -1.0, -1.0
	minLiveRate := -1.0
	for i, s := range r.Samples {
		if i == 0 || s.DeadTup > peak.DeadTup {
			peak = s
		}
		if m, _ := topicSusLive(s, r.Stalled); m > maxLive {
			maxLive, maxLiveAt = m, s.At
		}
		if lo, _ := topicSusLiveRates(s, r.Stalled); minLiveRate < 0 || lo < minLiveRate {
			minLiveRate = lo
		}
		pubSum += s.PubRate
		if i == 0 || s.PubRate < minPub {
			minPub = s.PubRate
		}
		if s.Load1 >= 0 {
			if maxLoad < 0 || s.Load1 < minLoad {
				minLoad = s.Load1
			}
			maxLoad = max(maxLoad, s.Load1)
		}
	}
	var liveEnd []string
	kept := true
	limit := int64(st.rate * 2)
	for i, l := range last.Lag {
		if i == r.Stalled {
			continue
		}
		liveEnd = append(liveEnd, fmt.Sprint(l))
		if l < 0 || l >= limit {
			kept = false
		}
	}
	verdict := "kept up"
	if !kept {
		verdict = "did not keep up"
	}
	b.WriteString("Summary:\n\n")
	fmt.Fprintf(&b, "- Max dead tuples in the log tables: %d (at %v); at the end %d.\n", peak.DeadTup, peak.At, last.DeadTup)
	fmt.Fprintf(&b, "- Size of the log tables: %s at %v → %s at %v.\n", humanBytes(first.SizeBytes), first.At, humanBytes(last.SizeBytes), last.At)
	fmt.Fprintf(&b, "- Live subscriptions: lag at the end %s (limit: 2 s of publishing, %d): %s; largest live lag of any sample %d (at %v); "+
		"lowest live rate of any sample %.0f msg/s.\n",
		strings.Join(liveEnd, ", "), limit, verdict, maxLive, maxLiveAt, minLiveRate)
	stalledAt := "never"
	if r.StalledAt > 0 {
		stalledAt = "at " + r.StalledAt.Round(100*time.Millisecond).String()
	}
	fmt.Fprintf(&b, "- Stalled subscription %s (consumer told to stop %s, its Stop took %v): lag at the end %d; "+
		"by the last sample %d published, of which it acked %d: %d not acked.\n",
		stalledName, stalledAt, r.StopTook, last.Lag[r.Stalled], last.Sent, last.StalledDone, last.Sent-last.StalledDone)
	firstWarn := "never"
	if at, ok := r.Warn.First[stalledName]; ok {
		firstWarn = fmt.Sprintf("first at %.0f s", at.Sub(start).Seconds())
		if r.StalledAt > 0 {
			firstWarn += fmt.Sprintf(" (%.0f s after its consumer stopped)", at.Sub(start).Seconds()-r.StalledAt.Seconds())
		}
	}
	var others []string
	for q, n := range r.Warn.Named {
		if q != stalledName {
			others = append(others, fmt.Sprintf("%s %d", q, n))
		}
	}
	slices.Sort(others)
	otherNamed := "none"
	if len(others) > 0 {
		otherNamed = strings.Join(others, ", ")
	}
	fmt.Fprintf(&b, "- Lag warnings: %d in total; naming the stalled subscription %d, %s; naming any other subscription: %s.\n",
		r.Warn.Count, r.Warn.Named[stalledName], firstWarn, otherNamed)
	rotations, longest, longestAt := 0, time.Duration(-1), time.Duration(0)
	for i, s := range r.Samples {
		if s.GenAge < 0 {
			continue
		}
		if i > 0 && r.Samples[i-1].GenAge >= 0 && (s.Gen != r.Samples[i-1].Gen || s.GenAge < r.Samples[i-1].GenAge) {
			rotations++
		}
		if s.GenAge > longest {
			longest, longestAt = s.GenAge, s.At
		}
	}
	if longest >= 0 {
		fmt.Fprintf(&b, "- Rotation: the current generation changed %d times between samples; longest time since the last rotation at a sample "+
			"%v (at %v); at the end %v.\n", rotations, longest.Round(time.Second), longestAt, last.GenAge.Round(time.Second))
	}
	fmt.Fprintf(&b, "- Publish: mean %.0f msg/s of %.0f offered; lowest sample %.0f msg/s.\n", pubSum/float64(len(r.Samples)), st.rate, minPub)
	if maxLoad >= 0 {
		fmt.Fprintf(&b, "- Machine load (1-minute load average, %d CPUs): %.2f–%.2f over the samples.\n", runtime.NumCPU(), minLoad, maxLoad)
	}
	var ow []string
	for m, n := range r.Warn.Others {
		ow = append(ow, fmt.Sprintf("%d× %q", n, m))
	}
	slices.Sort(ow)
	if len(ow) > 0 {
		fmt.Fprintf(&b, "- Other warnings of the driver: %s.\n", strings.Join(ow, "; "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s.\n", n)
	}
	rows := topicSusRows(len(r.Samples))
	if len(rows) < len(r.Samples) {
		fmt.Fprintf(&b, "\nEvery 5th of %d samples (one every %v):\n", len(r.Samples), st.interval)
	}
	b.WriteString("\n| t | live lag (max of 4) | stalled lag | live rate msg/s (min–max) | live p95 ms | n_dead_tup (log tables) | size (log tables) | publish msg/s | lag warnings so far | since last rotation | load |\n" +
		"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, i := range rows {
		s := r.Samples[i]
		m, _ := topicSusLive(s, r.Stalled)
		lo, hi := topicSusLiveRates(s, r.Stalled)
		t := s.At.String()
		if r.StalledAt > 0 && topicSusFirstRowAfter(r, rows, i) {
			t += " (stalled)"
		}
		load := ""
		if s.Load1 >= 0 {
			load = fmt.Sprintf("%.2f", s.Load1)
		}
		rot := ""
		if s.GenAge >= 0 {
			rot = s.GenAge.Round(time.Second).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f–%.0f | %.1f | %d | %s | %.0f | %d | %s | %s |\n",
			t, m, s.Lag[r.Stalled], lo, hi, s.P95ms, s.DeadTup, humanBytes(s.SizeBytes), s.PubRate, s.Warnings, rot, load)
	}
	b.WriteString("\n")
	return b.String()
}

// topicSusFirstRowAfter reports whether row i is the first shown row at or
// after the stall.
func topicSusFirstRowAfter(r *topicSusRun, rows []int, i int) bool {
	for _, j := range rows {
		if r.Samples[j].At >= r.StalledAt {
			return j == i
		}
	}
	return false
}
