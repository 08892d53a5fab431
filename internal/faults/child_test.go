package faults_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/skips"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

// The worker processes of TestWorkerCrash are this test binary started again
// with childEnv set: TestMain sees it and runs workerChild instead of the
// tests (periodicChild for TestPeriodicProcesses). The other variables
// configure the child.
const (
	childEnv            = "FILA_FAULTS_CHILD" // "worker" or "periodic"
	childURLEnv         = "FILA_FAULTS_URL"
	childQueueEnv       = "FILA_FAULTS_QUEUE" // one queue, or several separated by commas
	childLedgerEnv      = "FILA_FAULTS_LEDGER"
	childLeaseEnv       = "FILA_FAULTS_LEASE"
	childConcurrencyEnv = "FILA_FAULTS_CONCURRENCY"
	childWorkEnv        = "FILA_FAULTS_WORK"
	// childFailEnv is the fraction (0 to 1) of first attempts whose
	// handler fails, so the worker retries them after childBackoffEnv;
	// unset, none fails.
	childFailEnv    = "FILA_FAULTS_FAIL_FIRST"
	childBackoffEnv = "FILA_FAULTS_BACKOFF"
)

// errFirstAttempt is the error of the first attempts a worker child fails
// on purpose (childFailEnv).
var errFirstAttempt = errors.New("faults: first attempt fails on purpose")

// jobKind is the kind of every message of the fault tests; the body is the
// message's sequence number in decimal.
const jobKind = "faults.job"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "worker":
		os.Exit(workerChild())
	case "periodic":
		os.Exit(periodicChild())
	}
	code := m.Run()
	skips.Report("github.com/fila-go/fila/internal/faults")
	os.Exit(code)
}

// jobTime is how long a job works: up to work/40 for most jobs, and between
// work/2 and work for one in eight (a slow job). Slow jobs fill all of a
// worker's slots now and then, so that messages wait in a client's buffer
// with no Receive asking for them (on RabbitMQ long enough, 150 ms, to be
// given back to the queue) while other jobs are in flight.
func jobTime(work time.Duration) time.Duration {
	if work <= 0 {
		return 0
	}
	if rand.N(8) == 0 {
		return work/2 + rand.N(work/2)
	}
	return rand.N(work / 40)
}

// workerChild is the main function of a worker process: a fila.Client and a
// worker.Worker serving one queue until SIGTERM, writing its ledger as it
// goes. Its exit code is 0 after a graceful stop, 2 when it could not start
// and 1 when the worker failed.
func workerChild() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(msg string, err error) int {
		log.Error("faults child: "+msg, slog.Any("error", err))
		return 2
	}
	url, queue, path := os.Getenv(childURLEnv), os.Getenv(childQueueEnv), os.Getenv(childLedgerEnv)
	lease, err := time.ParseDuration(os.Getenv(childLeaseEnv))
	if err != nil {
		return fail("bad "+childLeaseEnv, err)
	}
	concurrency, err := strconv.Atoi(os.Getenv(childConcurrencyEnv))
	if err != nil {
		return fail("bad "+childConcurrencyEnv, err)
	}
	work, err := time.ParseDuration(os.Getenv(childWorkEnv))
	if err != nil {
		return fail("bad "+childWorkEnv, err)
	}
	failFirst := 0.0
	backoff := worker.DefaultBackoff
	if v := os.Getenv(childFailEnv); v != "" {
		if failFirst, err = strconv.ParseFloat(v, 64); err != nil {
			return fail("bad "+childFailEnv, err)
		}
		d, err := time.ParseDuration(os.Getenv(childBackoffEnv))
		if err != nil {
			return fail("bad "+childBackoffEnv, err)
		}
		backoff = worker.ConstantBackoff(d)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	led, err := createLedger(path)
	if err != nil {
		return fail("ledger", err)
	}
	defer led.close()

	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := fila.Open(octx, url, fila.WithLogger(log))
	cancel()
	if err != nil && ctx.Err() != nil {
		return 0 // told to stop while still connecting: it handled nothing
	}
	if err != nil {
		return fail("open", err)
	}
	defer c.Close()

	queues := map[string]worker.QueueConfig{}
	for q := range strings.SplitSeq(queue, ",") {
		queues[q] = worker.QueueConfig{Concurrency: concurrency}
	}
	w, err := worker.New(c, worker.Config{
		Queues:  queues,
		Lease:   lease,
		Logger:  log,
		Backoff: backoff,
		// The ack line: OnJobEnd runs once the ack is stored (or failed).
		// Other outcomes (a stored retry among them) go on an X line
		// with their time.
		OnJobEnd: func(ev worker.JobEvent) {
			now := strconv.FormatInt(time.Now().UnixNano(), 10)
			if ev.Outcome == worker.OutcomeAck && ev.SettleErr == nil {
				led.write(opAcked, ev.ID, now)
				return
			}
			led.write(opOther, ev.ID, string(ev.Outcome)+" "+now)
		},
	})
	if err != nil {
		return fail("worker", err)
	}
	w.HandleFunc(jobKind, func(ctx context.Context, d *fila.Delivery) error {
		seq := string(d.Body)
		// Received: written before anything else, so a message this
		// process handed to a handler is never missing from its ledger.
		led.write(opReceived, d.ID, seq+" "+strconv.Itoa(d.Attempt))
		if d.Attempt == 1 && failFirst > 0 && rand.Float64() < failFirst {
			// Failing: written before the worker's Retry call, so a kill
			// during the Retry shows in the ledger (no H line).
			led.write(opFailing, d.ID, seq)
			return errFirstAttempt
		}
		if d := jobTime(work); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			}
		}
		// Handled: written before the handler returns nil, so before the
		// worker's ack call.
		led.write(opHandled, d.ID, seq)
		return nil
	})
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("faults child: worker stopped", slog.Any("error", err))
		return 1
	}
	if err := led.err(); err != nil {
		fmt.Fprintln(os.Stderr, "faults child: ledger:", err)
		return 1
	}
	return 0
}
