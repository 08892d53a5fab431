package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// needWorkflows skips t unless the driver keeps what workflows are built
// on: marks, dead-letter listing and dead-letter import.
func (s *suite) needWorkflows(t *testing.T) {
	t.Helper()
	s.need(t, FeatureMarks)
	s.need(t, FeatureDeadLetters)
	s.need(t, FeatureDeadImport)
	if !s.has(FeatureConcurrentClaims) {
		// A stand-in server (FerretDB) serves the whole suite slowly:
		// its workflow tests take turns, so the others keep their bounds.
		s.wfMu.Lock()
		t.Cleanup(s.wfMu.Unlock)
	}
}

// wfRun records the steps consumers ran, in order, with what each saw.
type wfRun struct {
	mu   sync.Mutex
	runs []string
	// seen is, per step, the results of its dependencies it read.
	seen map[string]map[string][]byte
	// acked counts the steps acked; changed is closed and replaced when
	// it grows.
	acked   int
	changed chan struct{}
}

func (r *wfRun) ackedOne() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked++
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// waitAcked waits until n step acks have succeeded, failing t after within.
func (r *wfRun) waitAcked(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		r.mu.Lock()
		got := r.acked
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d step acks within %v; runs so far: %d", got, n, within, len(r.runs))
		}
	}
}

func (r *wfRun) count(step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.runs {
		if s == step {
			n++
		}
	}
	return n
}

func (r *wfRun) index(step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Index(r.runs, step)
}

// wfConsume runs workflow steps from queues until ctx ends: each step
// reads its dependencies' results, records itself, leaves the result
// "result of <step>" when keep says so and is acked (alone, or in a batch
// with AckBatch when batch is set). A lost lease is an error only when
// the driver claims atomically.
func (s *suite) wfConsume(ctx context.Context, t *testing.T, c *fila.Client, r *wfRun, batch bool, keep func(step string) bool, queues ...string) {
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// A batch's bookkeeping runs a few steps at a time; alone,
				// each step waits for those before it, within the lease.
				max := 5
				if batch {
					max = 20
				}
				ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: max, Lease: 30 * time.Second})
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, fila.ErrUnavailable) {
						t.Errorf("Receive(%s): %v", q, err)
						return
					}
					continue
				}
				for _, d := range ds {
					_, step := d.Workflow()
					res, err := c.WorkflowResults(ctx, d)
					if err != nil && ctx.Err() == nil {
						t.Errorf("WorkflowResults(step %s): %v", step, err)
					}
					r.mu.Lock()
					r.runs = append(r.runs, step)
					if r.seen == nil {
						r.seen = map[string]map[string][]byte{}
					}
					r.seen[step] = res
					r.mu.Unlock()
					if keep(step) {
						if err := d.SetResult([]byte("result of " + step)); err != nil {
							t.Errorf("SetResult(%s): %v", step, err)
						}
					}
					if !batch {
						if err := d.Ack(ctx); err != nil && ctx.Err() == nil && !s.doubleClaim(err) {
							t.Errorf("Ack(step %s, attempt %d, deadline in %v): %v", step, d.Attempt, time.Until(d.Deadline()), err)
						} else if err == nil {
							r.ackedOne()
						}
					}
				}
				if batch && len(ds) > 0 {
					err := c.AckBatch(ctx, ds)
					if err != nil && ctx.Err() == nil && !s.doubleClaim(err) {
						t.Errorf("AckBatch: %v", err)
					}
					for _, d := range ds {
						if err == nil || !strings.Contains(err.Error(), d.ID) {
							r.ackedOne()
						}
					}
				}
			}
		}()
	}
	wg.Wait()
}

// waitWorkflow polls WorkflowShow until cond holds, failing t after within.
func waitWorkflow(t *testing.T, c *fila.Client, id string, within time.Duration, what string, cond func(*fila.WorkflowState) bool) fila.WorkflowState {
	t.Helper()
	ctx := ctxTimeout(t, within+10*time.Second)
	deadline := time.Now().Add(within)
	for {
		st, err := c.WorkflowShow(ctx, id)
		if err != nil {
			t.Fatalf("WorkflowShow(%s): %v", id, err)
		}
		if cond(&st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: %s not reached within %v: %s", id, what, within, describeWorkflow(&st))
		}
		select { // polling a state the broker keeps; no event to wait on
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func describeWorkflow(st *fila.WorkflowState) string {
	counts := map[fila.StepStatus]int{}
	var some []string
	for _, s := range st.Steps {
		counts[s.Status]++
		if s.Status != fila.StepDone && len(some) < 5 {
			some = append(some, s.Name+"="+string(s.Status))
		}
	}
	return fmt.Sprintf("%v (cancelled %v; e.g. %s)", counts, st.Cancelled, strings.Join(some, ", "))
}

// testWorkflowDiamond: A → B, A → C, B+C → D across two queues: each step
// runs once, after its dependencies, reading their results, and D is
// enqueued exactly once (contract: workflows).
func (s *suite) testWorkflowDiamond(t *testing.T) {
	s.needWorkflows(t)
	c := s.client(t)
	q1, q2 := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 90*time.Second)
	step := func(name, q string, after ...string) fila.WorkflowStep {
		return fila.WorkflowStep{Name: name, Queue: q, After: after,
			Message: fila.Message{Kind: "wf.step", Body: []byte("body of " + name), Headers: map[string]string{"step": name}}}
	}
	id, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: []fila.WorkflowStep{
		step("D", q2, "B", "C"), step("B", q1, "A"), step("C", q2, "A"), step("A", q1),
	}})
	if err != nil {
		t.Fatalf("WorkflowStart: %v", err)
	}
	st, err := c.WorkflowShow(ctx, id)
	if err != nil {
		t.Fatalf("WorkflowShow: %v", err)
	}
	if st.Count(fila.StepPending) != 3 || st.Steps[3].Status == fila.StepPending || st.Steps[3].Status == fila.StepDone {
		t.Errorf("before any step ran: %s; want A ready and B, C, D pending", describeWorkflow(&st))
	}
	// Two consumers on each queue, one acking alone, one in batches
	// (one, in batches, where competing claims may take one message twice).
	r := &wfRun{}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	clients := []*fila.Client{c, s.client(t)}
	if !s.has(FeatureConcurrentClaims) {
		clients = clients[1:]
	}
	for i, cl := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); s.wfConsume(cctx, t, cl, r, i == 1 || len(clients) == 1, everyStep, q1, q2) }()
	}
	r.waitAcked(t, 4, 60*time.Second)
	if st, err := c.WorkflowShow(ctx, id); err != nil || !st.Done() {
		t.Errorf("WorkflowShow after every step was acked: %s, %v; want every step done", describeWorkflow(&st), err)
	}
	// A duplicate D would come within a wake-up; none may.
	s.expectNone(t, c, q2, s.h.WakeupBound+time.Second, "after the workflow completed")
	stop()
	wg.Wait()
	for _, name := range []string{"A", "B", "C", "D"} {
		if n := r.count(name); n != 1 {
			t.Errorf("step %s ran %d times, want once", name, n)
		}
	}
	if a, b, cc, d := r.index("A"), r.index("B"), r.index("C"), r.index("D"); !(a < b && a < cc && b < d && cc < d) {
		t.Errorf("steps ran in the order %v; want A before B and C, and both before D", r.runs)
	}
	r.mu.Lock()
	got := r.seen["D"]
	r.mu.Unlock()
	if string(got["B"]) != "result of B" || string(got["C"]) != "result of C" || len(got) != 2 {
		t.Errorf("D read results %q, want B's and C's", got)
	}
}

func everyStep(string) bool { return true }

// tenth keeps the results of one step in ten (t0009, t0019, ...): on
// RabbitMQ storing a result reads the workflow's stored results.
func tenth(step string) bool { return strings.HasSuffix(step, "9") }

// testWorkflowFanIn: a callback waiting for 1,000 steps (200 on a server
// without atomic claims, a stand-in), run by three clients acking alone and
// in batches, is enqueued once, after all of them, and reads the results
// they left.
func (s *suite) testWorkflowFanIn(t *testing.T) {
	s.needWorkflows(t)
	c := s.client(t)
	q, qcb := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 240*time.Second)
	n := 1000
	if !s.has(FeatureConcurrentClaims) {
		// A stand-in server (FerretDB) takes about 0.1 s a step here, and
		// the suite's other tests run beside this one: 1,000 would push
		// them past their bounds.
		n = 200
	}
	steps := make([]fila.WorkflowStep, 0, n+1)
	after := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("t%04d", i)
		after = append(after, name)
		steps = append(steps, fila.WorkflowStep{Name: name, Queue: q, Message: fila.Message{Kind: "wf.thumb"}})
	}
	steps = append(steps, fila.WorkflowStep{Name: "album", Queue: qcb, After: after, Message: fila.Message{Kind: "wf.album"}})
	id, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: steps})
	if err != nil {
		t.Fatalf("WorkflowStart: %v", err)
	}
	r := &wfRun{}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	clients := []*fila.Client{c, s.client(t), s.client(t)}
	if !s.has(FeatureConcurrentClaims) {
		// Competing claims would run steps twice and lose leases (a
		// stand-in server, FerretDB): one client, acking in batches.
		clients = []*fila.Client{s.client(t)}
	}
	for i, cl := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); s.wfConsume(cctx, t, cl, r, i != 0 || len(clients) == 1, tenth, q, qcb) }()
	}
	r.waitAcked(t, n+1, 180*time.Second)
	if st, err := c.WorkflowShow(ctx, id); err != nil || !st.Done() {
		t.Errorf("WorkflowShow after every step was acked: %s, %v; want every step done", describeWorkflow(&st), err)
	}
	s.expectNone(t, c, qcb, s.h.WakeupBound+time.Second, "after the workflow completed")
	stop()
	wg.Wait()
	// Without atomic claims (FerretDB) two consumers may run one
	// message, the callback's included: that is the claim's, not the
	// workflow's, at-least-once.
	if got := r.count("album"); got != 1 && s.has(FeatureConcurrentClaims) {
		t.Errorf("the callback ran %d times, want once", got)
	}
	r.mu.Lock()
	before := map[string]bool{}
	for _, step := range r.runs[:slices.Index(r.runs, "album")] {
		before[step] = true
	}
	got := r.seen["album"]
	r.mu.Unlock()
	if len(before) != n {
		t.Errorf("the callback ran after %d distinct steps, want %d", len(before), n)
	}
	last := fmt.Sprintf("t%04d", n-1)
	if len(got) != n/10 || string(got[last]) != "result of "+last {
		t.Errorf("the callback read %d results (%s: %q), want %d", len(got), last, got[last], n/10)
	}
}

// testWorkflowLastAcksRace: two clients ack a callback's last two
// dependencies at the same moment, many times over: the callback is
// enqueued exactly once each time.
func (s *suite) testWorkflowLastAcksRace(t *testing.T) {
	s.needWorkflows(t)
	c1, c2 := s.client(t), s.client(t)
	q, qcb := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 240*time.Second)
	rounds := 10
	if !s.has(FeatureConcurrentClaims) {
		rounds = 4 // a stand-in server (FerretDB), slow under the whole suite
	}
	for round := range rounds {
		id, err := c1.WorkflowStart(ctx, fila.WorkflowParams{Steps: []fila.WorkflowStep{
			{Name: "x", Queue: q, Message: fila.Message{Kind: "wf.x"}},
			{Name: "y", Queue: q, Message: fila.Message{Kind: "wf.y"}},
			{Name: "cb", Queue: qcb, After: []string{"x", "y"}, Message: fila.Message{Kind: "wf.cb", Body: []byte(fmt.Sprint(round))}},
		}})
		if err != nil {
			t.Fatalf("round %d: WorkflowStart: %v", round, err)
		}
		dx := receiveOne(t, c1, q, 30*time.Second, 10*time.Second)
		dy := receiveOne(t, c2, q, 30*time.Second, 10*time.Second)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, d := range []*fila.Delivery{dx, dy} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := d.Ack(ctx); err != nil {
					t.Errorf("round %d: Ack: %v", round, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		cb := receiveOne(t, c1, qcb, 30*time.Second, 10*time.Second)
		if wf, _ := cb.Workflow(); wf != id || string(cb.Body) != fmt.Sprint(round) {
			t.Fatalf("round %d: received %s of workflow %s, body %q; want the callback of %s", round, cb.ID, wf, cb.Body, id)
		}
		if err := cb.Ack(ctx); err != nil {
			t.Fatalf("round %d: Ack(callback): %v", round, err)
		}
	}
	s.expectNone(t, c2, qcb, s.h.WakeupBound+time.Second, "after every round's callback")
}

// testWorkflowDeadStopsDependants: a dead step holds its dependants back
// (reported as blocked); replaying it lets the workflow go on.
func (s *suite) testWorkflowDeadStopsDependants(t *testing.T) {
	s.needWorkflows(t)
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 90*time.Second)
	id, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: []fila.WorkflowStep{
		{Name: "a", Queue: q, Message: fila.Message{Kind: "wf.a"}},
		{Name: "b", Queue: q, After: []string{"a"}, Message: fila.Message{Kind: "wf.b"}},
	}})
	if err != nil {
		t.Fatalf("WorkflowStart: %v", err)
	}
	d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if err := d.Dead(ctx, "broken input"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	st, err := c.WorkflowShow(ctx, id)
	if err != nil {
		t.Fatalf("WorkflowShow: %v", err)
	}
	a, b := st.Steps[0], st.Steps[1]
	if a.Status != fila.StepDead || a.Reason != "broken input" || b.Status != fila.StepPending || !slices.Equal(b.BlockedBy, []string{"a"}) {
		t.Errorf("after a died: a %s (%q), b %s blocked by %v; want a dead (broken input), b pending blocked by [a]",
			a.Status, a.Reason, b.Status, b.BlockedBy)
	}
	s.expectNone(t, c, q, s.h.WakeupBound+time.Second, "while a is dead")
	if n, err := c.DeadReplay(ctx, q, fila.DeadFilter{IDs: []string{a.MessageID}}); err != nil || n != 1 {
		t.Fatalf("DeadReplay(a) = %d, %v; want 1", n, err)
	}
	d = receiveOne(t, c, q, 30*time.Second, s.afterNone())
	if _, step := d.Workflow(); step != "a" {
		t.Fatalf("after the replay received step %q, want a", step)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack(a): %v", err)
	}
	d = receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if _, step := d.Workflow(); step != "b" {
		t.Fatalf("after a completed received step %q, want b", step)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack(b): %v", err)
	}
	waitWorkflow(t, c, id, 10*time.Second, "every step done", (*fila.WorkflowState).Done)
}

// testWorkflowCancel: cancelling a workflow dead-letters every step not
// yet done: pending ones at once, released ones when they are claimed or
// settled; none is released after.
func (s *suite) testWorkflowCancel(t *testing.T) {
	s.needWorkflows(t)
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 90*time.Second)
	// a → b → c, a → d
	id, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: []fila.WorkflowStep{
		{Name: "a", Queue: q, Message: fila.Message{Kind: "wf.a"}},
		{Name: "b", Queue: q, After: []string{"a"}, Message: fila.Message{Kind: "wf.b"}},
		{Name: "c", Queue: q, After: []string{"b"}, Message: fila.Message{Kind: "wf.c"}},
		{Name: "d", Queue: q, After: []string{"a"}, Message: fila.Message{Kind: "wf.d"}},
	}})
	if err != nil {
		t.Fatalf("WorkflowStart: %v", err)
	}
	d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack(a): %v", err)
	}
	// b and d are released; b is running when the cancel comes.
	running := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if err := c.WorkflowCancel(ctx, id); err != nil {
		t.Fatalf("WorkflowCancel: %v", err)
	}
	if err := c.WorkflowCancel(ctx, id); err != nil {
		t.Errorf("WorkflowCancel a second time: %v", err)
	}
	if err := running.Ack(ctx); !errors.Is(err, fila.ErrCancelled) {
		t.Errorf("Ack of a step running when its workflow was cancelled: %v, want ErrCancelled", err)
	}
	// The other released step is dead-lettered when claimed (drivers that
	// cancel messages) or at its ack: a consumer takes what comes.
	cctx, stop := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			ds, err := c.Receive(cctx, q, fila.ReceiveParams{Max: 10, Lease: 30 * time.Second})
			if err != nil && cctx.Err() == nil && !errors.Is(err, fila.ErrUnavailable) {
				t.Errorf("Receive after the cancel: %v", err)
				return
			}
			for _, d := range ds {
				if err := d.Ack(ctx); !errors.Is(err, fila.ErrCancelled) && !s.doubleClaim(err) {
					t.Errorf("Ack of step %s received after the cancel: %v, want ErrCancelled", d.ID, err)
				}
			}
		}
	}()
	defer func() { stop(); <-consumed }() // also when waitWorkflow fails the test
	st := waitWorkflow(t, c, id, 60*time.Second, "a done and the rest dead", func(st *fila.WorkflowState) bool {
		return st.Steps[0].Status == fila.StepDone && st.Count(fila.StepDead) == 3
	})
	stop()
	<-consumed
	if !st.Cancelled {
		t.Errorf("WorkflowShow: Cancelled is false after WorkflowCancel")
	}
	if c := st.Steps[2]; c.Reason != fila.ReasonWorkflowCancelled {
		t.Errorf("pending step c dead with reason %q, want %q", c.Reason, fila.ReasonWorkflowCancelled)
	}
	s.expectNone(t, c, q, s.h.WakeupBound+time.Second, "after the cancel")
}

// testWorkflowBadInput: a workflow that cannot run is refused whole with
// an ErrInvalid error, and stores nothing.
func (s *suite) testWorkflowBadInput(t *testing.T) {
	s.needWorkflows(t)
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	m := fila.Message{Kind: "wf.bad"}
	bad := map[string][]fila.WorkflowStep{
		"no steps":       nil,
		"cycle":          {{Name: "r", Queue: q, Message: m}, {Name: "a", Queue: q, Message: m, After: []string{"b"}}, {Name: "b", Queue: q, Message: m, After: []string{"a"}}},
		"no root":        {{Name: "a", Queue: q, Message: m, After: []string{"a"}}},
		"unknown after":  {{Name: "a", Queue: q, Message: m}, {Name: "b", Queue: q, Message: m, After: []string{"zz"}}},
		"twice named":    {{Name: "a", Queue: q, Message: m}, {Name: "a", Queue: q, Message: m}},
		"bad name":       {{Name: "a/b", Queue: q, Message: m}},
		"bad queue":      {{Name: "a", Queue: "no spaces", Message: m}},
		"reserved queue": {{Name: "a", Queue: "fila.wf.x", Message: m}},
		"dedup key":      {{Name: "a", Queue: q, Message: fila.Message{Kind: "k", DedupKey: "x"}}},
		"no kind":        {{Name: "a", Queue: q, Message: fila.Message{}}},
	}
	for what, steps := range bad {
		if _, err := c.WorkflowStart(ctx, fila.WorkflowParams{Steps: steps}); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("WorkflowStart with %s: %v, want ErrInvalid", what, err)
		}
	}
	s.expectNone(t, c, q, 500*time.Millisecond, "after refused workflows")
	id := "wf-" + strings.TrimPrefix(q, s.h.QueuePrefix+"-")
	if len(id) > fila.MaxWorkflowIDLen {
		id = id[len(id)-fila.MaxWorkflowIDLen:]
	}
	if _, err := c.WorkflowShow(ctx, id); !errors.Is(err, fila.ErrWorkflowNotFound) {
		t.Errorf("WorkflowShow of a workflow never started: %v, want ErrWorkflowNotFound", err)
	}
	p := fila.WorkflowParams{ID: id, Steps: []fila.WorkflowStep{{Name: "a", Queue: q, Message: m}}}
	if got, err := c.WorkflowStart(ctx, p); err != nil || got != id {
		t.Fatalf("WorkflowStart(%s) = %q, %v", id, got, err)
	}
	if _, err := c.WorkflowStart(ctx, p); !errors.Is(err, fila.ErrDuplicate) {
		t.Errorf("WorkflowStart of an id started already: %v, want ErrDuplicate", err)
	}
	d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if err := d.SetResult(make([]byte, fila.MaxResultBytes+1)); !errors.Is(err, fila.ErrTooLarge) {
		t.Errorf("SetResult of %d bytes: %v, want ErrTooLarge", fila.MaxResultBytes+1, err)
	}
	if err := d.SetResult(make([]byte, fila.MaxResultBytes)); err != nil {
		t.Errorf("SetResult of %d bytes: %v", fila.MaxResultBytes, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	plain := enqueue(t, c, q, m)
	pd := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if pd.ID != plain {
		t.Fatalf("received %s, want the plain message %s", pd.ID, plain)
	}
	if err := pd.SetResult([]byte("x")); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("SetResult on a message that is not a step: %v, want ErrInvalid", err)
	}
	if _, err := c.WorkflowResults(ctx, pd); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("WorkflowResults on a message that is not a step: %v, want ErrInvalid", err)
	}
	_ = pd.Ack(ctx)
	if s.has(FeatureQueueDelete) {
		if err := c.WorkflowDelete(ctx, id); err != nil {
			t.Errorf("WorkflowDelete: %v", err)
		}
		if _, err := c.WorkflowShow(ctx, id); !errors.Is(err, fila.ErrWorkflowNotFound) {
			t.Errorf("WorkflowShow after WorkflowDelete: %v, want ErrWorkflowNotFound", err)
		}
	}
}
