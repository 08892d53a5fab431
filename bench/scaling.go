package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
)

// The scaling scenario (issue 34): does the cost per message grow with the
// backlog? Fila only, on each broker it is asked for, at two backlog sizes:
//
//   - preload B messages (batches of 1,000 from 8 goroutines, not timed);
//   - start the consumer (the system's Start, concurrency 100) and a top-up
//     producer that keeps the backlog (enqueued − acked) near B:
//     topUpGoroutines goroutines, each enqueuing a batch of topBatch messages whenever the
//     backlog, counting batches under way, is at least topBatch below B;
//   - after the warm-up, count the acks stored over the window: acked/s;
//   - during the window, single Enqueue calls at a modest offered rate (the
//     probe), each call timed from its start to its return: p50 and p95.
//
// The top-up batch is the same at both sizes (a tenth of the small backlog,
// at most 100), so the producer does the same work per message at both and
// the two figures differ only by the backlog. On PostgreSQL, the Fila
// system's tables are vacuumed and analyzed before the preload (removing
// the dead tuples of earlier runs) and after it (standing in for the
// autovacuum that a real server would run after a million inserts: the
// servers here run with autovacuum off). On MySQL/MariaDB it waits, before
// and after each preload, until InnoDB's history list is empty (at most 2
// minutes), so the purge of the rows an earlier run deleted does not land
// on the next. --scaling-vacuum=false turns both off. MongoDB is skipped
// (scalingSkip); RabbitMQ's large backlog is its own flag.

// scalingSettings are the scaling scenario's flags.
type scalingSettings struct {
	small, large int // the two backlogs
	largeRabbit  int // the large backlog on RabbitMQ
	conc         int
	warm, window time.Duration
	rate         float64 // offered rate of the single-Enqueue probe
	runs         int
	vacuum       bool // settle before and after each preload: PostgreSQL VACUUM (ANALYZE), MySQL purge
}

// scalingSkip is why the scaling scenario does not run on a broker.
var scalingSkip = map[string]string{
	"mongo": "MongoDB: skipped: FerretDB (SQLite) stands in for MongoDB here, and drains about 200 msg/s: preloading and " +
		"holding a 1,000,000 backlog would take hours and measure FerretDB's table scans, not Fila",
}

// scalingCase is one measurement: one system, one backlog, one run.
type scalingCase struct {
	Broker, System string
	Run            int
	Backlog        int           // B
	Preload        time.Duration // time the preload took (not measured)
	Rate           float64       // acks stored per second over the window
	Acked          int64         // acks stored in the window
	Window         time.Duration // the window as it ran
	BacklogMin     int64         // sampled every 100 ms over the window
	BacklogMax     int64
	EnqP50, EnqP95 float64 // ms, single Enqueue calls of the probe
	EnqCalls       int64
	Note           string
	// LoadBefore and LoadAfter: see result.
	LoadBefore, LoadAfter float64
}

// topBatch is the top-up producer's batch: a tenth of the small backlog,
// at most 100, at least 1.
func (st scalingSettings) topBatch() int { return max(1, min(100, st.small/10)) }

// largeFor is the large backlog on broker.
func (st scalingSettings) largeFor(broker string) int {
	if broker == "rabbitmq" {
		return st.largeRabbit
	}
	return st.large
}

// scalingScenario measures every system at the small and the large backlog,
// small then large, then again for each further run. settle (nil where
// there is nothing to do) is called before and after each preload, not
// timed.
func scalingScenario(ctx context.Context, broker string, systems []System, st scalingSettings,
	settle func(ctx context.Context, s System) error) ([]scalingCase, error) {
	var out []scalingCase
	for run := 1; run <= st.runs; run++ {
		for _, s := range systems {
			for _, b := range []int{st.small, st.largeFor(broker)} {
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				var c scalingCase
				var err error
				load := loadAround(fmt.Sprintf("%s %s scaling backlog %d run %d", broker, s.Name(), b, run), func() {
					c, err = scalingCaseRun(ctx, broker, s, st, b, run, settle)
				})
				c.LoadBefore, c.LoadAfter = load.LoadBefore, load.LoadAfter
				if err != nil {
					return out, fmt.Errorf("%s scaling backlog %d: %w", s.Name(), b, err)
				}
				logf("%s %s scaling backlog %d run %d: %.0f acked/s, backlog %d–%d, Enqueue p50 %.2f ms p95 %.2f ms (preload %v)",
					broker, s.Name(), b, run, c.Rate, c.BacklogMin, c.BacklogMax, c.EnqP50, c.EnqP95, c.Preload.Round(time.Second))
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// scalingCaseRun is one measurement on a fresh queue.
func scalingCaseRun(ctx context.Context, broker string, s System, st scalingSettings, backlog, run int,
	settle func(ctx context.Context, s System) error) (c scalingCase, err error) {
	c = scalingCase{Broker: broker, System: s.Name(), Run: run, Backlog: backlog}
	label := fmt.Sprintf("%s %s: scaling, backlog %d (run %d)", broker, s.Name(), backlog, run)
	if err := s.Setup(ctx); err != nil {
		return c, err
	}
	defer func() {
		progress.set(label + ": teardown")
		if terr := s.Teardown(context.WithoutCancel(ctx)); terr != nil {
			logf("%s teardown: %v", s.Name(), terr)
		}
	}()
	if settle != nil {
		progress.set(label + ": settle before the preload")
		if err := settle(ctx, s); err != nil {
			return c, fmt.Errorf("settle: %w", err)
		}
	}
	progress.set(label + ": preload")
	progress.setCount(0, int64(backlog))
	t0 := time.Now()
	if err := preload(ctx, s, backlog, 1000); err != nil {
		return c, fmt.Errorf("preload: %w", err)
	}
	c.Preload = time.Since(t0)
	if settle != nil {
		progress.set(label + ": settle after the preload")
		if err := settle(ctx, s); err != nil {
			return c, fmt.Errorf("settle: %w", err)
		}
	}

	var enq atomic.Int64 // stored by the preload, the top-up and the probe
	enq.Store(int64(backlog))
	cons, err := s.Start(ctx, st.conc, func([]byte) {})
	if err != nil {
		return c, err
	}
	tctx, stopTop := context.WithCancel(ctx)
	top := startTopUp(tctx, s, int64(backlog), st.topBatch(), &enq, cons)
	stopAll := func() {
		stopTop()
		top.wg.Wait()
		if serr := cons.Stop(); serr != nil {
			logf("%s stop: %v", s.Name(), serr)
		}
	}

	progress.set(label + ": warm-up")
	sleepCtx(ctx, st.warm)
	if ctx.Err() != nil {
		stopAll()
		return c, ctx.Err()
	}

	progress.set(label + ": measuring, acked")
	start := time.Now()
	d0 := cons.Done()
	h := hdr.New(1, 60_000_000, 3) // µs
	var hmu sync.Mutex
	probe := startPaced(ctx, s.Name()+" probe", st.rate, start, st.window, 16, func(ctx context.Context, _ time.Time) error {
		t := time.Now()
		err := s.Enqueue(ctx, [][]byte{makeBody(t)})
		if err == nil {
			enq.Add(1)
			hmu.Lock()
			_ = h.RecordValue(min(max(time.Since(t).Microseconds(), 1), 60_000_000))
			hmu.Unlock()
		}
		return err
	})
	c.BacklogMin, c.BacklogMax = int64(backlog), 0
	end := start.Add(st.window)
	for time.Now().Before(end) && ctx.Err() == nil {
		done := cons.Done()
		b := enq.Load() - done
		c.BacklogMin, c.BacklogMax = min(c.BacklogMin, b), max(c.BacklogMax, b)
		progress.setCount(done-d0, 0)
		time.Sleep(min(100*time.Millisecond, time.Until(end)))
	}
	c.Acked = cons.Done() - d0
	c.Window = time.Since(start)
	probe.wg.Wait()
	stopAll()
	if ctx.Err() != nil {
		return c, ctx.Err()
	}
	c.Rate = float64(c.Acked) / c.Window.Seconds()
	c.EnqCalls = h.TotalCount()
	c.EnqP50 = float64(h.ValueAtQuantile(50)) / 1000
	c.EnqP95 = float64(h.ValueAtQuantile(95)) / 1000
	if f := probe.failed.Load(); f > 0 {
		c.Note = joinNote(c.Note, fmt.Sprintf("%d probe Enqueue calls failed", f))
	}
	if f := top.failed.Load(); f > 0 {
		c.Note = joinNote(c.Note, fmt.Sprintf("%d top-up batches failed", f))
	}
	if c.BacklogMin < int64(backlog)/2 {
		c.Note = joinNote(c.Note, fmt.Sprintf("the top-up fell behind: the backlog fell to %d", c.BacklogMin))
	}
	if want := int64(st.rate * st.window.Seconds()); c.EnqCalls < want*95/100 {
		c.Note = joinNote(c.Note, fmt.Sprintf("the probe made %d Enqueue calls of %d", c.EnqCalls, want))
	}
	return c, nil
}

// topUpGoroutines is how many goroutines the top-up producer runs.
const topUpGoroutines = 8

// topUp is the producer that keeps the backlog near its target.
type topUp struct {
	failed atomic.Int64
	wg     sync.WaitGroup
}

// startTopUp runs topUpGoroutines goroutines that each enqueue a batch of batch messages
// whenever enqueued − acked, counting the batches under way, is at least
// batch below target; until ctx ends.
func startTopUp(ctx context.Context, s System, target int64, batch int, enq *atomic.Int64, cons Consumer) *topUp {
	t := &topUp{}
	var mu sync.Mutex
	var inflight int64
	for range topUpGoroutines {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			bodies := make([][]byte, batch)
			for ctx.Err() == nil {
				mu.Lock()
				if target-(enq.Load()+inflight-cons.Done()) < int64(batch) {
					mu.Unlock()
					sleepCtx(ctx, time.Millisecond)
					continue
				}
				inflight += int64(batch)
				mu.Unlock()
				for i := range bodies {
					bodies[i] = makeBody(time.Now())
				}
				err := s.Enqueue(ctx, bodies)
				mu.Lock()
				inflight -= int64(batch)
				if err == nil {
					enq.Add(int64(batch))
				}
				mu.Unlock()
				if err != nil && ctx.Err() == nil {
					t.failed.Add(1)
					logf("%s top-up: %v", s.Name(), err)
					sleepCtx(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	return t
}

// scalingMarkdown is the scaling scenario's table: one row per system and
// run, the small and the large backlog side by side.
func scalingMarkdown(cases []scalingCase, notes []string, st scalingSettings) string {
	var b strings.Builder
	b.WriteString("### Scaling with the backlog (scenario scaling)\n\n")
	fmt.Fprintf(&b, "Fila's consumer at concurrency %d drains a queue whose backlog (enqueued − acked) a producer holds near B "+
		"(batches of %d from %d goroutines whenever it is that far below B), after B messages were preloaded; acked/s counts the acks "+
		"stored over %v after %v of warm-up. Meanwhile single Enqueue calls are offered at %.0f/s; p50 / p95 are the calls' own "+
		"time in ms. Ratio: the large backlog's acked/s ÷ the small one's (1.00: the cost per message does not grow).\n\n",
		st.conc, st.topBatch(), topUpGoroutines, st.window, st.warm, st.rate)
	if slices.ContainsFunc(cases, func(c scalingCase) bool { return c.Broker == "postgres" }) {
		if st.vacuum {
			b.WriteString("On PostgreSQL, Fila's tables were vacuumed and analyzed before each preload and after it (the server runs with autovacuum off).\n\n")
		} else {
			b.WriteString("On PostgreSQL, Fila's tables were not vacuumed nor analyzed between runs (--scaling-vacuum=false).\n\n")
		}
	}
	if st.vacuum && slices.ContainsFunc(cases, func(c scalingCase) bool { return c.Broker == "mysql" }) {
		b.WriteString("On MySQL / MariaDB, each preload waited, before and after, for InnoDB's history list to empty, at most 2 minutes (the purge of the rows earlier runs deleted).\n\n")
	}
	fmt.Fprintf(&b, "| broker | system | run | acked/s, backlog %s | acked/s, backlog %s | ratio | Enqueue p50 / p95, %s | Enqueue p50 / p95, %s |\n",
		commas(int64(st.small)), commas(int64(st.large)), commas(int64(st.small)), commas(int64(st.large)))
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	var lines, loaded []string
	type key struct {
		broker, system string
		run            int
	}
	var keys []key
	pairs := map[key][2]*scalingCase{}
	for i := range cases {
		c := &cases[i]
		k := key{c.Broker, c.System, c.Run}
		p, seen := pairs[k]
		if !seen {
			keys = append(keys, k)
		}
		if c.Backlog == st.small {
			p[0] = c
		} else {
			p[1] = c
		}
		pairs[k] = p
		what := fmt.Sprintf("%s, %s, run %d, backlog %s", c.Broker, c.System, c.Run, commas(int64(c.Backlog)))
		lines = append(lines, fmt.Sprintf("%s: %s acked in %.1f s; backlog held at %s–%s; %d probe calls; preload took %v",
			what, commas(c.Acked), c.Window.Seconds(), commas(c.BacklogMin), commas(c.BacklogMax), c.EnqCalls, c.Preload.Round(100*time.Millisecond)))
		if c.Note != "" {
			lines = append(lines, what+": "+c.Note)
		}
		if underLoad(result{LoadBefore: c.LoadBefore, LoadAfter: c.LoadAfter}) {
			loaded = append(loaded, loadNote(what, result{LoadBefore: c.LoadBefore, LoadAfter: c.LoadAfter}))
		}
	}
	cell := func(c *scalingCase) (rate, enq string) {
		if c == nil {
			return "", ""
		}
		rate = commas(int64(c.Rate + 0.5))
		if c.Backlog != st.small && c.Backlog != st.large {
			rate += " (backlog " + commas(int64(c.Backlog)) + ")"
		}
		if c.Note != "" {
			rate += "*"
		}
		if underLoad(result{LoadBefore: c.LoadBefore, LoadAfter: c.LoadAfter}) {
			rate += loadMark
		}
		return rate, formatValue(c.EnqP50, "ms") + " / " + formatValue(c.EnqP95, "ms")
	}
	for _, k := range keys {
		p := pairs[k]
		r0, e0 := cell(p[0])
		r1, e1 := cell(p[1])
		ratio := ""
		if p[0] != nil && p[1] != nil && p[0].Rate > 0 {
			ratio = fmt.Sprintf("×%.2f", p[1].Rate/p[0].Rate)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", k.broker, k.system, k.run, r0, r1, ratio, e0, e1)
	}
	b.WriteString("\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	if len(loaded) > 0 {
		b.WriteString("\nFigures taken under load (marked " + loadMark + "):\n\n")
		for _, l := range loaded {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// analyzeTables runs VACUUM (ANALYZE) over the tables of t (Fila's
// log-mode tables aside, as vacuumTables): the scaling scenario's settle
// step on PostgreSQL.
func (e *pgEnv) analyzeTables(ctx context.Context, t pgTableSet) error {
	names, err := e.tableNames(ctx, t)
	if err != nil {
		return err
	}
	var q []string
	for _, n := range names {
		if !strings.HasPrefix(n, "log_") {
			q = append(q, pgx.Identifier{t.Schema, n}.Sanitize())
		}
	}
	if len(q) == 0 {
		return nil
	}
	_, err = e.pool.Exec(ctx, `VACUUM (ANALYZE) `+strings.Join(q, ", "))
	return err
}

// waitPurge waits until InnoDB's history list (server-wide) is under n, or
// for at most limit: the scaling scenario's settle step on MySQL/MariaDB,
// so the purge of the rows a run deleted does not land on the next run.
// The DELETE of a million rows is one entry of that list until all its rows
// are purged, so n is small.
func (e *mysqlEnv) waitPurge(ctx context.Context, n int64, limit time.Duration) error {
	start := time.Now()
	for {
		h, err := e.historyLen(ctx)
		if err != nil {
			return err
		}
		if h < n {
			if w := time.Since(start); w > time.Second {
				logf("mysql: waited %v for the purge", w.Round(time.Second))
			}
			return nil
		}
		if time.Since(start) > limit {
			logf("mysql: history list still %d after %v; going on", h, limit)
			return nil
		}
		sleepCtx(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
