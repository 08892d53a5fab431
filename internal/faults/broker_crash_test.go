package faults_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// recoveryLimit is how soon after the restarted broker answers the same
// client must enqueue again and the same worker must have a message handled
// and acked.
const recoveryLimit = 5 * time.Second

// Shape of a broker-crash run.
const (
	// crashBefore and crashAfter are how many enqueues must have returned
	// nil before the kill (at least, plus up to as many again at random)
	// and after the restart before the producer stops.
	crashBefore = 300
	crashAfter  = 300
	// brokerLease is the worker's lease: messages whose ack the crash lost
	// come back when it expires (RabbitMQ requeues them at once).
	brokerLease = 5 * time.Second
)

// TestBrokerCrash starts a private broker, runs a producer and a worker on
// one fila.Client, kills the broker with SIGKILL mid-run and starts it again
// on the same port and data: every message whose Enqueue returned nil must
// be handled, and the producer and the worker must work again within
// recoveryLimit of the broker answering, without being restarted.
func TestBrokerCrash(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T) *server
	}{
		{"postgres", privatePostgres},
		{"redis", privateRedis},
		{"rabbitmq", privateRabbitMQ},
		{"mysql", privateMariaDB},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			runBrokerCrash(t, b.start(t))
		})
	}
}

// brokerRun is what the producer and the worker saw, shared with the test.
type brokerRun struct {
	mu        sync.Mutex
	confirmed map[int]time.Time // seq -> when its Enqueue returned nil
	handled   map[int]int       // seq -> handler runs
	acks      []time.Time       // when each ack was stored
	failures  int               // Enqueue calls that failed
	lastErr   error             // of the last failed Enqueue
	// unclassified holds failed Enqueue errors that are not
	// fila.ErrUnavailable (a retry cured them, so they should be).
	unclassified map[string]int
}

func (r *brokerRun) counts() (confirmed, handled int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.confirmed), len(r.handled)
}

// firstAfter returns the first of ts at or after t0.
func firstAfter(ts []time.Time, t0 time.Time) (time.Time, bool) {
	var first time.Time
	for _, t := range ts {
		if !t.Before(t0) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first, !first.IsZero()
}

func (r *brokerRun) recovered(ready time.Time) (enq, ack time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	enqs := make([]time.Time, 0, len(r.confirmed))
	for _, t := range r.confirmed {
		enqs = append(enqs, t)
	}
	enq, ok1 := firstAfter(enqs, ready)
	ack, ok2 := firstAfter(r.acks, ready)
	return enq, ack, ok1 && ok2
}

// waitUntil polls cond every 10ms until it holds (true) or limit passes
// (false).
func waitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func runBrokerCrash(t *testing.T, srv *server) {
	seed := seedFor(t)
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	logf, err := os.Create(filepath.Join(t.TempDir(), "client.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clientLog := func() string {
		b, _ := os.ReadFile(logf.Name())
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c, err := fila.Open(ctx, srv.url, fila.WithLogger(log))
	if err != nil {
		t.Fatalf("open %s: %v", fila.Redact(srv.url), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	queue := "faults-bc-" + randomHex(6)

	run := &brokerRun{confirmed: map[int]time.Time{}, handled: map[int]int{}, unclassified: map[string]int{}}
	w, err := worker.New(c, worker.Config{
		Queues: map[string]worker.QueueConfig{queue: {Concurrency: 8}},
		Lease:  brokerLease,
		Logger: log,
		OnJobEnd: func(ev worker.JobEvent) {
			if ev.Outcome == worker.OutcomeAck && ev.SettleErr == nil {
				now := time.Now()
				run.mu.Lock()
				run.acks = append(run.acks, now)
				run.mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.HandleFunc(jobKind, func(_ context.Context, d *fila.Delivery) error {
		seq, err := strconv.Atoi(string(d.Body))
		if err != nil {
			return worker.Permanent(fmt.Errorf("body %q", d.Body))
		}
		run.mu.Lock()
		run.handled[seq]++
		run.mu.Unlock()
		return nil
	})
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()

	// The producer enqueues seq 0, 1, 2, ... one at a time, retrying each
	// until its Enqueue returns nil (a retry may store it twice: allowed).
	stopProducer := make(chan struct{})
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		for seq := 0; ; seq++ {
			for {
				select {
				case <-stopProducer:
					return
				default:
				}
				// Longer than the drivers' own waits for a connection (5s),
				// so a failure is theirs to classify.
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Enqueue(cctx, queue, fila.Message{Kind: jobKind, Body: []byte(strconv.Itoa(seq))})
				ccancel()
				now := time.Now()
				run.mu.Lock()
				if err == nil {
					run.confirmed[seq] = now
				} else {
					run.failures++
					run.lastErr = err
					if !errors.Is(err, fila.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
						run.unclassified[err.Error()]++
					}
				}
				run.mu.Unlock()
				if err == nil {
					break
				}
				select { // back off a little: a down broker refuses at once
				case <-stopProducer:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	defer func() {
		select {
		case <-producerDone:
		default:
			close(stopProducer)
			<-producerDone
		}
	}()

	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		if !waitUntil(limit, cond) {
			confirmed, handled := run.counts()
			run.mu.Lock()
			failures, lastErr := run.failures, run.lastErr
			run.mu.Unlock()
			t.Fatalf("%s: not within %v (%d enqueues confirmed, %d messages handled, %d enqueue calls failed, the last with %v); client log ends:\n%s\nserver log ends:\n%s",
				what, limit, confirmed, handled, failures, lastErr, clientLog(), srv.logTail())
		}
	}

	before := crashBefore + rng.IntN(crashBefore)
	waitFor("work before the crash", time.Minute, func() bool {
		confirmed, handled := run.counts()
		return confirmed >= before && handled >= before/2
	})
	if srv.minQueueAge > 0 {
		run.mu.Lock()
		first := run.confirmed[0]
		run.mu.Unlock()
		waitFor("the queue to be old enough to survive a kill", time.Minute, func() bool {
			return time.Since(first) >= srv.minQueueAge
		})
	}
	srv.kill()
	killed := time.Now()
	atKill, _ := run.counts()
	// Stay down until an enqueue has failed, so the
	// clients live through an outage and not a blip.
	run.mu.Lock()
	failedBefore := run.failures
	run.mu.Unlock()
	waitFor("failed enqueues while the broker is down", 30*time.Second, func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		return run.failures > failedBefore
	})
	srv.start()
	ready := srv.waitReady(startLimit)

	var enqAt, ackAt time.Time
	waitFor("enqueue and handle again after the restart", 30*time.Second, func() bool {
		var ok bool
		enqAt, ackAt, ok = run.recovered(ready)
		return ok
	})
	enqRecovery, ackRecovery := enqAt.Sub(ready), ackAt.Sub(ready)

	waitFor("work after the restart", time.Minute, func() bool {
		confirmed, _ := run.counts()
		return confirmed >= atKill+crashAfter
	})
	close(stopProducer)
	<-producerDone

	// Every confirmed enqueue must be handled; messages whose ack the crash
	// lost come back when their lease expires.
	// (When some never come, the check below reports them as lost.)
	waitUntil(time.Minute+brokerLease, func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		for seq := range run.confirmed {
			if run.handled[seq] == 0 {
				return false
			}
		}
		return true
	})
	stopWorker()
	select {
	case err := <-workerDone:
		if err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("worker.Run did not return within 30s of its context's end")
	}

	run.mu.Lock()
	defer run.mu.Unlock()
	dups := 0
	for _, n := range run.handled {
		dups += n - 1
	}
	var lost []int
	for seq := range run.confirmed {
		if run.handled[seq] == 0 {
			lost = append(lost, seq)
		}
	}
	slices.Sort(lost)
	t.Logf("%s: seed %d: %d enqueues confirmed (%d before the kill), %d failed enqueue calls retried, %d messages handled, %d duplicate runs, %d lost",
		srv.name, seed, len(run.confirmed), atKill, run.failures, len(run.handled), dups, len(lost))
	t.Logf("%s: broker down %v (kill to answering again); recovery after it answered: first enqueue %v, first handled and acked message %v (limit %v)",
		srv.name, ready.Sub(killed).Round(time.Millisecond), enqRecovery.Round(time.Millisecond), ackRecovery.Round(time.Millisecond), recoveryLimit)
	for msg, n := range run.unclassified {
		t.Errorf("%d failed enqueue(s) do not match fila.ErrUnavailable although a retry cured them: %s", n, msg)
	}
	if len(lost) > 0 {
		t.Errorf("%d confirmed enqueues lost, e.g. seq %v", len(lost), lost[:min(10, len(lost))])
	}
	if enqRecovery > recoveryLimit {
		t.Errorf("first successful Enqueue %v after the broker answered again; want <= %v; client log ends:\n%s", enqRecovery, recoveryLimit, clientLog())
	}
	if ackRecovery > recoveryLimit {
		t.Errorf("first handled and acked message %v after the broker answered again; want <= %v; client log ends:\n%s", ackRecovery, recoveryLimit, clientLog())
	}
}
