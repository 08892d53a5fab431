package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

// SendWelcome is a job's arguments: an id, not the whole user, so the job
// reads fresh data when it runs.
type SendWelcome struct {
	UserID int64 `json:"user_id"`
}

// SendWelcomeJob ties the arguments to their kind, for producers and
// workers alike.
var SendWelcomeJob = worker.Kind[SendWelcome]{Name: "email.welcome"}

// quiet discards the worker's own logs so the examples' output reads
// cleanly.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A typed job enqueued by a producer and run by a worker until the work is
// done.
func Example() {
	ctx := context.Background()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open()) // or fila.Open(ctx, url)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	for _, id := range []int64{1, 2} {
		if _, err := SendWelcomeJob.Enqueue(ctx, client, "emails", SendWelcome{UserID: id}); err != nil {
			fmt.Println(err)
			return
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	var finished atomic.Int32
	w, err := worker.New(client, worker.Config{
		Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 1}},
		Logger: quiet,
		OnJobEnd: func(ev worker.JobEvent) {
			if finished.Add(1) == 2 {
				stop() // the demo ends when both jobs are done
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	worker.Handle(w, SendWelcomeJob, func(ctx context.Context, args SendWelcome, d *fila.Delivery) error {
		fmt.Printf("welcome mail to user %d\n", args.UserID)
		return nil
	})
	if err := w.Run(runCtx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("worker stopped")
	// Output:
	// welcome mail to user 1
	// welcome mail to user 2
	// worker stopped
}

// The outcome policy: a transient error is retried after the backoff, a
// permanent one is dead-lettered at once, success is acked.
func Example_outcomes() {
	ctx := context.Background()
	client, err := fila.New(memory.NewBroker(memory.BrokerOptions{}).Open())
	if err != nil {
		panic(err)
	}
	defer client.Close()
	for _, id := range []int64{1, 2} {
		_, _ = SendWelcomeJob.Enqueue(ctx, client, "emails", SendWelcome{UserID: id})
	}

	runCtx, stop := context.WithCancel(ctx)
	var settled atomic.Int32
	w, _ := worker.New(client, worker.Config{
		Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 1}},
		Kinds: map[string]worker.KindConfig{
			SendWelcomeJob.Name: {MaxAttempts: 5, Backoff: worker.ConstantBackoff(50 * time.Millisecond)},
		},
		Logger: quiet,
		OnJobEnd: func(ev worker.JobEvent) {
			fmt.Printf("attempt %d: %s", ev.Attempt, ev.Outcome)
			if ev.Reason != "" {
				fmt.Printf(" (%s)", ev.Reason)
			}
			if ev.Outcome == worker.OutcomeRetry {
				fmt.Printf(" in %v", ev.RetryDelay)
			}
			fmt.Println()
			if ev.Outcome != worker.OutcomeRetry && settled.Add(1) == 2 {
				stop()
			}
		},
	})
	worker.Handle(w, SendWelcomeJob, func(ctx context.Context, args SendWelcome, d *fila.Delivery) error {
		switch {
		case args.UserID == 1 && d.Attempt == 1:
			return errors.New("smtp timeout")
		case args.UserID == 2:
			return worker.Permanent(fmt.Errorf("user %d has no address", args.UserID))
		}
		return nil
	})
	_ = w.Run(runCtx)

	page, _ := client.DeadList(ctx, "emails", fila.DeadListParams{})
	for _, l := range page.Letters {
		fmt.Printf("dead letter: %s %s: %s\n", l.Kind, l.Body, l.Reason)
	}
	// Output:
	// attempt 1: retry (smtp timeout) in 50ms
	// attempt 1: dead (user 2 has no address)
	// attempt 2: ack
	// dead letter: email.welcome {"user_id":2}: user 2 has no address
}

// The default retry schedule, without its jitter.
func ExampleExponentialBackoff() {
	b := worker.ExponentialBackoff{Base: 30 * time.Second, Factor: 4, Max: 10 * time.Minute}
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Printf("after attempt %d: %v\n", attempt, b.Delay(attempt))
	}
	// Output:
	// after attempt 1: 30s
	// after attempt 2: 2m0s
	// after attempt 3: 8m0s
	// after attempt 4: 10m0s
	// after attempt 5: 10m0s
}

// A middleware that reports each job's kind and result; list it in
// Config.Middleware to wrap every handler.
func ExampleMiddleware() {
	report := worker.Middleware(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, d *fila.Delivery) error {
			err := next.Work(ctx, d)
			fmt.Printf("%s attempt %d: error %v\n", d.Kind, d.Attempt, err)
			return err
		})
	})
	h := report(worker.HandlerFunc(func(ctx context.Context, d *fila.Delivery) error {
		return errors.New("smtp timeout")
	}))
	_ = h.Work(context.Background(), &fila.Delivery{Kind: "email.welcome", Attempt: 1})
	// Output: email.welcome attempt 1: error smtp timeout
}

// Handlers log through the job's logger, which carries the queue, kind, id
// and attempt.
func ExampleLogger() {
	h := worker.HandlerFunc(func(ctx context.Context, d *fila.Delivery) error {
		worker.Logger(ctx).Info("sending welcome mail")
		return nil
	})
	_ = h
}
