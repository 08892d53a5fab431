package filaotel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/outagelog"
)

// staleAfter is how many poll intervals a queue's last stats stay reported
// when later polls fail; after that its gauges go silent rather than show
// stale numbers.
const staleAfter = 3

// Observer polls the stats of a set of queues and reports them as
// observable gauges: fila.queue.oldest_ready.age per queue,
// fila.queue.messages per queue and state, fila.queue.dead_letters per
// queue and kind; for queues with limits, the concurrency limit and slots
// held, and its client's throttled receives (see the package
// documentation). Create it with NewObserver, then call Run (in its own
// goroutine) or Poll.
//
// Gauges report the numbers of the last successful poll, so a scrape never
// waits for the broker; the oldest-ready age is the age at that poll. A
// queue whose polls keep failing stops being reported after three
// intervals. Drivers that do not report the oldest ready time (RabbitMQ)
// or dead letters per kind have no such series. A kind whose dead letters were all replayed or purged is
// reported as 0, not dropped, so its series ends at zero.
type Observer struct {
	c *fila.Client
	// all: observe every queue Client.QueueList names, listed again at
	// each poll.
	all      bool
	queues   []string // guarded by mu when all is set
	system   string
	interval time.Duration
	log      *slog.Logger
	reg      metric.Registration
	now      func() time.Time

	mu    sync.Mutex
	state map[string]*queueState
}

type queueState struct {
	stats fila.Stats
	age   time.Duration
	okAt  time.Time
	// ageKnown is false when messages are ready but the driver does not
	// report the oldest one's time.
	ageKnown bool
	kinds    map[string]bool // every kind ever seen dead, to report zeros
	// limits is the queue's limits and slots held at the last poll that
	// read them (limitsAt); the driver cannot list marks when noLimits.
	limits   fila.LimitsUsage
	limitsAt time.Time
	noLimits bool
}

// NewObserver returns an Observer of queues on c and registers its gauges
// with the meter provider (WithMeterProvider, default the global one). The
// poll interval is WithPollInterval (default DefaultPollInterval). Call
// Close to unregister the gauges.
//
// With no queues (nil) it observes every queue the broker holds: each poll
// lists them with Client.QueueList first, so queues created later are
// picked up and deleted ones stop being reported. On a driver that cannot
// list queues (RabbitMQ) every poll then fails with fila.ErrUnsupported:
// name the queues there.
func NewObserver(c *fila.Client, queues []string, opts ...Option) (*Observer, error) {
	if queues != nil && len(queues) == 0 {
		return nil, fmt.Errorf("filaotel: NewObserver needs at least one queue, or nil for every queue: %w", fila.ErrInvalid)
	}
	for _, q := range queues {
		if err := fila.ValidateQueueName(q); err != nil {
			return nil, err
		}
	}
	cfg := newConfig(opts)
	o := &Observer{
		c: c, all: queues == nil, queues: append([]string(nil), queues...), system: systemOf(c),
		interval: cfg.interval, log: cfg.log, now: time.Now,
		state: map[string]*queueState{},
	}
	meter := cfg.mp.Meter(ScopeName)
	age, err := meter.Float64ObservableGauge(MetricOldestReadyAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the queue's oldest ready message: how long the head of the queue has waited."))
	if err != nil {
		return nil, err
	}
	msgs, err := meter.Int64ObservableGauge(MetricQueueMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Messages in the queue per state: ready, delayed, leased, dead."))
	if err != nil {
		return nil, err
	}
	dead, err := meter.Int64ObservableGauge(MetricDeadLetters, metric.WithUnit("{message}"),
		metric.WithDescription("Dead letters in the queue per kind."))
	if err != nil {
		return nil, err
	}
	var f flowInstruments
	if f.limit, err = meter.Int64ObservableGauge(MetricConcurrencyLimit, metric.WithUnit("{message}"),
		metric.WithDescription("The queue's concurrency limit: at most this many of its messages leased at once, across all clients.")); err != nil {
		return nil, err
	}
	if f.held, err = meter.Int64ObservableGauge(MetricConcurrencyHeld, metric.WithUnit("{slot}"),
		metric.WithDescription("Concurrency slots held in the queue, by all clients.")); err != nil {
		return nil, err
	}
	if f.throttled, err = meter.Int64ObservableCounter(MetricThrottledReceives, metric.WithUnit("{call}"),
		metric.WithDescription("Receive calls of this process that waited for room under the queue's limits, per limit.")); err != nil {
		return nil, err
	}
	if f.wait, err = meter.Float64ObservableCounter(MetricThrottledWait, metric.WithUnit("s"),
		metric.WithDescription("Time Receive calls of this process waited for room under the queue's limits.")); err != nil {
		return nil, err
	}
	o.reg, err = meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		o.observe(obs, age, msgs, dead)
		o.observeFlow(obs, f)
		return nil
	}, age, msgs, dead, f.limit, f.held, f.throttled, f.wait)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Close unregisters the gauges. It does not close the client.
func (o *Observer) Close() error { return o.reg.Unregister() }

// Run polls every interval until ctx ends, starting at once, and returns
// nil when ctx ends. Failed polls are retried at the next interval and
// logged with a bounded number of lines however long they keep failing: a
// Warn at the first failure, Debug for the next ones with a Warn reminder
// after 1, 2, 4… minutes, an Info when a poll works again.
func (o *Observer) Run(ctx context.Context) error {
	t := time.NewTicker(o.interval)
	defer t.Stop()
	outage := outagelog.New(o.log)
	for {
		if err := o.Poll(ctx); err != nil && ctx.Err() == nil {
			outage.Down("filaotel: reading queue stats failed", slog.Any("error", err))
		} else if err == nil {
			outage.Up("filaotel: reading queue stats works again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll reads every queue's stats and limits once, each within the poll
// interval, and keeps them for the gauges. It returns the joined errors of
// the queues whose stats or limits could not be read (including
// fila.ErrUnsupported from a driver without stats; a driver that keeps no
// limits is not an error).
func (o *Observer) Poll(ctx context.Context) error {
	queues := o.queues
	if o.all {
		lctx, cancel := context.WithTimeout(ctx, o.interval)
		qs, err := o.c.QueueList(lctx)
		cancel()
		if err != nil {
			return fmt.Errorf("listing queues: %w", err)
		}
		queues = qs
		o.mu.Lock()
		o.queues = qs
		for q := range o.state {
			if _, listed := slices.BinarySearch(qs, q); !listed {
				delete(o.state, q)
			}
		}
		o.mu.Unlock()
	}
	var errs []error
	for _, q := range queues {
		qctx, cancel := context.WithTimeout(ctx, o.interval)
		s, err := o.c.QueueStats(qctx, q)
		cancel()
		now := o.now()
		o.mu.Lock()
		st := o.state[q]
		if st == nil {
			st = &queueState{kinds: map[string]bool{}}
			o.state[q] = st
		}
		noLimits := st.noLimits
		o.mu.Unlock()
		var lu fila.LimitsUsage
		var lerr error
		if err == nil && !noLimits {
			// Limits are read only where stats are: one listing of the
			// queue's limits marks, and one of its slots under a
			// concurrency limit.
			lctx, cancel := context.WithTimeout(ctx, o.interval)
			lu, lerr = o.c.QueueLimitsUsage(lctx, q)
			cancel()
		}
		o.mu.Lock()
		switch {
		case errors.Is(lerr, fila.ErrUnsupported):
			st.noLimits = true
		case lerr != nil:
			errs = append(errs, fmt.Errorf("queue %q: limits: %w", q, lerr))
		case err == nil && !noLimits:
			st.limits, st.limitsAt = lu, now
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %q: %w", q, err))
		} else {
			st.stats, st.age, st.okAt = s, s.OldestReadyAge(now), now
			st.ageKnown = s.Ready == 0 || !s.OldestReadyAt.IsZero()
			for k := range s.DeadByKind {
				st.kinds[k] = true
			}
		}
		o.mu.Unlock()
	}
	return errors.Join(errs...)
}

// observe reports the kept stats.
func (o *Observer) observe(obs metric.Observer, age metric.Float64ObservableGauge, msgs, dead metric.Int64ObservableGauge) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	for _, q := range o.queues {
		st := o.state[q]
		if st == nil || st.okAt.IsZero() || now.Sub(st.okAt) > staleAfter*o.interval {
			continue
		}
		base := []attribute.KeyValue{AttrSystem.String(o.system), AttrDestination.String(q)}
		if st.ageKnown {
			obs.ObserveFloat64(age, st.age.Seconds(), metric.WithAttributes(base...))
		}
		for _, sv := range []struct {
			state string
			n     int64
		}{{"ready", st.stats.Ready}, {"delayed", st.stats.Delayed}, {"leased", st.stats.Leased}, {"dead", st.stats.Dead}} {
			obs.ObserveInt64(msgs, sv.n, metric.WithAttributes(append(base, AttrState.String(sv.state))...))
		}
		if st.stats.DeadByKind == nil {
			continue
		}
		kinds := make([]string, 0, len(st.kinds))
		for k := range st.kinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			obs.ObserveInt64(dead, st.stats.DeadByKind[k], metric.WithAttributes(append(base, AttrKind.String(k))...))
		}
	}
}

// flowInstruments are the instruments of queue limits.
type flowInstruments struct {
	limit, held metric.Int64ObservableGauge
	throttled   metric.Int64ObservableCounter
	wait        metric.Float64ObservableCounter
}

// observeFlow reports the kept limits and this client's throttled
// receives. A queue without a concurrency limit has no limit gauges, and
// one whose receives never waited no throttle counters.
func (o *Observer) observeFlow(obs metric.Observer, f flowInstruments) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	for _, q := range o.queues {
		base := []attribute.KeyValue{AttrSystem.String(o.system), AttrDestination.String(q)}
		if st := o.state[q]; st != nil && st.limits.Limits.Concurrency > 0 && now.Sub(st.limitsAt) <= staleAfter*o.interval {
			obs.ObserveInt64(f.limit, int64(st.limits.Limits.Concurrency), metric.WithAttributes(base...))
			obs.ObserveInt64(f.held, int64(st.limits.Held), metric.WithAttributes(base...))
		}
		th := o.c.QueueThrottled(q)
		if th == (fila.Throttled{}) {
			continue
		}
		obs.ObserveInt64(f.throttled, th.SlotWaits, metric.WithAttributes(append(base, AttrLimit.String("concurrency"))...))
		obs.ObserveInt64(f.throttled, th.RateWaits, metric.WithAttributes(append(base, AttrLimit.String("rate"))...))
		obs.ObserveFloat64(f.wait, th.Wait.Seconds(), metric.WithAttributes(base...))
	}
}
