package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fila-go/fila"
)

// The fan-out scenario (issue 17) measures Fila's topics against Fila's own
// single-queue figures of the same run, same system, same bodies and same
// goroutines: publish throughput with k subscriptions against enqueue to one
// queue, and the drain of k subscriptions against the burn-down of one
// queue. Only Fila systems take part (the baselines have no topics); a
// driver that returns ErrUnsupported for topics is reported as such, and the
// run goes on.

// fanouter is a system with topics: Fila over any driver.
type fanouter interface {
	System
	subscribe(ctx context.Context, topic, queue string) error
	// unsubscribe ends the subscription and deletes the queue.
	unsubscribe(ctx context.Context, topic, queue string) error
	// publish publishes bodies to topic (one body: a batch of one, which is
	// what Client.Publish does) and fails if the driver reports that other
	// than subs subscriptions got them.
	publish(ctx context.Context, topic string, bodies [][]byte, subs int) error
	// startQueue runs consumers on queue, as Start does on the run's queue.
	startQueue(ctx context.Context, queue string, concurrency int, onStart func([]byte)) (Consumer, error)
	// forgetTopic removes what the broker keeps of a topic without
	// subscriptions (the API has no call for it).
	forgetTopic(ctx context.Context, topic string) error
}

func (s *filaSystem) subscribe(ctx context.Context, topic, queue string) error {
	return s.client.TopicSubscribe(ctx, topic, queue)
}

func (s *filaSystem) unsubscribe(ctx context.Context, topic, queue string) error {
	return s.client.TopicUnsubscribe(ctx, topic, queue)
}

func (s *filaSystem) forgetTopic(ctx context.Context, topic string) error {
	if s.dropTopic == nil {
		return nil
	}
	return s.dropTopic(ctx, topic)
}

func (s *filaSystem) publish(ctx context.Context, topic string, bodies [][]byte, subs int) error {
	return s.publishKind(ctx, topic, "bench", bodies, subs)
}

// publisher is a fanouter whose Enqueue publishes to its topic, so that
// timedEnqueue and preload drive publishes exactly as they drive enqueues.
type publisher struct {
	fanouter
	topic string
	subs  int
}

func (p publisher) Enqueue(ctx context.Context, bodies [][]byte) error {
	return p.publish(ctx, p.topic, bodies, p.subs)
}

// topicRun is one topic of the scenario and its subscription queues.
type topicRun struct {
	f      fanouter
	topic  string
	queues []string
}

// subscribeAll makes a fresh topic with k subscriptions.
func subscribeAll(ctx context.Context, f fanouter, k int) (*topicRun, error) {
	t := &topicRun{f: f, topic: "bench-topic-" + randSuffix()}
	for i := range k {
		q := fmt.Sprintf("%s-sub%02d", t.topic, i)
		if err := f.subscribe(ctx, t.topic, q); err != nil {
			return t, err
		}
		t.queues = append(t.queues, q)
	}
	return t, nil
}

// close unsubscribes every subscription, which deletes its queue; it runs
// even when ctx is cancelled, so an interrupted run leaves nothing behind.
func (t *topicRun) close(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var errs []error
	for _, q := range t.queues {
		if err := t.f.unsubscribe(cctx, t.topic, q); err != nil {
			errs = append(errs, fmt.Errorf("unsubscribe %s: %w", q, err))
		}
	}
	if len(errs) == 0 && len(t.queues) > 0 {
		if err := t.f.forgetTopic(cctx, t.topic); err != nil {
			errs = append(errs, fmt.Errorf("drop topic %s: %w", t.topic, err))
		}
	}
	return errors.Join(errs...)
}

// fanoutSettings are the scenario's sizes.
type fanoutSettings struct {
	d         time.Duration // per publish or enqueue measurement
	subs      []int         // subscription counts of the publish measurements
	n         int           // messages published for the drain
	drainSubs int           // subscriptions of the drain
	conc      int           // consumer concurrency of each drain
	limit     time.Duration // longest drain
	batch     int           // batch size of the drain's (unmeasured) publishes
}

// fanoutCase is one publish shape, measured the same way for enqueue.
type fanoutCase struct {
	label string
	batch int
}

var fanoutCases = []fanoutCase{{"single, 1 goroutine", 1}, {"batch of 100, 1 goroutine", 100}}

// fanoutPublish is one system's publish figures for one case.
type fanoutPublish struct {
	Broker, System, Case string
	Publish              []fanoutPoint
	Unsupported          string // why the system has no topics; nothing was measured
	// Load is the load average around the system's fan-out run (see
	// stamped).
	Load result
}

// fanoutPoint is the publish rate with Subs subscriptions (published
// messages per second, each stored Subs times) and the rate of enqueue to
// one queue measured interleaved with it, in msg/s.
type fanoutPoint struct {
	Subs             int
	Publish, Enqueue float64
}

func (p fanoutPublish) at(k int) (fanoutPoint, bool) {
	for _, pt := range p.Publish {
		if pt.Subs == k {
			return pt, true
		}
	}
	return fanoutPoint{}, false
}

// fanoutSlice is the length of one slice of the interleaved publish and
// enqueue measurements.
const fanoutSlice = 500 * time.Millisecond

// fanoutDrain is one system's drain figures.
type fanoutDrain struct {
	Broker, System string
	N, Subs, Conc  int
	// Single is the burn-down of one queue holding N at Conc, in msg/s:
	// the mean of one before the drains and one after (SingleRuns).
	Single     float64
	SingleRuns [2]float64
	// Apart: each subscription drained alone, one after another; Together:
	// all at once, each by its own worker at Conc. Per subscription, msg/s.
	Apart, Together           []float64
	ApartTotal, TogetherTotal float64 // Subs×N over the drain time
	Notes                     []string
	Unsupported               string
	Load                      result // the load average around the run, as in fanoutPublish
}

// fanoutScenario measures publish throughput and the drain of
// subscriptions on s, which takes part only if it is a fanouter.
func fanoutScenario(ctx context.Context, broker string, s System, st fanoutSettings) ([]fanoutPublish, []fanoutDrain, error) {
	f, ok := s.(fanouter)
	if !ok {
		return nil, nil, nil
	}
	// Probe: a driver without topics says so at the first subscribe.
	if err := s.Setup(ctx); err != nil {
		return nil, nil, err
	}
	progress.set(fmt.Sprintf("%s %s: fan-out probe", broker, s.Name()))
	probe, err := subscribeAll(ctx, f, 1)
	if cerr := probe.close(ctx); err == nil {
		err = cerr
	}
	if terr := s.Teardown(ctx); terr != nil {
		logf("%s teardown: %v", s.Name(), terr)
	}
	if errors.Is(err, fila.ErrUnsupported) {
		why := err.Error()
		var pubs []fanoutPublish
		for _, c := range fanoutCases {
			pubs = append(pubs, fanoutPublish{Broker: broker, System: s.Name(), Case: c.label, Unsupported: why})
		}
		return pubs, []fanoutDrain{{Broker: broker, System: s.Name(), Unsupported: why}}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("fan-out probe: %w", err)
	}

	var pubs []fanoutPublish
	for _, c := range fanoutCases {
		p := fanoutPublish{Broker: broker, System: s.Name(), Case: c.label}
		for _, k := range st.subs {
			pt, err := fanoutPublishRate(ctx, broker, f, c, k, st.d)
			if err != nil {
				return pubs, nil, fmt.Errorf("publish to %d subscriptions, %s: %w", k, c.label, err)
			}
			p.Publish = append(p.Publish, pt)
		}
		pubs = append(pubs, p)
	}
	d, err := fanoutDrainScenario(ctx, broker, f, st)
	return pubs, []fanoutDrain{d}, err
}

// fanoutPublishRate publishes for d to a fresh topic with k subscriptions,
// and enqueues for d to the run's queue, in slices of fanoutSlice taken
// in turn (enqueue, publish, publish, enqueue, ...), so that a load spike
// on the shared machine lands on both sides alike. It returns both rates.
func fanoutPublishRate(ctx context.Context, broker string, f fanouter, c fanoutCase, k int, d time.Duration) (fanoutPoint, error) {
	pt := fanoutPoint{Subs: k}
	if err := f.Setup(ctx); err != nil {
		return pt, err
	}
	defer func() {
		if terr := f.Teardown(ctx); terr != nil {
			logf("%s teardown: %v", f.Name(), terr)
		}
	}()
	t, err := subscribeAll(ctx, f, k)
	defer func() {
		if cerr := t.close(ctx); cerr != nil {
			logf("%s: %v", f.Name(), cerr)
		}
	}()
	if err != nil {
		return pt, err
	}
	progress.set(fmt.Sprintf("%s %s: fan-out publish to %d subscriptions and enqueue, %s", broker, f.Name(), k, c.label))
	pub := publisher{f, t.topic, k}
	slices := 2 * max(1, int((d+fanoutSlice/2)/fanoutSlice))
	slice := d / time.Duration(slices/2)
	var nEnq, nPub int64
	var elEnq, elPub time.Duration
	for i := range slices {
		if ctx.Err() != nil {
			return pt, ctx.Err()
		}
		if i%4 == 0 || i%4 == 3 {
			n, el, err := timedEnqueue(ctx, f, 1, c.batch, slice)
			if err != nil {
				return pt, fmt.Errorf("enqueue: %w", err)
			}
			nEnq, elEnq = nEnq+n, elEnq+el
		} else {
			n, el, err := timedEnqueue(ctx, pub, 1, c.batch, slice)
			if err != nil {
				return pt, err
			}
			nPub, elPub = nPub+n, elPub+el
		}
	}
	pt.Enqueue = float64(nEnq) / elEnq.Seconds()
	pt.Publish = float64(nPub) / elPub.Seconds()
	return pt, nil
}

// fanoutDrainScenario publishes N messages to k subscriptions and drains
// them one subscription at a time, then (on a fresh topic) all at once,
// between two single-queue burn-downs of N whose mean is the baseline.
func fanoutDrainScenario(ctx context.Context, broker string, f fanouter, st fanoutSettings) (fanoutDrain, error) {
	d := fanoutDrain{Broker: broker, System: f.Name(), N: st.n, Subs: st.drainSubs, Conc: st.conc}
	single := func(i int) error {
		rs, err := burnDownScenario(ctx, broker, f, st.n, []int{st.conc}, st.limit, st.batch)
		if err != nil {
			return fmt.Errorf("fan-out drain baseline: %w", err)
		}
		d.SingleRuns[i] = rs[0].Value
		if rs[0].Note != "" {
			d.Notes = append(d.Notes, "one queue: "+rs[0].Note)
		}
		return nil
	}
	if err := single(0); err != nil {
		return d, err
	}
	var err error
	d.Apart, d.ApartTotal, err = fanoutDrainRun(ctx, broker, f, st, false, &d.Notes)
	if err != nil {
		return d, fmt.Errorf("fan-out drain, one at a time: %w", err)
	}
	d.Together, d.TogetherTotal, err = fanoutDrainRun(ctx, broker, f, st, true, &d.Notes)
	if err != nil {
		return d, fmt.Errorf("fan-out drain, all at once: %w", err)
	}
	if err := single(1); err != nil {
		return d, err
	}
	d.Single = (d.SingleRuns[0] + d.SingleRuns[1]) / 2
	return d, nil
}

// fanoutDrainRun publishes N messages to a fresh topic with drainSubs
// subscriptions (not measured) and drains them at conc per subscription,
// all at once (together) or one after another, for at most limit per
// drain. It returns each subscription's rate and the total: every message
// drained over the time the drain took. A drain cut by the limit is rated
// done/limit and noted, as burn-down does.
func fanoutDrainRun(ctx context.Context, broker string, f fanouter, st fanoutSettings, together bool, notes *[]string) ([]float64, float64, error) {
	if err := f.Setup(ctx); err != nil {
		return nil, 0, err
	}
	defer func() {
		if terr := f.Teardown(ctx); terr != nil {
			logf("%s teardown: %v", f.Name(), terr)
		}
	}()
	t, err := subscribeAll(ctx, f, st.drainSubs)
	defer func() {
		if cerr := t.close(ctx); cerr != nil {
			logf("%s: %v", f.Name(), cerr)
		}
	}()
	if err != nil {
		return nil, 0, err
	}
	how := "one at a time"
	if together {
		how = "all at once"
	}
	progress.set(fmt.Sprintf("%s %s: fan-out preload %d to %d subscriptions", broker, f.Name(), st.n, st.drainSubs))
	if err := preload(ctx, publisher{f, t.topic, st.drainSubs}, st.n, st.batch); err != nil {
		return nil, 0, fmt.Errorf("preload: %w", err)
	}
	n := int64(st.n)
	rates := make([]float64, len(t.queues))
	var doneAll int64
	var took time.Duration
	// drain runs consumers on queues until each has n done or limit, and
	// records each one's rate.
	drain := func(idx []int) error {
		progress.set(fmt.Sprintf("%s %s: fan-out drain of %d subscriptions %s, c=%d", broker, f.Name(), st.drainSubs, how, st.conc))
		cons := make([]Consumer, 0, len(idx))
		defer func() {
			for _, c := range cons {
				if err := c.Stop(); err != nil {
					logf("%s stop: %v", f.Name(), err)
				}
			}
		}()
		start := time.Now()
		for _, i := range idx {
			c, err := f.startQueue(ctx, t.queues[i], st.conc, func([]byte) {})
			if err != nil {
				return err
			}
			cons = append(cons, c)
		}
		finish := make([]time.Duration, len(idx))
		done := make([]int64, len(idx))
		for {
			all := true
			var sum int64
			for j, c := range cons {
				done[j] = c.Done()
				sum += min(done[j], n)
				if finish[j] == 0 && done[j] >= n {
					finish[j] = time.Since(start)
				}
				all = all && finish[j] != 0
			}
			progress.setCount(sum, n*int64(len(idx)))
			if all || time.Since(start) >= st.limit || ctx.Err() != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		el := time.Since(start)
		last := time.Duration(0)
		for j, i := range idx {
			if finish[j] == 0 {
				finish[j] = el
				*notes = append(*notes, fmt.Sprintf("%s, %s: stopped at %v limit: %d of %d done", how, t.queues[i], st.limit, done[j], n))
			}
			rates[i] = float64(done[j]) / finish[j].Seconds()
			doneAll += done[j]
			last = max(last, finish[j])
		}
		took += last
		return nil
	}
	if together {
		idx := make([]int, len(t.queues))
		for i := range idx {
			idx[i] = i
		}
		err = drain(idx)
	} else {
		for i := range t.queues {
			if err = drain([]int{i}); err != nil {
				break
			}
		}
	}
	if err != nil || took <= 0 {
		return rates, 0, err
	}
	return rates, float64(doneAll) / took.Seconds(), nil
}

// fanoutTargetSystems are the systems issue 17 sets its publish target for:
// publishing to 5 subscriptions at least 0.8× enqueue to one queue.
var fanoutTargetSystems = []struct{ broker, system, label string }{
	{"postgres", filaLogName, "PostgreSQL log mode"},
	{"redis", "fila", "Redis"},
	{"rabbitmq", "fila", "RabbitMQ"},
}

const (
	fanoutTargetSubs  = 5
	fanoutTargetRatio = 0.8
)

// fanoutMarkdown renders the fan-out tables and the targets of issue 17.
func fanoutMarkdown(pubs []fanoutPublish, drains []fanoutDrain, cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Fan-out (issue 17): publish throughput\n\n"+
		"Each cell: published messages per second (each stored once per subscription) / enqueue to one queue in msg/s "+
		"(publish ÷ enqueue). Same system, same %d-byte bodies, one goroutine; each pair measured %v a side, "+
		"interleaved in slices of about %v (enqueue, publish, publish, enqueue, ...) on one fresh queue and topic.\n\n",
		bodySize, cfg.enqueueDur, fanoutSlice)
	b.WriteString("| broker | system | case |")
	for _, k := range cfg.fanoutSubs {
		fmt.Fprintf(&b, " %d %s |", k, plural(k, "subscription"))
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---:|", len(cfg.fanoutSubs)) + "\n")
	var notes []string
	for _, p := range pubs {
		if p.Unsupported != "" {
			fmt.Fprintf(&b, "| %s | %s | %s | unsupported |%s\n", p.Broker, p.System, p.Case, strings.Repeat(" |", len(cfg.fanoutSubs)-1))
			continue
		}
		sys := p.System
		if underLoad(p.Load) {
			sys += loadMark
			if p.Case == fanoutCases[0].label {
				notes = append(notes, loadNote(p.Broker+" "+p.System+" fan-out", p.Load))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |", p.Broker, sys, p.Case)
		for _, k := range cfg.fanoutSubs {
			pt, ok := p.at(k)
			if !ok {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(&b, " %s / %s (×%.2f) |", formatValue(pt.Publish, "msg/s"), formatValue(pt.Enqueue, "msg/s"), ratio(pt.Publish, pt.Enqueue))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, p := range pubs {
		if p.Unsupported != "" && p.Case == fanoutCases[0].label {
			notes = append(notes, fmt.Sprintf("%s %s: %s", p.Broker, p.System, p.Unsupported))
		}
	}

	if len(drains) > 0 {
		fmt.Fprintf(&b, "### Fan-out (issue 17): drain of the subscriptions\n\n"+
			"N messages published to k subscriptions, then every subscription drained (receive + ack) by its own worker at "+
			"concurrency c: one subscription at a time, and all at once; against the burn-down of one queue holding N at c, "+
			"measured before and after them (the mean). Per subscription: mean (min–max) msg/s; total: k×N over the whole drain. "+
			"Ratios are to the one-queue burn-down.\n\n")
		b.WriteString("| broker | system | N | k | c | burn-down, 1 queue | one at a time, per subscription | one at a time, total | " +
			"all at once, per subscription | all at once, total |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, d := range drains {
			if d.Unsupported != "" {
				fmt.Fprintf(&b, "| %s | %s | | | | unsupported | | | | |\n", d.Broker, d.System)
				continue
			}
			sys := d.System
			if underLoad(d.Load) {
				sys += loadMark
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s | %s | %s | %s |\n", d.Broker, sys, d.N, d.Subs, d.Conc,
				formatValue(d.Single, "msg/s"), spread(d.Apart, d.Single), withRatio(d.ApartTotal, d.Single),
				spread(d.Together, d.Single), withRatio(d.TogetherTotal, d.Single))
			lo, hi := min(d.SingleRuns[0], d.SingleRuns[1]), max(d.SingleRuns[0], d.SingleRuns[1])
			if lo > 0 && hi/lo > 1.25 {
				notes = append(notes, fmt.Sprintf("%s %s drain: the one-queue burn-down moved from %s to %s msg/s between before and after (noisy machine)",
					d.Broker, d.System, formatValue(d.SingleRuns[0], "msg/s"), formatValue(d.SingleRuns[1], "msg/s")))
			}
			for _, n := range d.Notes {
				notes = append(notes, fmt.Sprintf("%s %s drain: %s", d.Broker, d.System, n))
			}
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("Fan-out notes:\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}

	var rows []string
	for _, t := range fanoutTargetSystems {
		for _, p := range pubs {
			if p.Broker != t.broker || p.System != t.system {
				continue
			}
			what := fmt.Sprintf("%s publish to %d subscriptions ≥ %.1f× enqueue (%s)", t.label, fanoutTargetSubs, fanoutTargetRatio, p.Case)
			if p.Unsupported != "" {
				rows = append(rows, fmt.Sprintf("| %s | unsupported | not measured |", what))
				continue
			}
			pt, ok := p.at(fanoutTargetSubs)
			if !ok {
				continue
			}
			got := ratio(pt.Publish, pt.Enqueue)
			verdict := "met"
			if got < fanoutTargetRatio {
				verdict = fmt.Sprintf("missed by %.0f%%", (fanoutTargetRatio-got)/fanoutTargetRatio*100)
			}
			rows = append(rows, fmt.Sprintf("| %s | ×%.2f | %s |", what, got, verdict))
		}
	}
	if len(rows) > 0 {
		b.WriteString("### Targets (issue 17)\n\n| target | figure | verdict |\n|---|---:|---|\n")
		b.WriteString(strings.Join(rows, "\n") + "\n\n")
	}
	return b.String()
}

func ratio(v, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return v / base
}

func withRatio(v, base float64) string {
	return fmt.Sprintf("%s (×%.2f)", formatValue(v, "msg/s"), ratio(v, base))
}

// spread is "mean (min–max) (×ratio of the mean)" of per-subscription rates.
func spread(rates []float64, base float64) string {
	if len(rates) == 0 {
		return ""
	}
	lo, hi, sum := rates[0], rates[0], 0.0
	for _, r := range rates {
		lo, hi, sum = min(lo, r), max(hi, r), sum+r
	}
	mean := sum / float64(len(rates))
	return fmt.Sprintf("%s (%s–%s) (×%.2f)", formatValue(mean, "msg/s"), formatValue(lo, "msg/s"), formatValue(hi, "msg/s"), ratio(mean, base))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
