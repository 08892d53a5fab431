// Command worker runs Fila's worker runtime on a short story: two kinds of
// typed jobs, a transient failure retried with backoff, a permanent failure
// dead-lettered at once, and a graceful stop once the work is done. It runs
// on the in-memory broker by default; set FILA_URL to run the same code on a
// real broker:
//
//	go run ./examples/worker
//	go run ./examples/worker -v   # with the worker's logs on stderr
//	FILA_URL=postgres://postgres@127.0.0.1:5432/test?fila_migrate=true go run ./examples/worker
//	FILA_URL=redis://127.0.0.1:6379/0 go run ./examples/worker
//	FILA_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/worker
//	FILA_URL=mongodb://127.0.0.1:27017/fila go run ./examples/worker
//	FILA_URL='mysql://root@127.0.0.1:3306/test?fila_migrate=true' go run ./examples/worker
//
// Each run uses a queue of its own (example-worker-<random>) and deletes it,
// with its dead letter, at the end. On PostgreSQL, fila_migrate=true creates
// Fila's tables (schema "fila") if they are missing; they are left in place.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

// SendWelcome and BuildReport are the jobs' arguments: ids, not whole
// objects, so a job reads the current state when it runs.
type (
	SendWelcome struct {
		UserID int64 `json:"user_id"`
	}
	BuildReport struct {
		ReportID int64 `json:"report_id"`
	}
)

// The kinds, declared once for producers and workers.
var (
	SendWelcomeJob = worker.Kind[SendWelcome]{Name: "email.welcome"}
	BuildReportJob = worker.Kind[BuildReport]{Name: "report.build"}
)

func main() {
	verbose := flag.Bool("v", false, "log the worker's records (queue, kind, id, attempt) to stderr")
	flag.Parse()
	url := os.Getenv("FILA_URL")
	if url == "" {
		url = "mem://"
	}
	logs := io.Discard
	if *verbose {
		logs = os.Stderr
	}
	if err := run(url, os.Stdout, logs); err != nil {
		fmt.Fprintln(os.Stderr, "worker example:", err)
		os.Exit(1)
	}
}

// run tells the story on the broker at url, writing it to out and the
// client's and worker's logs to logs.
func run(url string, out, logs io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := fila.Open(ctx, url, fila.WithLogger(logger))
	if err != nil {
		return err
	}
	defer c.Close()
	queue := "example-worker-" + suffix()
	fmt.Fprintf(out, "broker %s\n", fila.Redact(url))
	// The demo queue goes at the end, with its messages and dead letters,
	// whatever happened.
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.QueueDelete(dctx, queue, fila.QueueDeleteParams{Force: true}); err != nil {
			fmt.Fprintf(out, "deleting queue %s: %v\n", queue, err)
		}
	}()

	// Producer: three welcome mails and two reports.
	ids := map[string]string{}
	for _, u := range []int64{1, 2, 3} {
		id, err := SendWelcomeJob.Enqueue(ctx, c, queue, SendWelcome{UserID: u})
		if err != nil {
			return err
		}
		ids[id] = fmt.Sprintf("welcome mail for user %d", u)
	}
	for _, r := range []int64{10, 11} {
		id, err := BuildReportJob.Enqueue(ctx, c, queue, BuildReport{ReportID: r})
		if err != nil {
			return err
		}
		ids[id] = fmt.Sprintf("report %d", r)
	}
	fmt.Fprintf(out, "enqueued %d jobs\n", len(ids))

	// Worker: runs until every job is acked or dead-lettered.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu          sync.Mutex
		story       []string
		done, deads int
	)
	w, err := worker.New(c, worker.Config{
		Queues: map[string]worker.QueueConfig{queue: {Concurrency: 4}},
		Kinds: map[string]worker.KindConfig{
			// Reports are slow and flaky: more time, quicker retries.
			BuildReportJob.Name: {
				Timeout:     10 * time.Second,
				MaxAttempts: 3,
				Backoff:     worker.ExponentialBackoff{Base: 200 * time.Millisecond, Factor: 2, Max: 2 * time.Second, Jitter: 0.2}.Delay,
			},
		},
		Logger: logger,
		OnJobEnd: func(ev worker.JobEvent) {
			mu.Lock()
			defer mu.Unlock()
			line := fmt.Sprintf("%s, attempt %d: %s", ids[ev.ID], ev.Attempt, ev.Outcome)
			if ev.Reason != "" {
				line += " (" + ev.Reason + ")"
			}
			story = append(story, line)
			switch ev.Outcome {
			case worker.OutcomeAck:
				done++
			case worker.OutcomeDead:
				deads++
			}
			if done+deads == len(ids) {
				stop()
			}
		},
	})
	if err != nil {
		return err
	}
	worker.Handle(w, SendWelcomeJob, sendWelcome)
	worker.Handle(w, BuildReportJob, buildReport)
	if err := w.Run(runCtx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("the jobs did not finish within a minute")
	}

	// Concurrent jobs end in any order; print the story in a stable one.
	sortStrings(story)
	for _, line := range story {
		fmt.Fprintln(out, " ", line)
	}
	fmt.Fprintf(out, "%d done, %d dead-lettered; the worker stopped\n", done, deads)

	page, err := c.DeadList(ctx, queue, fila.DeadListParams{})
	if errors.Is(err, fila.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, l := range page.Letters {
		fmt.Fprintf(out, "dead letter: %s %s after %d attempt(s): %s\n", l.Kind, l.Body, l.Attempts, l.Reason)
	}
	return nil
}

// sendWelcome pretends to send a mail.
func sendWelcome(ctx context.Context, args SendWelcome, d *fila.Delivery) error {
	worker.Logger(ctx).Debug("sending welcome mail", slog.Int64("user_id", args.UserID))
	return nil
}

// buildReport pretends to build a report: report 10's warehouse is busy on
// the first attempt (a transient error, retried); report 11 does not exist
// (a permanent error, dead-lettered at once).
func buildReport(ctx context.Context, args BuildReport, d *fila.Delivery) error {
	switch {
	case args.ReportID == 11:
		return worker.Permanent(fmt.Errorf("report %d does not exist", args.ReportID))
	case args.ReportID == 10 && d.Attempt == 1:
		return errors.New("warehouse busy")
	}
	select {
	case <-time.After(50 * time.Millisecond): // the work
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
