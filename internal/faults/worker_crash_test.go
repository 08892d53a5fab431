package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// crashRun is the shape of one worker-crash run.
type crashRun struct {
	name        string // the broker, for the log
	url         string
	messages    int
	workers     int
	kills       int
	concurrency int
	// lease is the workers' lease. A killed worker's leases must expire
	// before its messages come back on PostgreSQL and Redis (RabbitMQ
	// requeues them when the connection drops), so it is short; heartbeats
	// extend it for the jobs that run.
	lease time.Duration
	// work is the longest job (see jobTime).
	work time.Duration
	// ackGrace: acks stored less than this before a kill count as in
	// flight. PostgreSQL and Redis answer an ack once it is applied, so an
	// ack that returned nil is final (0). A RabbitMQ ack is a basic.ack
	// frame written to the socket with no answer: a process killed right
	// after writing it can die before the broker has read it (the kernel
	// resets the connection, and what the broker had not read yet is
	// dropped), and the message is delivered again although Ack returned
	// nil.
	ackGrace time.Duration
	timeout  time.Duration
}

// defaultCrashRun is the run the issue asks for: 10,000 messages, 4
// worker processes, 5 kills.
func defaultCrashRun(url string) crashRun {
	return crashRun{
		url: url, messages: 10000, workers: 4, kills: 5,
		// 16 slots: a Receive then asks for 10 or more at once, so on
		// RabbitMQ the consumer's prefetch is twice that, and with slow
		// jobs holding every slot the rest wait in the buffer and are
		// given back (the path of the known give-back defect).
		concurrency: 16,
		lease:       5 * time.Second,
		work:        300 * time.Millisecond,
		timeout:     150 * time.Second,
	}
}

// TestWorkerCrash runs 10,000 messages through 4 worker processes (this test
// binary started again, see workerChild), SIGKILLs a random one at 5 random
// moments and restarts it, and checks from the processes' ledgers that no
// message is lost and that every message delivered more than once was in
// flight (received by a handler, its ack not seen stored) in a process at a
// kill, as often as it was delivered again.
func TestWorkerCrash(t *testing.T) {
	for _, b := range []struct {
		name     string
		url      func(testing.TB) string
		ackGrace time.Duration
	}{
		{"postgres", func(tb testing.TB) string { return withParam(tb, testenv.PostgresURL(tb), "fila_migrate", "true") }, 0},
		{"redis", testenv.RedisURL, 0},
		{"rabbitmq", testenv.RabbitMQURL, rabbitAckGrace},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			run := defaultCrashRun(b.url(t))
			run.name, run.ackGrace = b.name, b.ackGrace
			runWorkerCrash(t, run)
		})
	}
}

// rabbitAckGrace is the ack grace on RabbitMQ (see crashRun.ackGrace): how
// long after an ack frame was written the broker may still not have read
// it, on a loaded machine.
const rabbitAckGrace = time.Second

// workerProc is one incarnation of a worker process.
type workerProc struct {
	inc     incarnation
	cmd     *exec.Cmd
	tail    *tail
	logPath string
	done    chan struct{} // closed when the process has ended and been reaped
	waitErr error
	ready   bool                // its ledger exists: it handles SIGTERM
	running map[string]struct{} // ids of the jobs received and not finished, per its ledger
}

func (p *workerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// readLedger appends the ledger lines written since the last call to
// p.inc.entries and returns them.
func (p *workerProc) readLedger() ([]entry, error) {
	if !p.ready {
		if _, err := os.Stat(p.tail.path); err != nil {
			return nil, nil
		}
		p.ready = true
	}
	es, err := p.tail.read()
	p.inc.entries = append(p.inc.entries, es...)
	if p.running == nil {
		p.running = map[string]struct{}{}
	}
	for _, e := range es {
		switch e.op {
		case opReceived:
			p.running[e.id] = struct{}{}
		case opHandled, opOther:
			delete(p.running, e.id)
		}
	}
	return es, err
}

func (p *workerProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func runWorkerCrash(t *testing.T, run crashRun) {
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
	queue := "faults-wc-" + randomHex(6)
	testenv.CleanupQueue(t, c, queue)

	// Enqueue everything first; the body is the sequence number.
	for lo := 0; lo < run.messages; lo += 1000 {
		batch := make([]fila.Message, 0, 1000)
		for seq := lo; seq < min(lo+1000, run.messages); seq++ {
			batch = append(batch, fila.Message{Kind: jobKind, Body: []byte(strconv.Itoa(seq))})
		}
		if _, err := c.EnqueueBatch(ctx, queue, batch); err != nil {
			t.Fatalf("enqueue %d..%d: %v", lo, lo+len(batch)-1, err)
		}
	}
	enqueued := time.Since(start)

	// Kill moments: random points of progress (handled messages) between
	// 5% and 90%.
	thresholds := make([]int, run.kills)
	for i := range thresholds {
		thresholds[i] = run.messages/20 + rng.IntN(run.messages*17/20)
	}
	slices.Sort(thresholds)

	dir := t.TempDir()
	settings := workerSettings{url: run.url, queue: queue, lease: run.lease, concurrency: run.concurrency, work: run.work}
	var all []*workerProc // every incarnation, in start order
	live := make([]*workerProc, run.workers)
	starts := make([]int, run.workers)
	startWorker := func(slot int) {
		// w2.1 is the second process run in slot 2 (its first restart).
		p := startWorkerProc(t, dir, fmt.Sprintf("w%d.%d", slot, starts[slot]), settings)
		starts[slot]++
		all = append(all, p)
		live[slot] = p
	}
	for slot := range run.workers {
		startWorker(slot)
	}

	handled := make([]bool, run.messages)
	nHandled := 0
	consume := func(p *workerProc) {
		es, err := p.readLedger()
		if err != nil {
			t.Fatalf("ledger of %s: %v", p.inc.name, err)
		}
		for _, e := range es {
			if e.op == opHandled && e.seq >= 0 && e.seq < run.messages && !handled[e.seq] {
				handled[e.seq] = true
				nHandled++
			}
		}
	}
	// victim picks the process to kill: a random one among those that
	// have jobs running (a process still starting up has nothing to
	// lose), or any when none has.
	victim := func() int {
		var busy []int
		for slot, p := range live {
			if len(p.running) > 0 {
				busy = append(busy, slot)
			}
		}
		if len(busy) == 0 {
			return rng.IntN(run.workers)
		}
		return busy[rng.IntN(len(busy))]
	}
	var lastKill time.Time
	kills := 0
	deadline := start.Add(run.timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for nHandled < run.messages {
		for _, p := range live {
			consume(p)
			if p.exited() {
				t.Fatalf("worker %s exited by itself (%v); its log ends:\n%s", p.inc.name, p.waitErr, p.logTail())
			}
		}
		for kills < run.kills && nHandled >= thresholds[kills] {
			slot := victim()
			p := live[slot]
			p.inc.killedAt = time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s: %v", p.inc.name, err)
			}
			<-p.done
			lastKill = p.inc.killedAt
			consume(p) // its ledger is final now
			kills++
			k := analyze(run.messages, []incarnation{p.inc}, run.ackGrace, false).inFlight[0]
			t.Logf("%s: kill %d at %d/%d handled: SIGKILL %s (pid %d) with %d received and not acked, %d acked within %v before; restarting",
				run.name, kills, nHandled, run.messages, p.inc.name, p.cmd.Process.Pid, k.unacked, k.lateAcks, run.ackGrace)
			startWorker(slot)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d messages handled after %v (%d kills)", nHandled, run.messages, run.timeout, kills)
		}
		<-tick.C
	}
	processed := time.Since(start)
	stopWorkers(t, live, consume, deadline)

	// Drain: whatever is left (messages whose ack a kill lost, once their
	// lease has expired) is received here and counts as a delivery.
	drain := drainQueue(ctx, t, c, queue, lastKill.Add(run.lease+2*time.Second))

	incs := make([]incarnation, 0, len(all)+1)
	for _, p := range all {
		incs = append(incs, p.inc)
	}
	incs = append(incs, drain)
	r := analyze(run.messages, incs, run.ackGrace, false)

	st, err := c.QueueStats(ctx, queue)
	if err != nil {
		t.Errorf("QueueStats: %v", err)
	} else if st.Ready+st.Delayed+st.Leased+st.Dead != 0 {
		t.Errorf("after the run the queue holds ready=%d delayed=%d leased=%d dead=%d; want all 0", st.Ready, st.Delayed, st.Leased, st.Dead)
	}

	t.Logf("%s: seed %d: %s", run.name, seed, r.summary())
	t.Logf("%s: times: enqueue %v, processing with kills %v, drain received %d, total %v", run.name,
		enqueued.Round(time.Millisecond), processed.Round(time.Millisecond), countOp(drain, opReceived), time.Since(start).Round(time.Millisecond))
	if len(r.inconsistent) > 0 {
		t.Errorf("ledgers contradict each other: %v", r.inconsistent[:min(10, len(r.inconsistent))])
	}
	if r.kills != run.kills {
		t.Errorf("%d kills happened; want %d", r.kills, run.kills)
	}
	if len(r.lost) > 0 {
		t.Errorf("%d messages lost (never handled), e.g. seq %v", len(r.lost), r.lost[:min(10, len(r.lost))])
	}
	if r.duplicates > r.sumInFlight() {
		t.Errorf("%d duplicate deliveries, more than the %d messages in flight at the kills", r.duplicates, r.sumInFlight())
	}
	if r.unexplained > 0 {
		t.Errorf("%d duplicate deliveries of messages that were not in flight in a killed process: %v", r.unexplained, r.unexplainedSeqs)
	}
}

// workerSettings are what a worker child is told (see workerChild).
type workerSettings struct {
	url, queue  string
	lease       time.Duration
	concurrency int
	work        time.Duration // the longest job (see jobTime)
	// failFirst is the fraction of first attempts whose handler fails,
	// which the worker retries after backoff; 0 fails none.
	failFirst float64
	backoff   time.Duration
}

// startWorkerProc starts a worker child named name, its ledger and log in
// dir, and kills it when the test ends if it still runs then.
func startWorkerProc(t *testing.T, dir, name string, s workerSettings) *workerProc {
	t.Helper()
	p := &workerProc{
		inc:     incarnation{name: name},
		logPath: filepath.Join(dir, name+".log"),
		tail:    &tail{path: filepath.Join(dir, name+".ledger")},
		done:    make(chan struct{}),
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(),
		childEnv+"=worker",
		childURLEnv+"="+s.url,
		childQueueEnv+"="+s.queue,
		childLedgerEnv+"="+p.tail.path,
		childLeaseEnv+"="+s.lease.String(),
		childConcurrencyEnv+"="+strconv.Itoa(s.concurrency),
		childWorkEnv+"="+s.work.String(),
	)
	if s.failFirst > 0 {
		p.cmd.Env = append(p.cmd.Env,
			childFailEnv+"="+strconv.FormatFloat(s.failFirst, 'g', -1, 64),
			childBackoffEnv+"="+s.backoff.String())
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start worker %s: %v", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stopWorkers stops the processes of live gracefully (pending acks are
// stored, unstarted messages released), each once it handles SIGTERM, and
// reads their ledgers to the end with consume.
func stopWorkers(t *testing.T, live []*workerProc, consume func(*workerProc), deadline time.Time) {
	t.Helper()
	for _, p := range live {
		for !p.ready && !p.exited() {
			consume(p)
			if time.Now().After(deadline) {
				t.Fatalf("worker %s did not start; its log ends:\n%s", p.inc.name, p.logTail())
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range live {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %s did not stop within 30s of SIGTERM; its log ends:\n%s", p.inc.name, p.logTail())
		}
		if p.waitErr != nil {
			t.Errorf("worker %s: %v after SIGTERM; its log ends:\n%s", p.inc.name, p.waitErr, p.logTail())
		}
		consume(p)
	}
}

// drainQueue receives and acks what is left in queue until a receive finds
// nothing after quietAfter, and returns what it got as an incarnation.
func drainQueue(ctx context.Context, t *testing.T, c *fila.Client, queue string, quietAfter time.Time) incarnation {
	t.Helper()
	inc := incarnation{name: "drain"}
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ds, err := c.Receive(rctx, queue, fila.ReceiveParams{Max: 100, Lease: time.Minute})
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("drain: receive: %v", err)
		}
		for _, d := range ds {
			seq, err := strconv.Atoi(string(d.Body))
			if err != nil {
				t.Fatalf("drain: message %s has body %q", d.ID, d.Body)
			}
			inc.entries = append(inc.entries,
				entry{op: opReceived, id: d.ID, seq: seq, attempt: d.Attempt},
				entry{op: opHandled, id: d.ID, seq: seq})
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("drain: ack: %v", err)
			}
			inc.entries = append(inc.entries, entry{op: opAcked, id: d.ID, seq: -1, at: time.Now()})
		}
		if len(ds) == 0 && time.Now().After(quietAfter) {
			return inc
		}
	}
}

func countOp(inc incarnation, op byte) int {
	n := 0
	for _, e := range inc.entries {
		if e.op == op {
			n++
		}
	}
	return n
}

// seedFor returns the random seed of a test: FILA_FAULTS_SEED when set (to
// replay a run), otherwise a fresh one. The test logs it.
func seedFor(t *testing.T) uint64 {
	if s := os.Getenv("FILA_FAULTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FILA_FAULTS_SEED=%q: %v", s, err)
		}
		return v
	}
	return mrand.Uint64()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withParam returns rawURL with the query parameter k set to v.
func withParam(tb testing.TB, rawURL, k, v string) string {
	tb.Helper()
	if rawURL == "" {
		return ""
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("bad URL: %v", err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}
