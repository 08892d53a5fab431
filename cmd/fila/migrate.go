package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/relay"
)

// stopWhenIdle is how long a migration without --drain waits for a message
// before it takes the source for empty.
const stopWhenIdle = time.Second

type migrateFlags struct {
	from, to       string
	queue, toQueue string
	delayed, dead  bool
	drain          bool
	idle           time.Duration
	batch, conc    int
	lease          time.Duration
	// progressEvery overrides the progress interval (hidden, for tests).
	progressEvery time.Duration
}

func newMigrateCmd(a *app) *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "migrate --from URL --to URL --queue NAME",
		Short: "Move a queue's messages to another broker (or queue)",
		Long: `Move the messages of a queue from one broker to another at least once: a
batch is received from --from, enqueued to --to in one confirmed batch, then
acked on --from. Kind, body, headers, dedup key, max attempts, attempt count
and remaining delay carry over; the target assigns new ids and each message
carries its source id in the Fila-Source-Id header (and, where the target has
dedup keys, as its dedup key, so a migration interrupted and run again does
not duplicate what it already moved).

Without --drain the command moves what the queue holds and stops as soon as
no message is ready. With --drain it keeps going until the source has stayed
empty for --idle (default 10s): the cut-over runbook is
  1. point the producers (and consumers) at the new broker,
  2. fila migrate --from OLD --to NEW --queue Q --include-delayed --include-dead --drain
  3. retire the old broker once the command reports the source empty.

--include-delayed also moves messages whose run-at has not come, keeping it
(the source driver must hand them out early). --include-dead moves the dead
letters into the target's dead-letter store with their reasons.

Progress goes to standard error (redrawn in place on a terminal), the final
count and what is left on the source to standard output. Ctrl-C stops after
finishing the batches in hand (enqueued and acked, for at most 10s more), so
running the command again continues where it stopped without duplicates.

A run that moves nothing while the source still counts ready messages fails
(exit 1) with the reason: the source queue is paused, or receiving from it
returned nothing (its claims time out, or another consumer takes the
messages first).

The brokers come from --from and --to only, not from the URL that other
commands take ($FILA_URL is not used).`,
		Example: `  fila migrate --from postgres://db/app --to redis://cache:6379/0 --queue emails
  fila migrate --from amqp://guest:guest@mq/ --to postgres://db/app --queue emails \
      --to-queue emails_v2 --include-dead --drain --idle 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.migrate(cmd.Context(), cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "URL of the broker to move messages from (required)")
	fl.StringVar(&f.to, "to", "", "URL of the broker to move messages to (required)")
	fl.StringVarP(&f.queue, "queue", "q", "", "queue to move (required)")
	fl.StringVar(&f.toQueue, "to-queue", "", "queue on the target (default: the same name)")
	fl.BoolVar(&f.delayed, "include-delayed", false, "also move delayed messages, keeping their run-at")
	fl.BoolVar(&f.dead, "include-dead", false, "also move dead letters, keeping their reasons")
	fl.BoolVar(&f.drain, "drain", false, "keep moving until the source stays empty for --idle")
	fl.DurationVar(&f.idle, "idle", 10*time.Second, "with --drain: how long the source must stay empty")
	fl.IntVar(&f.batch, "batch", 500, "messages per batch (at most 1000)")
	fl.IntVar(&f.conc, "concurrency", 4, "batches in flight")
	fl.DurationVar(&f.lease, "lease", time.Minute, "source lease of a batch in flight (an interrupted batch comes back after it)")
	fl.DurationVar(&f.progressEvery, "progress-every", 0, "progress interval (default 200ms on a terminal, 5s otherwise)")
	_ = fl.MarkHidden("progress-every")
	for _, name := range []string{"from", "to", "queue"} {
		_ = cmd.MarkFlagRequired(name)
	}
	// The global --url means nothing here: leave it out of the help.
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		if fl := c.InheritedFlags().Lookup("url"); fl != nil && !fl.Hidden {
			fl.Hidden = true
			defer func() { fl.Hidden = false }()
		}
		c.Parent().HelpFunc()(c, args)
	})
	return cmd
}

func (a *app) migrate(ctx context.Context, cmd *cobra.Command, f migrateFlags) error {
	if cmd.Flags().Changed("url") {
		return usagef("fila migrate does not use --url: give the source broker's URL as --from and the target's as --to")
	}
	if f.toQueue == "" {
		f.toQueue = f.queue
	}
	for _, q := range []string{f.queue, f.toQueue} {
		if err := fila.ValidateQueueName(q); err != nil {
			return err
		}
	}
	switch {
	case f.batch < 1 || f.batch > fila.MaxReceive:
		return usagef("--batch %d must be between 1 and %d", f.batch, fila.MaxReceive)
	case f.conc < 1:
		return usagef("--concurrency %d must be at least 1", f.conc)
	case f.lease <= 0:
		return usagef("--lease must be positive")
	case cmd.Flags().Changed("idle") && !f.drain:
		return usagef("--idle only applies with --drain")
	case f.drain && f.idle <= 0:
		return usagef("--idle must be positive")
	case f.from == f.to && f.queue == f.toQueue:
		return usagef("--from and --to are the same broker and queue: nothing to move (set --to-queue to move to another queue)")
	}
	from, err := a.openSide(ctx, "--from", f.from)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := a.openSide(ctx, "--to", f.to)
	if err != nil {
		return err
	}
	defer to.Close()
	if err := checkMigrateCaps(from, to, f); err != nil {
		return err
	}

	// What there is to move, for the progress bar (when the source counts).
	var total int64
	before, statsErr := from.QueueStats(ctx, f.queue)
	if statsErr == nil {
		total = before.Ready
		if f.delayed {
			total += before.Delayed
		}
		if f.dead {
			total += before.Dead
		}
	}

	p := newProgress(a.stderr, a.isTerminal(a.stderr), f.progressEvery, total)
	idle := stopWhenIdle
	if f.drain {
		idle = f.idle
	}
	r := &relay.Relay{
		From: from, FromQueue: f.queue, To: to, ToQueue: f.toQueue,
		Batch: f.batch, Concurrency: f.conc, Lease: f.lease, StopWhenIdle: idle,
		IncludeDelayed: f.delayed, IncludeDead: f.dead,
		Progress: p.update,
		Logger:   slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	start := time.Now()
	p.start()
	st, err := r.Run(ctx)
	p.stop()
	elapsed := time.Since(start)

	fmt.Fprintf(a.stdout, "moved %d messages from queue %s (%s) to queue %s (%s) in %v: %d ready, %d delayed, %d dead letters; %d of them were on the target already (refused as duplicates, not stored twice)\n",
		st.Total(), f.queue, from.DriverName(), f.toQueue, to.DriverName(), elapsed.Round(100*time.Millisecond),
		st.Moved, st.Delayed, st.Dead, st.Duplicates)
	if err != nil {
		if errors.Is(err, fila.ErrUnsupported) {
			return &exitErr{code: exitUnsupported, err: err}
		}
		return err
	}
	if statsErr == nil {
		if left, err := from.QueueStats(ctx, f.queue); err == nil {
			fmt.Fprintln(a.stdout, leftOnSource(left, f, st.Total()))
			if st.Total() == 0 && left.Ready > 0 {
				return movedNothing(ctx, from, left, f, idle)
			}
		}
	}
	return nil
}

// movedNothing explains a migration that moved nothing although the source
// counts ready messages: its queue is paused, or its receives returned
// nothing for idle.
func movedNothing(ctx context.Context, from *fila.Client, left fila.Stats, f migrateFlags, idle time.Duration) error {
	if paused, err := from.QueuePaused(ctx, f.queue); err == nil && paused {
		return &exitErr{code: exitError, err: fmt.Errorf("moved nothing: the source queue %s is paused (fila queue pause), so none of its %d ready messages can be received; resume it on the --from broker (fila queue resume %s) and run fila migrate again",
			f.queue, left.Ready, f.queue)}
	}
	longer := "with --drain --idle 1m"
	if f.drain {
		longer = "with a longer --idle"
	}
	return &exitErr{code: exitError, err: fmt.Errorf("moved nothing: the source (%s) counts %d ready messages in queue %s, but receiving from it returned none within %v; its claims may be timing out (a slow or overloaded broker: check it and its logs), or another consumer takes the messages first (stop it). Run fila migrate again %s to wait longer",
		from.DriverName(), left.Ready, f.queue, idle, longer)}
}

// openSide opens the broker of --from or --to, naming the flag in errors.
func (a *app) openSide(ctx context.Context, flag, raw string) (*fila.Client, error) {
	c, err := a.openURL(ctx, raw)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		err = &sideErr{flag: flag, err: err}
		var ee *exitErr
		if errors.As(err, &ee) {
			return nil, &exitErr{code: ee.code, err: err, usage: ee.usage}
		}
		return nil, err
	}
	return c, nil
}

// sideErr names the flag (--from or --to) of the broker an error is about.
type sideErr struct {
	flag string
	err  error
}

func (e *sideErr) Error() string {
	return e.flag + ": " + strings.TrimPrefix(e.err.Error(), "fila: ")
}
func (e *sideErr) Unwrap() error { return e.err }

// checkMigrateCaps refuses, before anything moves, a migration that needs a
// capability one of the drivers lacks, naming the driver and the flag to
// drop.
func checkMigrateCaps(from, to *fila.Client, f migrateFlags) error {
	unsupported := func(c *fila.Client, side, what, hint string) error {
		return &exitErr{code: exitUnsupported, err: fmt.Errorf("the %s driver (%s) does not support %s; %s", c.DriverName(), side, what, hint)}
	}
	if f.delayed {
		if _, ok := from.Driver().(backend.DelayedReceiver); !ok {
			return unsupported(from, "--from", "taking delayed messages before their run-at",
				"drop --include-delayed: delayed messages then stay on the source until they come due (--drain moves them as they do)")
		}
	}
	if f.dead {
		if _, ok := from.Driver().(backend.DeadLetterer); !ok {
			return unsupported(from, "--from", "listing dead letters", "drop --include-dead")
		}
		if _, ok := to.Driver().(backend.DeadImporter); !ok {
			return unsupported(to, "--to", "importing dead letters",
				"drop --include-dead: the dead letters stay on the source (fila dead list / replay there)")
		}
	}
	return nil
}

// leftOnSource describes what the source queue still holds after the
// migration.
// moved is how many messages the migration moved.
func leftOnSource(s fila.Stats, f migrateFlags, moved int64) string {
	var parts []string
	switch {
	case s.Ready > 0 && moved == 0:
		parts = append(parts, fmt.Sprintf("%d ready (none could be received: see the error)", s.Ready))
	case s.Ready > 0:
		parts = append(parts, fmt.Sprintf("%d ready (producers still writing to the source? point them at the target and run with --drain)", s.Ready))
	}
	if s.Leased > 0 {
		parts = append(parts, fmt.Sprintf("%d leased (held by a consumer, or by an interrupted migration until its --lease expires: run fila migrate again then)", s.Leased))
	}
	if s.Delayed > 0 {
		hint := "not yet due; --include-delayed moves them"
		if f.delayed {
			hint = "delayed meanwhile; run fila migrate again"
		}
		parts = append(parts, fmt.Sprintf("%d delayed (%s)", s.Delayed, hint))
	}
	if s.Dead > 0 {
		hint := "--include-dead moves them"
		if f.dead {
			hint = "dead-lettered meanwhile; run fila migrate again"
		}
		parts = append(parts, fmt.Sprintf("%d dead letters (%s)", s.Dead, hint))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("the source queue %s is empty", f.queue)
	}
	return fmt.Sprintf("the source queue %s still holds %s", f.queue, strings.Join(parts, ", "))
}

// progress shows a migration's progress on standard error: a line redrawn in
// place on a terminal, a line every interval otherwise.
type progress struct {
	w       io.Writer
	tty     bool
	every   time.Duration
	total   int64
	started time.Time

	mu      sync.Mutex
	st      relay.Stats
	changed bool
	done    chan struct{}
	wg      sync.WaitGroup
}

func newProgress(w io.Writer, tty bool, every time.Duration, total int64) *progress {
	if every <= 0 {
		every = 5 * time.Second
		if tty {
			every = 200 * time.Millisecond
		}
	}
	return &progress{w: w, tty: tty, every: every, total: total, done: make(chan struct{})}
}

// update records the relay's latest counts (its Progress callback).
func (p *progress) update(st relay.Stats) {
	p.mu.Lock()
	p.st, p.changed = st, true
	p.mu.Unlock()
}

func (p *progress) start() {
	p.started = time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
}

// stop draws the last state and ends the progress line.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
	p.draw()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	st, changed := p.st, p.changed
	p.changed = false
	p.mu.Unlock()
	if !p.tty && !changed {
		return // no news: no new line
	}
	line := p.line(st)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s%s", ansiClearLine, line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// barWidth is the width of the progress bar in characters.
const barWidth = 30

func (p *progress) line(st relay.Stats) string {
	var b strings.Builder
	n := st.Total()
	if p.total > 0 {
		frac := min(float64(n)/float64(p.total), 1)
		fill := int(frac * barWidth)
		fmt.Fprintf(&b, "[%s%s] %3.0f%% ", strings.Repeat("#", fill), strings.Repeat(".", barWidth-fill), frac*100)
		fmt.Fprintf(&b, "%d/%d moved", n, p.total)
	} else {
		fmt.Fprintf(&b, "%d moved", n)
	}
	fmt.Fprintf(&b, " (ready %d, delayed %d, dead %d, duplicates %d)", st.Moved, st.Delayed, st.Dead, st.Duplicates)
	if secs := time.Since(p.started).Seconds(); secs > 0 {
		fmt.Fprintf(&b, " %.0f msg/s", float64(n)/secs)
	}
	return b.String()
}
