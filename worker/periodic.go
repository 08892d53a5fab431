package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/outagelog"
)

// HeaderScheduledAt is the header every run of a periodic job carries: the
// tick it was enqueued for, in RFC 3339 with nanoseconds in UTC
// (ScheduledAtLayout), the same string in whichever process enqueued it.
const HeaderScheduledAt = "Fila-Scheduled-At"

// ScheduledAtLayout is the time layout of HeaderScheduledAt's value:
// RFC 3339 with nine fractional digits, always in UTC, so values sort as
// strings. time.Parse(time.RFC3339Nano, v) reads it.
const ScheduledAtLayout = "2006-01-02T15:04:05.000000000Z07:00"

// MinEvery is the shortest Periodic.Every.
const MinEvery = time.Second

// MissedPolicy says what a starting worker does about a tick of a schedule
// that passed while no process ran it.
type MissedPolicy int

const (
	// MissedSkip, the default, runs no tick that passed before the worker
	// started: the first tick it runs is the first one after its start.
	MissedSkip MissedPolicy = iota
	// MissedRunOnce enqueues, at the worker's start, the most recent tick
	// before then if no process ever enqueued it (its mark is absent), once
	// however many ticks were missed. Ticks before that one are not run.
	MissedRunOnce
)

// String returns "skip" or "run-once".
func (m MissedPolicy) String() string {
	switch m {
	case MissedSkip:
		return "skip"
	case MissedRunOnce:
		return "run-once"
	}
	return "MissedPolicy(" + strconv.Itoa(int(m)) + ")"
}

// Periodic is a schedule a Worker runs: at each of its ticks, one copy of
// Message is enqueued in Queue, once however many processes run a Worker
// with the same schedule (see "Periodic jobs" in the package documentation).
type Periodic struct {
	// Name identifies the schedule across processes: every process whose
	// Worker has a Periodic of this Name and Queue takes part in it. It
	// follows the rules of queue names (fila.ValidateQueueName) and is
	// unique within a Config. Renaming a schedule makes it a new one.
	Name string
	// Queue is where runs are enqueued, and where the schedule's marks are
	// kept. It need not be one the worker serves.
	Queue string

	// Cron is a standard 5-field cron expression (minute, hour, day of
	// month, month, day of week: "30 9 * * 1-5") or a descriptor (@yearly,
	// @monthly, @weekly, @daily, @midnight, @hourly), read in Location.
	// "@every" and CRON_TZ= prefixes are refused: use Every and Location.
	// Set Cron or Every, not both.
	Cron string
	// Every runs the schedule at a fixed interval: its ticks are the
	// multiples of Every since the Unix epoch (Every: time.Hour ticks on
	// every full hour of UTC), so every process computes the same ticks. At
	// least MinEvery.
	Every time.Duration
	// Location is the time zone Cron is read in; nil means UTC. A wall
	// time that a daylight-saving change skips does not run that day; one
	// it repeats runs at both instants (see the package documentation).
	// Every ignores time zones, and setting Location with Every is an
	// error.
	Location *time.Location

	// Message is the template of each run. Each enqueued copy gets the
	// header HeaderScheduledAt; where the driver enforces dedup keys, the
	// copy's DedupKey is "fila.periodic/<Name>/<tick in Unix ns>". Kind is
	// required; RunAt and DedupKey must be empty (Delay is allowed: the run
	// becomes ready that long after its tick's enqueue).
	Message fila.Message

	// Missed is what a starting worker does about a tick that passed while
	// no process ran the schedule; default MissedSkip.
	Missed MissedPolicy
}

// Periodic timing.
const (
	// periodicMaxLate is how long after the following tick a process that
	// woke late still enqueues a tick: a process asleep (a stalled machine,
	// a suspended VM) for longer skips the ticks it missed, which the
	// other processes ran.
	periodicMaxLate = 10 * time.Second
	// periodicMarkSlack is how long a tick's mark outlives the following
	// tick: the lateness above plus a minute of clock skew between
	// processes, so no process can find a tick's mark expired while it
	// may still try that tick.
	periodicMarkSlack = time.Minute + periodicMaxLate
	// periodicMaxSleep caps the scheduler's sleep, so it notices a step of
	// the wall clock (or a suspend, during which Go's timers stand still)
	// within that long.
	periodicMaxSleep = time.Minute
	// Enqueue and claim retries: from periodicRetryMin doubling up to
	// periodicRetryMax, until the following tick.
	periodicRetryMin = 100 * time.Millisecond
	periodicRetryMax = 2 * time.Second
)

// schedule is a checked Periodic.
type schedule struct {
	Periodic
	cron cron.Schedule // nil with Every
}

// parsePeriodic checks ps and returns their schedules.
func parsePeriodic(ps []Periodic) ([]*schedule, error) {
	out := make([]*schedule, 0, len(ps))
	names := make(map[string]bool, len(ps))
	for i, p := range ps {
		s, err := parseSchedule(p)
		if err != nil {
			if p.Name == "" {
				return nil, fmt.Errorf("worker: Config.Periodic[%d]: %w", i, err)
			}
			return nil, fmt.Errorf("worker: periodic %q: %w", p.Name, err)
		}
		if names[p.Name] {
			return nil, fmt.Errorf("worker: periodic %q: the name is used twice in Config.Periodic", p.Name)
		}
		names[p.Name] = true
		out = append(out, s)
	}
	return out, nil
}

func parseSchedule(p Periodic) (*schedule, error) {
	if err := fila.ValidateQueueName(p.Name); err != nil {
		return nil, fmt.Errorf("Name follows the rules of queue names: %w", err)
	}
	if err := fila.ValidateQueueName(p.Queue); err != nil {
		return nil, fmt.Errorf("Queue: %w", err)
	}
	s := &schedule{Periodic: p}
	switch {
	case p.Cron != "" && p.Every != 0:
		return nil, errors.New("set Cron or Every, not both")
	case p.Cron == "" && p.Every == 0:
		return nil, errors.New("set Cron or Every")
	case p.Every != 0:
		if p.Every < MinEvery {
			return nil, fmt.Errorf("Every %v is shorter than %v", p.Every, MinEvery)
		}
		if p.Location != nil {
			return nil, errors.New("Location applies to Cron only; Every ticks at multiples of Every since the Unix epoch")
		}
	default:
		spec := strings.TrimSpace(p.Cron)
		if strings.HasPrefix(spec, "@every") {
			return nil, fmt.Errorf("Cron %q: @every is not anchored to the clock, so processes would disagree on its ticks; use Every", p.Cron)
		}
		if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
			return nil, fmt.Errorf("Cron %q: set the time zone with Location, not in the expression", p.Cron)
		}
		if s.Location == nil {
			s.Location = time.UTC
		}
		sched, err := cron.ParseStandard(spec)
		if err != nil {
			return nil, fmt.Errorf("Cron %q: %w", p.Cron, err)
		}
		s.cron = sched
		if s.next(time.Now()).IsZero() {
			return nil, fmt.Errorf("Cron %q never fires", p.Cron)
		}
	}
	switch p.Missed {
	case MissedSkip, MissedRunOnce:
	default:
		return nil, fmt.Errorf("Missed %v is not a MissedPolicy", p.Missed)
	}
	if p.Message.Kind == "" {
		return nil, errors.New("Message.Kind is empty")
	}
	if !p.Message.RunAt.IsZero() {
		return nil, errors.New("Message.RunAt is set; each run is enqueued at its tick (Message.Delay may delay it)")
	}
	if p.Message.DedupKey != "" {
		return nil, errors.New("Message.DedupKey is set; the scheduler sets each run's dedup key")
	}
	return s, nil
}

// next returns the schedule's first tick strictly after t, in UTC, or the
// zero time if a cron schedule has none within five years.
func (s *schedule) next(t time.Time) time.Time {
	if s.cron == nil {
		e := int64(s.Every)
		return time.Unix(0, (floorDiv(t.UnixNano(), e)+1)*e).UTC()
	}
	n := s.cron.Next(t.In(s.Location))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// prev returns the schedule's last tick at or before t, in UTC; ok is false
// when a cron schedule had none in the eight years before t.
func (s *schedule) prev(t time.Time) (tick time.Time, ok bool) {
	if s.cron == nil {
		e := int64(s.Every)
		return time.Unix(0, floorDiv(t.UnixNano(), e)*e).UTC(), true
	}
	// Cron has no inverse: walk forwards from ever further back. Once a
	// window finds no tick, the next (four times as long) holds ticks
	// only in its earlier three quarters, so the walk stays short.
	for w := time.Minute; w <= 8*366*24*time.Hour; w *= 4 {
		var last time.Time
		for n := s.next(t.Add(-w)); !n.IsZero() && !n.After(t); n = s.next(n) {
			last = n
		}
		if !last.IsZero() {
			return last, true
		}
	}
	return time.Time{}, false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// markName is the name of the mark that claims tick of schedule name.
func markName(name string, tick time.Time) string {
	return "periodic/" + name + "/" + strconv.FormatInt(tick.UnixNano(), 10)
}

// dedupKey is the dedup key of the run of tick of schedule name.
func dedupKey(name string, tick time.Time) string {
	return "fila.periodic/" + name + "/" + strconv.FormatInt(tick.UnixNano(), 10)
}

// checkMarker returns the driver's marks, or an ErrUnsupported error when
// periodic jobs are configured and the driver has none.
func checkMarker(c *fila.Client) (backend.Marker, error) {
	if m, ok := c.Driver().(backend.Marker); ok {
		return m, nil
	}
	return nil, fmt.Errorf("worker: Config.Periodic needs marks in the broker, so that each tick is enqueued by one process: %w",
		&fila.UnsupportedError{Driver: driverName(c), Capability: "marks (backend.Marker)"})
}

// runScheduler enqueues the runs of the worker's schedules until ctx ends,
// then waits for the runs under way. It calls fail, and goes on until ctx
// ends, when the client was closed.
func (w *Worker) runScheduler(ctx context.Context, fail func(error)) {
	var runs sync.WaitGroup
	defer runs.Wait()
	fire := func(s *schedule, tick time.Time) {
		runs.Add(1)
		go func() {
			defer runs.Done()
			if err := w.enqueueTick(ctx, s, tick); errors.Is(err, fila.ErrClosed) {
				fail(fmt.Errorf("worker: periodic %q: %w", s.Name, err))
			}
		}()
	}

	now := time.Now()
	next := make([]time.Time, len(w.schedules))
	for i, s := range w.schedules {
		next[i] = s.next(now)
		w.log.Debug("fila worker: periodic schedule started", slog.String("periodic", s.Name),
			slog.String("queue", s.Queue), slog.Time("next", next[i]), slog.String("missed", s.Missed.String()))
		if s.Missed == MissedRunOnce {
			// The last tick's mark lives until the next tick and more:
			// whoever enqueued it, its claim is still there.
			if prev, ok := s.prev(now); ok {
				fire(s, prev)
			}
		}
	}
	for {
		var earliest time.Time
		for _, n := range next {
			if !n.IsZero() && (earliest.IsZero() || n.Before(earliest)) {
				earliest = n
			}
		}
		if earliest.IsZero() {
			<-ctx.Done() // no schedule fires any more
			return
		}
		if d := time.Until(earliest); d > 0 {
			if !sleep(ctx, min(d, periodicMaxSleep)) {
				return
			}
			continue // check the wall clock again
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		for i, s := range w.schedules {
			skipped := 0
			var first time.Time
			t := next[i]
			for !t.IsZero() && !t.After(now) {
				after := s.next(t)
				if after.IsZero() || now.Before(after.Add(periodicMaxLate)) {
					fire(s, t)
				} else {
					if skipped == 0 {
						first = t
					}
					skipped++
				}
				t = after
			}
			next[i] = t
			if skipped > 0 {
				w.log.Warn("fila worker: this process woke too late for some ticks of a periodic schedule and skipped them (other processes running the schedule may have enqueued them)",
					slog.String("periodic", s.Name), slog.String("queue", s.Queue),
					slog.Int("skipped", skipped), slog.Time("first", first))
			}
		}
	}
}

// enqueueTick claims tick of s and, if this process won the claim, enqueues
// its run, retrying transient failures until the following tick. A run
// that cannot be enqueued by then gives its claim back and is logged as
// missed; the error is returned.
func (w *Worker) enqueueTick(ctx context.Context, s *schedule, tick time.Time) error {
	following := s.next(tick)
	until := following.Add(periodicMarkSlack)
	deadline := following
	if following.IsZero() { // the schedule's last tick for five years
		until = tick.Add(24 * time.Hour)
		deadline = tick.Add(time.Minute)
	}
	mark := markName(s.Name, tick)
	log := w.log.With(slog.String("periodic", s.Name), slog.String("queue", s.Queue),
		slog.String("tick", tick.Format(ScheduledAtLayout)))

	var won bool
	err := w.persist(ctx, deadline, log, "claim", func(ctx context.Context) error {
		var err error
		won, err = w.marker.MarkSet(ctx, s.Queue, mark, until, true)
		return err
	})
	if err != nil {
		// An error can hide a claim the broker stored: a retry then finds
		// the mark and no process enqueues the tick. Nothing tells the two
		// apart, and enqueueing anyway could run the tick twice.
		log.Error("fila worker: could not claim a periodic run; it is missed unless another process claimed it",
			slog.Any("error", err))
		return err
	}
	if !won {
		log.Debug("fila worker: periodic run claimed by another process")
		return nil
	}

	m := s.Message
	m.Headers = maps.Clone(m.Headers)
	if m.Headers == nil {
		m.Headers = make(map[string]string, 1)
	}
	m.Headers[HeaderScheduledAt] = tick.UTC().Format(ScheduledAtLayout)
	if w.dedup {
		m.DedupKey = dedupKey(s.Name, tick)
	}
	var id string
	err = w.persist(ctx, deadline, log, "enqueue", func(ctx context.Context) error {
		var err error
		id, err = w.c.Enqueue(ctx, s.Queue, m)
		var dup *fila.DuplicateError
		if errors.As(err, &dup) {
			// An earlier attempt stored it although it failed.
			id, err = dup.ID, nil
		}
		return err
	})
	if err != nil {
		// Give the claim back, so that a process that may still try this
		// tick can enqueue it.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		derr := w.marker.MarkDelete(dctx, s.Queue, mark)
		cancel()
		log.Error("fila worker: periodic run missed: enqueueing it failed", slog.Any("error", err),
			slog.Any("release_error", derr))
		return err
	}
	log.Debug("fila worker: periodic run enqueued", slog.String("id", id))
	return nil
}

// persist calls f until it succeeds, fails with an error a retry cannot
// cure, ctx ends or the next retry would start at or after deadline; f runs
// at least once. Each call has its own timeout, not ended by ctx, so a run
// claimed just before shutdown is still enqueued.
func (w *Worker) persist(ctx context.Context, deadline time.Time, log *slog.Logger, what string, f func(context.Context) error) error {
	outage := outagelog.New(log)
	wait := periodicRetryMin
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		err := f(actx)
		cancel()
		if err == nil {
			outage.Up("fila worker: periodic " + what + " works again")
			return nil
		}
		if !errors.Is(err, fila.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if ctx.Err() != nil || !time.Now().Add(wait).Before(deadline) {
			return err
		}
		outage.Down("fila worker: periodic "+what+" failed; retrying", slog.Any("error", err), slog.Duration("retry_in", wait))
		if !sleep(ctx, wait) {
			return err
		}
		wait = min(wait*2, periodicRetryMax)
	}
}
