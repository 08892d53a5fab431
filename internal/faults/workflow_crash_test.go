package faults_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/mongo"
)

// workflowRun is the shape of one workflow crash run.
type workflowRun struct {
	name string // the broker, for the log
	url  string
	// steps is the fan-in's width: that many steps with no dependency on
	// one queue, and a callback waiting for all of them on another.
	steps       int
	workers     int // processes, each serving both queues
	kills       int
	concurrency int // per queue and process
	// lease is the workers' lease: a killed worker's steps come back when
	// it expires (on RabbitMQ when the connection drops: see comeBack).
	lease time.Duration
	// comeBack is how long after a kill the killed process's steps are
	// back in their queue: the lease, but 0 on RabbitMQ.
	comeBack time.Duration
	work     time.Duration // the longest job (see jobTime)
	ackGrace time.Duration // see crashRun.ackGrace
	// stall fails the run when nothing is handled for that long.
	stall   time.Duration
	timeout time.Duration
}

// defaultWorkflowRun is the run of the workflows issue: a fan-in of 2,000
// run by 3 worker processes, 5 kills.
func defaultWorkflowRun(url string) workflowRun {
	return workflowRun{
		url: url, steps: 2000, workers: 3, kills: 5,
		concurrency: 8,
		lease:       5 * time.Second,
		work:        100 * time.Millisecond,
		comeBack:    5 * time.Second,
		stall:       20 * time.Second,
		timeout:     90 * time.Second,
	}
}

// TestWorkflowCrash starts a workflow of 2,000 steps on one queue and a
// callback step on another that waits for all of them, run by 3 worker
// processes (this test binary started again, see workerChild) that each
// serve both queues and write their ledger before each ack; the ack of a
// step runs the workflow's bookkeeping (its mark, and the callback's
// release by the ack that completes the set) before the broker's ack. It
// SIGKILLs a process with steps in flight at 4 random points of progress,
// and a fifth time the process that handled the last of the 2,000 steps
// as soon as its ledger shows it (so during or just after the ack that
// releases the callback), each replaced at once. The callback is delayed
// until the steps the kills left in flight are back, so a step acked a
// second time after the release finds it pending. It checks from the
// ledgers that no step is lost and that every duplicate was in flight in
// a killed process; that the callback ran only once every step's handler
// had finished (the ack that writes the mark the release needs comes
// after it) and was delivered once, plus once per kill it was in flight
// at (so enqueued exactly once); and that at the end WorkflowShow reports
// every step done and both queues are empty.
//
// The lease is 5 s, not 2: a fresh process's first acks each read the
// workflow's manifest (about 250 KB) before its cache holds it, and under
// -race on 2 busy cores a batch of them took over 2 s, after the worker's
// heartbeats had stopped (they cover the handler, not the ack), so leases
// expired during the bookkeeping and steps ran twice with no kill.
//
// The brokers run one after another, as in TestFanoutCrash.
func TestWorkflowCrash(t *testing.T) {
	t.Parallel()
	pg := func(tb testing.TB) string { return withParam(tb, testenv.PostgresURL(tb), "fila_migrate", "true") }
	for _, b := range []struct {
		name     string
		url      func(testing.TB) string
		ackGrace time.Duration
		// tune adjusts the default run to a broker's limits.
		tune func(*workflowRun)
	}{
		{name: "postgres", url: pg},
		{name: "postgres-log", url: func(tb testing.TB) string {
			return withParam(tb, withParam(tb, pg(tb), "fila_mode", "log"), "fila_rotate_interval", "300ms")
		}},
		{name: "redis", url: testenv.RedisURL},
		{name: "rabbitmq", url: testenv.RabbitMQURL, ackGrace: rabbitAckGrace, tune: func(r *workflowRun) {
			// A mark is a durable queue there, declared by each step's
			// ack, and marks are read one at a time: about 45 step acks
			// a second on 2 busy cores, so 600 steps (still 6
			// buckets of the callback's dependencies). A killed process's
			// steps come back when its connection drops, so a long lease
			// costs nothing; a short one expires while acks wait for the
			// broker.
			r.steps, r.lease, r.comeBack = 600, 30*time.Second, 0
		}},
		// Skipped on FerretDB (below); a real MongoDB runs.
		{name: "mongo", url: func(tb testing.TB) string {
			return withParam(tb, testenv.MongoURL(tb), "fila_database", "fila_faults")
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			run := defaultWorkflowRun(b.url(t))
			run.name, run.ackGrace = b.name, b.ackGrace
			if b.tune != nil {
				b.tune(&run)
			}
			runWorkflowCrash(t, run)
		})
	}
}

func runWorkflowCrash(t *testing.T, run workflowRun) {
	seed := seedFor(t)
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx, cancel := context.WithTimeout(context.Background(), run.timeout+time.Minute)
	defer cancel()
	start := time.Now()

	c, err := fila.Open(ctx, run.url)
	if err != nil {
		t.Fatalf("open %s: %v", fila.Redact(run.url), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if m, ok := c.Driver().(*mongo.Driver); ok && m.Capabilities().FerretDB {
		t.Skip("FerretDB v1 claims are not atomic: three processes competing for one queue run steps twice with no kill, so neither duplicates nor the callback's single run can be checked")
	}
	base := "faults-wf-" + randomHex(6)
	id, stepQueue, cbQueue := base, base+".steps", base+".cb"
	testenv.CleanupQueue(t, c, stepQueue)
	testenv.CleanupQueue(t, c, cbQueue)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t0 := time.Now()
		if err := c.WorkflowDelete(ctx, id); err != nil {
			t.Logf("cleanup: WorkflowDelete(%s): %v", id, err)
		}
		t.Logf("%s: cleanup: WorkflowDelete took %v", run.name, time.Since(t0).Round(time.Millisecond))
	})

	// Steps 0 to n-1 carry their sequence number as body, the callback n.
	n := run.steps
	steps := make([]fila.WorkflowStep, 0, n+1)
	after := make([]string, 0, n)
	for seq := range n {
		name := fmt.Sprintf("s%04d", seq)
		after = append(after, name)
		steps = append(steps, fila.WorkflowStep{Name: name, Queue: stepQueue,
			Message: fila.Message{Kind: jobKind, Body: []byte(strconv.Itoa(seq))}})
	}
	// The callback waits, delayed, until the steps a kill left in flight
	// are back: a step whose first run wrote its mark, acked again after
	// the release, finds the callback pending, not done, and must not
	// enqueue it a second time.
	steps = append(steps, fila.WorkflowStep{Name: "callback", Queue: cbQueue, After: after,
		Message: fila.Message{Kind: jobKind, Body: []byte(strconv.Itoa(n)), Delay: run.comeBack + 2*time.Second}})

	// The processes start (a second or so) while the workflow starts.
	dir := t.TempDir()
	settings := workerSettings{url: run.url, queue: stepQueue + "," + cbQueue, lease: run.lease,
		concurrency: run.concurrency, work: run.work}
	var all []*workerProc // every incarnation, in start order
	live := make([]*workerProc, run.workers)
	starts := make([]int, run.workers)
	startWorker := func(slot int) {
		// w2.1 is the second process run in slot 2 (its first replacement).
		p := startWorkerProc(t, dir, fmt.Sprintf("w%d.%d", slot, starts[slot]), settings)
		starts[slot]++
		all = append(all, p)
		live[slot] = p
	}
	for slot := range run.workers {
		startWorker(slot)
	}
	if _, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: id, Steps: steps}); err != nil {
		if errors.Is(err, fila.ErrUnsupported) {
			t.Skipf("%s: no workflows: %v", run.name, err)
		}
		t.Fatalf("WorkflowStart: %v", err)
	}
	started := time.Since(start)

	// Kill moments: 4 random points of progress (steps handled) between
	// 5% and 95%, then the moment every step is handled.
	thresholds := make([]int, run.kills)
	for i := range run.kills - 1 {
		thresholds[i] = n/20 + rng.IntN(n*18/20)
	}
	thresholds[run.kills-1] = n
	slices.Sort(thresholds)

	handled := make([]bool, n+1) // by seq: an H line seen
	nSteps := 0                  // steps (not the callback) handled
	lastStepBy := -1             // the slot whose ledger had the last step's H line
	cbReceived := false
	progressAt := time.Now()
	// inFlight holds, per process, the ids received by a handler and not
	// yet acked (nor ended otherwise): its handler or its ack, with the
	// workflow's bookkeeping, runs.
	inFlight := map[*workerProc]map[string]bool{}
	consume := func(p *workerProc) {
		es, err := p.readLedger()
		if err != nil {
			t.Fatalf("ledger of %s: %v", p.inc.name, err)
		}
		if inFlight[p] == nil {
			inFlight[p] = map[string]bool{}
		}
		for _, e := range es {
			switch e.op {
			case opReceived:
				inFlight[p][e.id] = true
			case opAcked, opOther:
				delete(inFlight[p], e.id)
			}
			switch {
			case e.op == opReceived && e.seq == n:
				cbReceived = true
			case e.op == opHandled && e.seq >= 0 && e.seq <= n && !handled[e.seq]:
				handled[e.seq] = true
				progressAt = time.Now()
				if e.seq < n {
					nSteps++
					if nSteps == n {
						lastStepBy = slices.Index(live, p)
					}
				}
			}
		}
	}
	// checkOrder runs once, when a ledger first shows the callback
	// received. Every step's H line was written before the ack that wrote
	// its mark, and the callback's release needs every mark, so each one
	// is in a ledger before the callback's R line: a second read of every
	// ledger, now, must find them all.
	orderChecked := false
	checkOrder := func() {
		if orderChecked || !cbReceived {
			return
		}
		orderChecked = true
		for _, p := range live {
			consume(p)
		}
		if nSteps < n {
			var missing []int
			for seq := range n {
				if !handled[seq] && len(missing) < 10 {
					missing = append(missing, seq)
				}
			}
			t.Errorf("%s: the callback was received when only %d of %d steps had been handled (released before its dependencies completed), e.g. missing seq %v",
				run.name, nSteps, n, missing)
		}
	}
	// victim picks the slot whose process to kill: a random one among
	// those that have steps in flight, or any when none has.
	victim := func() int {
		var busy []int
		for slot, p := range live {
			if len(inFlight[p]) > 0 {
				busy = append(busy, slot)
			}
		}
		if len(busy) == 0 {
			return rng.IntN(run.workers)
		}
		return busy[rng.IntN(len(busy))]
	}
	stalled := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: nothing handled for %v: %d of %d steps handled, callback received %v, handled %v",
			run.name, time.Since(progressAt).Round(time.Second), nSteps, n, cbReceived, handled[n])
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		defer scancel()
		for _, q := range []string{stepQueue, cbQueue} {
			st, err := c.QueueStats(sctx, q)
			if err != nil {
				fmt.Fprintf(&b, "; QueueStats(%s): %v", q, err)
				continue
			}
			fmt.Fprintf(&b, "; %s holds ready=%d delayed=%d leased=%d dead=%d", q, st.Ready, st.Delayed, st.Leased, st.Dead)
		}
		if st, err := c.WorkflowShow(sctx, id); err != nil {
			fmt.Fprintf(&b, "; WorkflowShow: %v", err)
		} else {
			fmt.Fprintf(&b, "; WorkflowShow: %v, callback %s", countStatuses(&st), st.Steps[n].Status)
		}
		for _, p := range live {
			fmt.Fprintf(&b, "\nlog of %s (%d steps in flight per its ledger) ends:\n%s", p.inc.name, len(inFlight[p]), p.logTail())
		}
		return b.String()
	}

	var lastKill time.Time
	kills := 0
	deadline := start.Add(run.timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for nSteps < n || !handled[n] {
		for _, p := range live {
			consume(p)
			if p.exited() {
				t.Fatalf("worker %s exited by itself (%v); its log ends:\n%s", p.inc.name, p.waitErr, p.logTail())
			}
		}
		checkOrder()
		for kills < run.kills && nSteps >= thresholds[kills] {
			slot := victim()
			what := "a random busy process"
			if thresholds[kills] == n && lastStepBy >= 0 {
				slot, what = lastStepBy, "the process that handled the last step"
			}
			p := live[slot]
			p.inc.killedAt = time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s: %v", p.inc.name, err)
			}
			<-p.done
			lastKill = p.inc.killedAt
			consume(p) // its ledger is final now
			kills++
			k := analyze(n+1, []incarnation{p.inc}, run.ackGrace, false).inFlight[0]
			t.Logf("%s: kill %d at %d/%d steps handled (callback received %v): SIGKILL %s, %s (pid %d), with %d received and not acked, %d acked within %v before; replacing it",
				run.name, kills, nSteps, n, cbReceived, what, p.inc.name, p.cmd.Process.Pid, k.unacked, k.lateAcks, run.ackGrace)
			startWorker(slot)
		}
		checkOrder()
		if time.Since(progressAt) > run.stall {
			t.Fatal(stalled())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: only %d of %d steps handled after %v (%d kills), callback handled %v", run.name, nSteps, n, run.timeout, kills, handled[n])
		}
		<-tick.C
	}
	processed := time.Since(start)
	stopWorkers(t, live, consume, deadline)

	// Drain: whatever is left (steps whose ack a kill lost, once their
	// lease has expired) is received here and counts as a delivery. The
	// steps go first: their acks run the bookkeeping too, and a duplicate
	// callback they enqueued would be found in the second drain.
	drainSteps := drainQueue(ctx, t, c, stepQueue, lastKill.Add(run.comeBack+2*time.Second))
	drainSteps.name = "drain-steps"
	drainCb := drainQueue(ctx, t, c, cbQueue, time.Now())
	drainCb.name = "drain-callback"

	incs := make([]incarnation, 0, len(all)+2)
	for _, p := range all {
		incs = append(incs, p.inc)
	}
	incs = append(incs, drainSteps, drainCb)
	r := analyze(n+1, incs, run.ackGrace, false)

	// The callback's deliveries: one, plus one per kill it was in flight
	// at (received and not acked, or on RabbitMQ acked within the grace).
	cbDeliveries, cbInFlight := 0, 0
	var cbWhere []string
	for _, inc := range incs {
		recv, settled := 0, 0
		cbID := ""
		for _, e := range inc.entries {
			switch {
			case e.op == opReceived && e.seq == n:
				recv++
				cbID = e.id
			case e.op == opAcked && e.id == cbID && cbID != "":
				if inc.killedAt.IsZero() || inc.killedAt.Sub(e.at) >= run.ackGrace {
					settled++
				}
			}
		}
		if recv == 0 {
			continue
		}
		cbDeliveries += recv
		w := fmt.Sprintf("%s %dx", inc.name, recv)
		if !inc.killedAt.IsZero() {
			cbInFlight += max(0, recv-settled)
			w += " (killed)"
		}
		cbWhere = append(cbWhere, w)
	}

	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	showStart := time.Now()
	st, stErr := c.WorkflowShow(wctx, id)
	showTime := time.Since(showStart)
	wcancel()

	t.Logf("%s: seed %d: %s", run.name, seed, r.summary())
	// A dependency's second run that finds the callback released but not
	// done enqueues it again (a no-op where a dedup key holds it), and
	// logs so.
	again := 0
	for _, p := range all {
		b, _ := os.ReadFile(p.logPath)
		again += strings.Count(string(b), "released again")
	}
	t.Logf("%s: callback delivered %d time(s) (%s), in flight at %d kill(s); enqueued again %d time(s) by a dependency's second run",
		run.name, cbDeliveries, strings.Join(cbWhere, ", "), cbInFlight, again)
	t.Logf("%s: times: start %v, processing with kills %v, drain received %d steps and %d callbacks, WorkflowShow %v, total %v", run.name,
		started.Round(time.Millisecond), processed.Round(time.Millisecond), countOp(drainSteps, opReceived), countOp(drainCb, opReceived),
		showTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	if len(r.inconsistent) > 0 {
		t.Errorf("ledgers contradict each other: %v", r.inconsistent[:min(10, len(r.inconsistent))])
	}
	if r.kills != run.kills {
		t.Errorf("%d kills happened; want %d", r.kills, run.kills)
	}
	if len(r.lost) > 0 {
		t.Errorf("%d steps lost (never handled; seq %d is the callback), e.g. seq %v", len(r.lost), n, r.lost[:min(10, len(r.lost))])
	}
	if r.duplicates > r.sumInFlight() {
		t.Errorf("%d duplicate deliveries, more than the %d steps in flight at the kills", r.duplicates, r.sumInFlight())
	}
	if r.unexplained > 0 {
		t.Errorf("%d duplicate deliveries of steps that were not in flight in a killed process (seq %d is the callback): %v", r.unexplained, n, r.unexplainedSeqs)
	}
	if t.Failed() {
		// The logs of the processes whose jobs ended other than acked
		// (a lease lost, ...): they say why.
		for _, p := range all {
			if slices.ContainsFunc(p.inc.entries, func(e entry) bool { return e.op == opOther }) {
				t.Logf("log of %s ends:\n%s", p.inc.name, p.logTail())
			}
		}
	}
	if cbDeliveries > 1+cbInFlight {
		t.Errorf("the callback was delivered %d times (%s) and in flight at %d kills: it was enqueued more than once",
			cbDeliveries, strings.Join(cbWhere, ", "), cbInFlight)
	}
	if stErr != nil {
		t.Errorf("WorkflowShow at the end: %v", stErr)
	} else if !st.Done() || st.Cancelled {
		t.Errorf("WorkflowShow at the end: %v (cancelled %v), callback %s; want every step done", countStatuses(&st), st.Cancelled, st.Steps[n].Status)
	}
	for _, q := range []string{stepQueue, cbQueue} {
		qs, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Errorf("QueueStats(%s): %v", q, err)
		} else if qs.Ready+qs.Delayed+qs.Leased+qs.Dead != 0 {
			t.Errorf("after the run %s holds ready=%d delayed=%d leased=%d dead=%d; want all 0", q, qs.Ready, qs.Delayed, qs.Leased, qs.Dead)
		}
	}
}

// countStatuses counts a workflow's steps by status.
func countStatuses(st *fila.WorkflowState) map[fila.StepStatus]int {
	m := map[fila.StepStatus]int{}
	for _, s := range st.Steps {
		m[s.Status]++
	}
	return m
}
