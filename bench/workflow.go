package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/mongo"
	"github.com/fila-go/fila/mysql"
	"github.com/fila-go/fila/postgres"
	"github.com/fila-go/fila/rabbitmq"
	"github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

// The workflow scenario measures what a workflow's bookkeeping costs a
// chain of steps (issue: "a chain of 10 steps: end-to-end time and broker
// round trips per step, per broker"). For each Fila system it runs, one
// after the other, chains of --workflow-steps steps two ways on one
// client and one worker (concurrency 1 per queue):
//
//   - plain: what users write by hand today, a message whose handler
//     enqueues the next one, --workflow-steps of them in a row on one queue;
//   - workflow: one WorkflowStart of as many steps, each After the one
//     before, all on one queue; the ack of step k releases step k+1.
//
// The two alternate (plain first in even runs, workflow first in odd
// ones), so a load spike lands on both. A chain's time runs from the
// first call (Enqueue, WorkflowStart) to the worker's report that the last
// step's ack is stored. Round trips are counted by wrapping the driver
// given to fila.New (countedDriver): each driver call counts as one round
// trip, whatever the driver does inside it.

// workflowSettings are the flags of the workflow scenario.
type workflowSettings struct {
	runs  int // chains of each kind per system
	steps int // steps per chain
}

// workflowCase is one Fila system's measurement.
type workflowCase struct {
	Broker, System string
	Steps, Runs    int
	// Plain and Flow are the chains' end-to-end times, in run order.
	Plain, Flow []time.Duration
	// PlainCalls and FlowCalls are the driver calls each chain made.
	PlainCalls, FlowCalls []int64
	// PlainBy and FlowBy sum the calls of all chains by method.
	PlainBy, FlowBy map[string]int64
	// Caps names the optional interfaces the wrapped driver has.
	Caps       []string
	LoadBefore float64
	LoadAfter  float64
	Note       string
}

// openers opens a driver by URL scheme, as fila.Open would, so the
// scenario can wrap the driver before fila.New sees it.
var openers = map[string]backend.Opener{
	"mem": memory.Open, "postgres": postgres.Open, "postgresql": postgres.Open,
	"redis": redis.Open, "rediss": redis.Open, "amqp": rabbitmq.Open, "amqps": rabbitmq.Open,
	"mongodb": mongo.Open, "mongodb+srv": mongo.Open, "mysql": mysql.Open,
}

func openCounted(ctx context.Context, rawURL string) (*fila.Client, *callCounter, []string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, nil, err
	}
	open := openers[strings.ToLower(u.Scheme)]
	if open == nil {
		return nil, nil, nil, fmt.Errorf("no driver for scheme %q", u.Scheme)
	}
	drv, err := open(ctx, u, backend.OpenOptions{Logger: quietLogger()})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s: %w", fila.Redact(rawURL), err)
	}
	n := &callCounter{n: map[string]int64{}}
	wrapped, caps, err := newCountedDriver(drv, n)
	if err != nil {
		_ = drv.Close()
		return nil, nil, nil, err
	}
	c, err := fila.New(wrapped, fila.WithLogger(quietLogger()))
	if err != nil {
		_ = drv.Close()
		return nil, nil, nil, err
	}
	return c, n, caps, nil
}

// workflowScenario runs the scenario on every Fila system of systems.
func workflowScenario(ctx context.Context, broker string, systems []System, st workflowSettings) ([]workflowCase, error) {
	var cases []workflowCase
	var errs []error
	for _, s := range systems {
		fs, ok := s.(*filaSystem)
		if !ok {
			continue
		}
		var wc workflowCase
		var err error
		load := loadAround(fmt.Sprintf("%s %s workflow", broker, fs.Name()), func() {
			wc, err = workflowRun(ctx, broker, fs, st)
		})
		wc.LoadBefore, wc.LoadAfter = load.LoadBefore, load.LoadAfter
		if err != nil {
			errs = append(errs, fmt.Errorf("%s workflow: %w", fs.Name(), err))
			if wc.Note == "" {
				continue
			}
		}
		cases = append(cases, wc)
	}
	return cases, errors.Join(errs...)
}

// workflowRun measures one system: st.runs chains of each kind.
func workflowRun(ctx context.Context, broker string, fs *filaSystem, st workflowSettings) (wc workflowCase, err error) {
	wc = workflowCase{Broker: broker, System: fs.Name(), Steps: st.steps, PlainBy: map[string]int64{}, FlowBy: map[string]int64{}}
	if err := fs.connect(ctx); err != nil {
		return wc, err
	}
	c, n, caps, err := openCounted(ctx, fs.url)
	if err != nil {
		return wc, err
	}
	wc.Caps = caps
	defer c.Close()
	sfx := randSuffix()
	qPlain, qFlow := "wf-plain-"+sfx, "wf-steps-"+sfx
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, q := range []string{qPlain, qFlow} {
			if derr := c.QueueDelete(cctx, q, fila.QueueDeleteParams{Force: true}); derr != nil {
				logf("%s %s workflow: deleting %s: %v", broker, fs.Name(), q, derr)
			}
		}
	}()

	// ends reports each chain's end: the queue whose last step's ack was
	// stored, or an error for a step that did not end with an ack.
	type end struct {
		queue string
		err   error
	}
	ends := make(chan end, 16)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := worker.New(c, worker.Config{
		Queues:   map[string]worker.QueueConfig{qPlain: {Concurrency: 1}, qFlow: {Concurrency: 1}},
		Presence: -1, // no presence nor throughput records: they would count as calls
		Logger:   quietLogger(),
		OnJobEnd: func(ev worker.JobEvent) {
			switch {
			case ev.Outcome != worker.OutcomeAck:
				ends <- end{ev.Queue, fmt.Errorf("step %s of kind %s: %s (%s)", ev.ID, ev.Kind, ev.Outcome, ev.Reason)}
			case strings.HasSuffix(ev.Kind, ".end"):
				ends <- end{queue: ev.Queue}
			}
		},
	})
	if err != nil {
		return wc, err
	}
	// plain: the handler enqueues the next message; its body is its step.
	plainNext := func(ctx context.Context, d *fila.Delivery) error {
		k, err := strconv.Atoi(string(d.Body))
		if err != nil {
			return worker.Permanent(err)
		}
		kind := "plain"
		if k+1 == st.steps-1 {
			kind = "plain.end"
		}
		_, err = c.Enqueue(ctx, qPlain, fila.Message{Kind: kind, Body: []byte(strconv.Itoa(k + 1))})
		return err
	}
	w.HandleFunc("plain", plainNext)
	w.HandleFunc("plain.end", func(context.Context, *fila.Delivery) error { return nil })
	w.HandleFunc("step", func(context.Context, *fila.Delivery) error { return nil })
	w.HandleFunc("step.end", func(context.Context, *fila.Delivery) error { return nil })
	werr := make(chan error, 1)
	go func() { werr <- w.Run(runCtx) }()
	defer func() {
		stop()
		if e := <-werr; e != nil && err == nil {
			err = e
		}
	}()

	var started []string // workflow ids, deleted at the end
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, id := range started {
			if derr := c.WorkflowDelete(cctx, id); derr != nil {
				logf("%s %s workflow: deleting workflow %s: %v", broker, fs.Name(), id, derr)
				return
			}
		}
	}()
	chain := func(flow bool, i int) (time.Duration, map[string]int64, error) {
		before := n.snapshot()
		t0 := time.Now()
		want := qPlain
		if flow {
			want = qFlow
			p := fila.WorkflowParams{ID: fmt.Sprintf("bench-%s-%d", sfx, i), Steps: make([]fila.WorkflowStep, st.steps)}
			for k := range p.Steps {
				s := fila.WorkflowStep{Name: fmt.Sprintf("s%02d", k+1), Queue: qFlow, Message: fila.Message{Kind: "step", Body: []byte(strconv.Itoa(k))}}
				if k > 0 {
					s.After = []string{p.Steps[k-1].Name}
				}
				if k == st.steps-1 {
					s.Message.Kind = "step.end"
				}
				p.Steps[k] = s
			}
			id, err := c.WorkflowStart(ctx, p)
			if err != nil {
				return 0, nil, err
			}
			started = append(started, id)
		} else {
			kind := "plain"
			if st.steps == 1 {
				kind = "plain.end"
			}
			if _, err := c.Enqueue(ctx, qPlain, fila.Message{Kind: kind, Body: []byte("0")}); err != nil {
				return 0, nil, err
			}
		}
		limit := time.NewTimer(2 * time.Minute)
		defer limit.Stop()
		select {
		case e := <-ends:
			took := time.Since(t0)
			if e.err != nil {
				return 0, nil, e.err
			}
			if e.queue != want {
				return 0, nil, fmt.Errorf("a chain of queue %s ended while one of %s ran", e.queue, want)
			}
			return took, n.since(before), nil
		case <-limit.C:
			return 0, nil, fmt.Errorf("chain %d (workflow %v) did not end within 2 minutes", i, flow)
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	// One chain of each, not measured: connections, prepared statements,
	// the worker's first claims.
	for _, flow := range []bool{false, true} {
		if _, _, err := chain(flow, -1-btoi(flow)); err != nil {
			return wc, fmt.Errorf("warm-up: %w", err)
		}
	}
	for i := range st.runs {
		progress.set(fmt.Sprintf("%s %s workflow: chain %d of %d", broker, fs.Name(), i+1, st.runs))
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, flow := range order {
			took, calls, err := chain(flow, i)
			if err != nil {
				return wc, err
			}
			var total int64
			for _, v := range calls {
				total += v
			}
			if flow {
				wc.Flow, wc.FlowCalls = append(wc.Flow, took), append(wc.FlowCalls, total)
				addCounts(wc.FlowBy, calls)
			} else {
				wc.Plain, wc.PlainCalls = append(wc.Plain, took), append(wc.PlainCalls, total)
				addCounts(wc.PlainBy, calls)
			}
		}
		wc.Runs = i + 1
	}
	return wc, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func addCounts(to, from map[string]int64) {
	for k, v := range from {
		to[k] += v
	}
}

// quantileDur is the q-quantile of ds (nearest rank).
func quantileDur(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func medianInt(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return float64(s[len(s)/2])
	}
	return float64(s[len(s)/2-1]+s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// workflowMarkdown renders the scenario's table.
func workflowMarkdown(cases []workflowCase, st workflowSettings) string {
	var b strings.Builder
	b.WriteString("### Workflows: a chain of steps (scenario workflow)\n\n")
	fmt.Fprintf(&b, "Per system, %d chains of %d steps each way on one queue, one worker at concurrency 1 per queue, alternating: "+
		"plain (each handler enqueues the next message) and workflow (one WorkflowStart, each step After the one before; "+
		"the ack of a step releases the next). Time: from the first Enqueue or WorkflowStart to the last step's ack stored, "+
		"median / p95 of the chains, and the median ÷ %d per step. Ratio: workflow ÷ plain of the medians (×1.50: a workflow's "+
		"chain takes 1.5 times as long). Round trips: driver calls counted by a wrapper of the driver given to fila.New, "+
		"one call = one round trip (an approximation: a Receive that waits counts once however the driver waits inside it, "+
		"and a driver call that runs several statements counts once); median of the chains ÷ %d.\n\n", st.runs, st.steps, st.steps, st.steps)
	fmt.Fprintf(&b, "| broker | system | chain ms, plain p50 / p95 | chain ms, workflow p50 / p95 | ratio | per step ms, plain / workflow | round trips per step, plain / workflow |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	var notes, loaded []string
	for _, c := range cases {
		sys := c.System
		r := result{LoadBefore: c.LoadBefore, LoadAfter: c.LoadAfter}
		if underLoad(r) {
			sys += loadMark
			loaded = append(loaded, loadNote(c.Broker+", "+c.System, r))
		}
		if len(c.Plain) == 0 || len(c.Flow) == 0 {
			fmt.Fprintf(&b, "| %s | %s | n/a | n/a | | | |\n", c.Broker, sys)
			if c.Note != "" {
				notes = append(notes, fmt.Sprintf("%s, %s: %s", c.Broker, c.System, c.Note))
			}
			continue
		}
		pm, fm := quantileDur(c.Plain, 0.5), quantileDur(c.Flow, 0.5)
		steps := float64(c.Steps)
		fmt.Fprintf(&b, "| %s | %s | %s / %s | %s / %s | ×%.2f | %s / %s | %.1f / %.1f |\n", c.Broker, sys,
			formatValue(ms(pm), "ms"), formatValue(ms(quantileDur(c.Plain, 0.95)), "ms"),
			formatValue(ms(fm), "ms"), formatValue(ms(quantileDur(c.Flow, 0.95)), "ms"),
			float64(fm)/float64(max(pm, 1)), formatValue(ms(pm)/steps, "ms"), formatValue(ms(fm)/steps, "ms"),
			medianInt(c.PlainCalls)/steps, medianInt(c.FlowCalls)/steps)
		runs := float64(max(c.Runs, 1))
		notes = append(notes, fmt.Sprintf("%s, %s: calls per step by method (mean), plain: %s; workflow: %s; driver's optional interfaces: %s",
			c.Broker, c.System, byMethod(c.PlainBy, runs*steps), byMethod(c.FlowBy, runs*steps), strings.Join(c.Caps, ", ")))
		if c.Note != "" {
			notes = append(notes, fmt.Sprintf("%s, %s: %s", c.Broker, c.System, c.Note))
		}
	}
	b.WriteString("\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	if len(loaded) > 0 {
		b.WriteString("Figures taken under load (marked " + loadMark + "):\n\n")
		for _, n := range loaded {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func byMethod(m map[string]int64, per float64) string {
	keys := slices.Collect(maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(m[k])/per))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// callCounter counts driver calls by method name.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *callCounter) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

func (c *callCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// since is the calls made after snapshot before, by method.
func (c *callCounter) since(before map[string]int64) map[string]int64 {
	now := c.snapshot()
	out := map[string]int64{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// The counting driver. The portable layer discovers a driver's optional
// capabilities by type assertion, and changes its path by what it finds
// (marks listed with MarkList, or read one by one with MarkGet where the
// driver cannot list them, RabbitMQ; acks carried into claims with
// AckReceive, or sent alone). So the wrapper must implement an optional
// interface exactly when the wrapped driver does. newCountedDriver checks
// the driver at construction and picks one of eight types:
//
//   - always: backend.Driver; the flags backend.Namer, backend.Deduper and
//     backend.Prioritizer, which cost no round trip and answer as the
//     client would conclude without them ("unnamed", false) when the
//     wrapped driver lacks them;
//   - required (a driver without one is refused: workflows need the first
//     three, the scenario's cleanup the fourth): backend.Marker,
//     backend.DeadLetterer, backend.DeadImporter, backend.QueueDeleter;
//   - exactly when the wrapped driver has them: backend.MarkLister,
//     backend.MessageLister, backend.AckReceiver (the three that differ
//     between the six drivers and that the workflow and worker paths use).
//
// Every other optional interface (TxEnqueuer, Topics, StatsReader,
// QueueLister, Pinger, DelayedReceiver, MultiEnqueuer, ...) is left out:
// the client then reports those features unsupported, and the scenario
// uses none of them.
type countedBase struct {
	d backend.Driver
	n *callCounter
}

type (
	countedMarkList struct{ b *countedBase }
	countedMsgList  struct{ b *countedBase }
	countedAckRecv  struct{ b *countedBase }

	countedL struct {
		*countedBase
		countedMarkList
	}
	countedM struct {
		*countedBase
		countedMsgList
	}
	countedA struct {
		*countedBase
		countedAckRecv
	}
	countedLM struct {
		*countedBase
		countedMarkList
		countedMsgList
	}
	countedLA struct {
		*countedBase
		countedMarkList
		countedAckRecv
	}
	countedMA struct {
		*countedBase
		countedMsgList
		countedAckRecv
	}
	countedLMA struct {
		*countedBase
		countedMarkList
		countedMsgList
		countedAckRecv
	}
)

// newCountedDriver wraps d, counting each call into n, and names the
// optional interfaces it forwards besides the required ones.
func newCountedDriver(d backend.Driver, n *callCounter) (backend.Driver, []string, error) {
	var missing []string
	if _, ok := d.(backend.Marker); !ok {
		missing = append(missing, "backend.Marker")
	}
	if _, ok := d.(backend.DeadLetterer); !ok {
		missing = append(missing, "backend.DeadLetterer")
	}
	if _, ok := d.(backend.DeadImporter); !ok {
		missing = append(missing, "backend.DeadImporter")
	}
	if _, ok := d.(backend.QueueDeleter); !ok {
		missing = append(missing, "backend.QueueDeleter")
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("the driver lacks %s: %w", strings.Join(missing, ", "), fila.ErrUnsupported)
	}
	b := &countedBase{d: d, n: n}
	_, l := d.(backend.MarkLister)
	_, m := d.(backend.MessageLister)
	_, a := d.(backend.AckReceiver)
	var caps []string
	for _, c := range []struct {
		has  bool
		name string
	}{{l, "MarkLister"}, {m, "MessageLister"}, {a, "AckReceiver"}} {
		if c.has {
			caps = append(caps, c.name)
		}
	}
	if len(caps) == 0 {
		caps = []string{"none of MarkLister, MessageLister, AckReceiver"}
	}
	L, M, A := countedMarkList{b}, countedMsgList{b}, countedAckRecv{b}
	switch {
	case l && m && a:
		return countedLMA{b, L, M, A}, caps, nil
	case l && m:
		return countedLM{b, L, M}, caps, nil
	case l && a:
		return countedLA{b, L, A}, caps, nil
	case m && a:
		return countedMA{b, M, A}, caps, nil
	case l:
		return countedL{b, L}, caps, nil
	case m:
		return countedM{b, M}, caps, nil
	case a:
		return countedA{b, A}, caps, nil
	}
	return b, caps, nil
}

func (b *countedBase) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	b.n.add("Enqueue")
	return b.d.Enqueue(ctx, queue, msgs)
}

func (b *countedBase) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	b.n.add("Receive")
	return b.d.Receive(ctx, queue, p)
}

func (b *countedBase) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	b.n.add("Ack")
	return b.d.Ack(ctx, refs)
}

func (b *countedBase) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	b.n.add("Retry")
	return b.d.Retry(ctx, ref, delay, reason)
}

func (b *countedBase) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	b.n.add("Dead")
	return b.d.Dead(ctx, ref, reason, attempts)
}

func (b *countedBase) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	b.n.add("Extend")
	return b.d.Extend(ctx, ref, lease)
}

func (b *countedBase) Close() error { return b.d.Close() }

func (b *countedBase) DriverName() string {
	if n, ok := b.d.(backend.Namer); ok {
		return n.DriverName()
	}
	return "unnamed"
}

func (b *countedBase) DedupKeys() bool {
	d, ok := b.d.(backend.Deduper)
	return ok && d.DedupKeys()
}

func (b *countedBase) Priorities() bool {
	p, ok := b.d.(backend.Prioritizer)
	return ok && p.Priorities()
}

func (b *countedBase) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	b.n.add("MarkSet")
	return b.d.(backend.Marker).MarkSet(ctx, queue, name, until, onlyNew)
}

func (b *countedBase) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	b.n.add("MarkGet")
	return b.d.(backend.Marker).MarkGet(ctx, queue, name)
}

func (b *countedBase) MarkDelete(ctx context.Context, queue, name string) error {
	b.n.add("MarkDelete")
	return b.d.(backend.Marker).MarkDelete(ctx, queue, name)
}

func (b *countedBase) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	b.n.add("DeadList")
	return b.d.(backend.DeadLetterer).DeadList(ctx, queue, p)
}

func (b *countedBase) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	b.n.add("DeadReplay")
	return b.d.(backend.DeadLetterer).DeadReplay(ctx, queue, f)
}

func (b *countedBase) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	b.n.add("DeadPurge")
	return b.d.(backend.DeadLetterer).DeadPurge(ctx, queue, f)
}

func (b *countedBase) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	b.n.add("DeadImport")
	return b.d.(backend.DeadImporter).DeadImport(ctx, queue, letters)
}

func (b *countedBase) QueueDelete(ctx context.Context, queue string) error {
	b.n.add("QueueDelete")
	return b.d.(backend.QueueDeleter).QueueDelete(ctx, queue)
}

func (l countedMarkList) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	l.b.n.add("MarkList")
	return l.b.d.(backend.MarkLister).MarkList(ctx, queue, prefix)
}

func (m countedMsgList) MessageList(ctx context.Context, queue string, p backend.MessageListParams) (backend.MessagePage, error) {
	m.b.n.add("MessageList")
	return m.b.d.(backend.MessageLister).MessageList(ctx, queue, p)
}

func (a countedAckRecv) AckReceive(ctx context.Context, refs []backend.Ref, queue string, p backend.ReceiveParams) ([]error, []backend.Delivery, error) {
	a.b.n.add("AckReceive")
	return a.b.d.(backend.AckReceiver).AckReceive(ctx, refs, queue, p)
}
