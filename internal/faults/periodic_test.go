package faults_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/mongo"
	"github.com/fila-go/fila/worker"
)

// The processes of TestPeriodicProcesses are this test binary started again
// with childEnv=periodic; these variables configure them (with childURLEnv
// and childQueueEnv).
const (
	childPeriodicEnv = "FILA_FAULTS_PERIODIC" // the schedule's name
	childReadyEnv    = "FILA_FAULTS_READY"    // a file created once the worker is made
)

// periodicKind is the kind of the periodic test's runs.
const periodicKind = "faults.periodic"

// periodicRun is the shape of TestPeriodicProcesses: processes running one
// schedule of a tick a second for a while.
const (
	periodicProcs    = 3
	periodicDuration = 20 * time.Second
)

// TestPeriodicProcesses runs one 1-second schedule in 3 worker processes for
// 20 s on each real broker whose driver keeps marks (backend.Marker), and
// checks from the queue that exactly one run was enqueued per tick: none
// twice, and none missing while every process ran.
//
// The processes enqueue without dedup keys (see periodicChild), so the
// queue shows what the marks alone achieve.
func TestPeriodicProcesses(t *testing.T) {
	for _, b := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"postgres", func(tb testing.TB) string { return withParam(tb, testenv.PostgresURL(tb), "fila_migrate", "true") }},
		{"redis", testenv.RedisURL},
		{"rabbitmq", testenv.RabbitMQURL},
		{"mongo", func(tb testing.TB) string { return withParam(tb, testenv.MongoURL(tb), "fila_database", "fila_faults") }},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			runPeriodicProcesses(t, b.name, b.url(t))
		})
	}
}

func runPeriodicProcesses(t *testing.T, name, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), periodicDuration+2*time.Minute)
	defer cancel()
	c, err := fila.Open(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", fila.Redact(url), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, ok := c.Driver().(backend.Marker); !ok {
		t.Skipf("the %s driver keeps no marks (backend.Marker), which periodic jobs need", name)
	}
	queue := "faults-periodic-" + randomHex(6)
	testenv.CleanupQueue(t, c, queue)

	dir := t.TempDir()
	type proc struct {
		name, log, ready string
		cmd              *exec.Cmd
		done             chan struct{}
		err              error
	}
	procs := make([]*proc, periodicProcs)
	for i := range procs {
		p := &proc{name: fmt.Sprintf("p%d", i), done: make(chan struct{})}
		p.log, p.ready = filepath.Join(dir, p.name+".log"), filepath.Join(dir, p.name+".ready")
		logf, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(os.Args[0], "-test.run=^$")
		p.cmd.Env = append(os.Environ(),
			childEnv+"=periodic",
			childURLEnv+"="+url,
			childQueueEnv+"="+queue,
			childPeriodicEnv+"=every-second",
			childReadyEnv+"="+p.ready,
		)
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", p.name, err)
		}
		logf.Close()
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		procs[i] = p
		t.Cleanup(func() {
			select {
			case <-p.done:
			default:
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		})
	}
	logTail := func(p *proc) string {
		b, _ := os.ReadFile(p.log)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return string(b)
	}

	// Every process has made its worker (and starts its schedule at once).
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for _, p := range procs {
		for {
			if _, err := os.Stat(p.ready); err == nil {
				break
			}
			select {
			case <-p.done:
				t.Fatalf("%s exited before it was ready (%v); its log ends:\n%s", p.name, p.err, logTail(p))
			case <-ctx.Done():
				t.Fatalf("%s not ready: %v", p.name, ctx.Err())
			case <-tick.C:
			}
		}
	}
	allReady := time.Now()
	t.Logf("%s: %d processes running the schedule", name, periodicProcs)

	select {
	case <-time.After(periodicDuration):
	case <-procs[0].done:
	case <-procs[1].done:
	case <-procs[2].done:
	}
	stopAt := time.Now()
	for _, p := range procs {
		select {
		case <-p.done:
			t.Fatalf("%s exited by itself (%v); its log ends:\n%s", p.name, p.err, logTail(p))
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within 30s of SIGTERM; its log ends:\n%s", p.name, logTail(p))
		}
		if p.err != nil {
			t.Errorf("%s: %v after SIGTERM; its log ends:\n%s", p.name, p.err, logTail(p))
		}
	}

	// Every run is in the queue now: the processes enqueued before exiting.
	runs := map[time.Time]int{} // by tick, in UTC
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		ds, err := c.Receive(rctx, queue, fila.ReceiveParams{Max: 100})
		rcancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, d := range ds {
			v := d.Headers[worker.HeaderScheduledAt]
			at, err := time.Parse(time.RFC3339Nano, v)
			if d.Kind != periodicKind || err != nil {
				t.Fatalf("run %s: kind %q, %s %q (%v)", d.ID, d.Kind, worker.HeaderScheduledAt, v, err)
			}
			runs[at.UTC()]++
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}

	// Every tick from the second after all processes were ready to the
	// last second before they were stopped ran once; the ticks around
	// those (some processes starting or stopping) ran at most once.
	first := allReady.UTC().Truncate(time.Second).Add(2 * time.Second)
	last := stopAt.UTC().Truncate(time.Second).Add(-time.Second)
	var missing []string
	for at := first; !at.After(last); at = at.Add(time.Second) {
		if runs[at] == 0 {
			missing = append(missing, at.UTC().Format(time.TimeOnly))
		}
	}
	var twice []string
	total := 0
	for _, n := range runs {
		total += n
	}
	ticks := slices.SortedFunc(func(yield func(time.Time) bool) {
		for at := range runs {
			if !yield(at) {
				return
			}
		}
	}, func(a, b time.Time) int { return a.Compare(b) })
	for _, at := range ticks {
		if at.Nanosecond() != 0 {
			t.Errorf("run for %v, not a whole second", at)
		}
		if runs[at] > 1 {
			twice = append(twice, fmt.Sprintf("%s×%d", at.UTC().Format(time.TimeOnly), runs[at]))
		}
	}
	t.Logf("%s: %d runs for %d ticks; %d ticks between %s and %s must have run",
		name, total, len(ticks), int(last.Sub(first)/time.Second)+1, first.UTC().Format(time.TimeOnly), last.UTC().Format(time.TimeOnly))
	if len(twice) > 0 {
		t.Errorf("ticks enqueued more than once: %v", twice)
	}
	if len(missing) > 0 {
		t.Errorf("ticks never enqueued while %d processes ran the schedule: %v", periodicProcs, missing)
	}
	if n := int(last.Sub(first)/time.Second) + 1; n < int(periodicDuration/time.Second)-4 {
		t.Errorf("only %d ticks checked in %v", n, periodicDuration)
	}
}

// periodicChild is the main function of a TestPeriodicProcesses process: a
// fila.Client and a worker.Worker running one 1-second schedule until
// SIGTERM. Its exit code is 0 after a graceful stop, 2 when it could not
// start and 1 when the worker failed.
//
// Its client has the driver's marks and nothing beyond the Driver
// interface: without dedup keys, a tick two processes both claimed would
// be enqueued twice (a dedup key folds the second copy while the first is
// pending), so the test sees what the marks achieve.
func periodicChild() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fail := func(msg string, err error) int {
		log.Error("faults periodic child: "+msg, slog.Any("error", err))
		return 2
	}
	url, queue, name, ready := os.Getenv(childURLEnv), os.Getenv(childQueueEnv), os.Getenv(childPeriodicEnv), os.Getenv(childReadyEnv)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	opened, err := fila.Open(octx, url, fila.WithLogger(log))
	cancel()
	if err != nil {
		return fail("open", err)
	}
	defer opened.Close() // closes the driver c shares
	marker, ok := opened.Driver().(backend.Marker)
	if !ok {
		return fail("driver", errors.New("no marks"))
	}
	c, err := fila.New(struct {
		backend.Driver
		backend.Marker
	}{opened.Driver(), marker}, fila.WithLogger(log))
	if err != nil {
		return fail("client", err)
	}

	w, err := worker.New(c, worker.Config{
		Periodic: []worker.Periodic{{
			Name: name, Queue: queue, Every: time.Second,
			Message: fila.Message{Kind: periodicKind},
		}},
		Logger: log,
	})
	if err != nil {
		return fail("worker", err)
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return fail("ready file", err)
	}
	if err := w.Run(ctx); err != nil {
		log.Error("faults periodic child: worker stopped", slog.Any("error", err))
		return 1
	}
	return 0
}
