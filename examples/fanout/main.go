// Command fanout shows Fila's topics: an "orders" topic with two
// subscriptions, "orders.email" and "orders.audit", a producer that
// publishes three orders, and two workers, each processing its own copy of
// every order. The audit worker's first try at order 2 fails and is
// retried; the mail for order 2 does not wait for it, since each copy lives
// on its own. It runs on the in-memory broker by default; set FILA_URL to
// run the same code on a real broker:
//
//	go run ./examples/fanout
//	go run ./examples/fanout -v   # with the workers' logs on stderr
//	FILA_URL=postgres://postgres@127.0.0.1:5432/test?fila_migrate=true go run ./examples/fanout
//	FILA_URL=redis://127.0.0.1:6379/0 go run ./examples/fanout
//	FILA_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/fanout
//	FILA_URL=mongodb://127.0.0.1:27017/fila go run ./examples/fanout
//	FILA_URL='mysql://root@127.0.0.1:3306/test?fila_migrate=true' go run ./examples/fanout
//
// On a real broker the topic and queue names end with a random suffix
// (orders-<random>, orders-<random>.email, ...), so that runs side by side
// never share a subscription. At the end both subscriptions are ended,
// which deletes their queues. On PostgreSQL, fila_migrate=true creates
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
	"net/url"
	"os"
	"slices"
	"strings"
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

// OrderCreated is the event's argument: the order's id, not the order, so
// each subscriber reads what it needs when it runs.
type OrderCreated struct {
	OrderID int64 `json:"order_id"`
}

// OrderCreatedJob is the kind, declared once for the producer and the
// workers.
var OrderCreatedJob = worker.Kind[OrderCreated]{Name: "order.created"}

func main() {
	verbose := flag.Bool("v", false, "log the workers' records (queue, kind, id, attempt) to stderr")
	flag.Parse()
	u := os.Getenv("FILA_URL")
	if u == "" {
		u = "mem://"
	}
	logs := io.Discard
	if *verbose {
		logs = os.Stderr
	}
	if err := run(u, os.Stdout, logs); err != nil {
		fmt.Fprintln(os.Stderr, "fanout example:", err)
		os.Exit(1)
	}
}

// run tells the story on the broker at rawURL, writing it to out and the
// client's and workers' logs to logs.
func run(rawURL string, out, logs io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := fila.Open(ctx, rawURL, fila.WithLogger(logger))
	if err != nil {
		return err
	}
	defer c.Close()

	topic := "orders"
	if u, err := url.Parse(rawURL); err == nil && u.Scheme != "mem" {
		topic += "-" + suffix()
	}
	email, audit := topic+".email", topic+".audit"
	fmt.Fprintf(out, "broker %s\n", fila.Redact(rawURL))

	// Each subscription is a queue. Ending them at the end deletes the
	// queues with whatever they still hold, whatever happened.
	for _, q := range []string{email, audit} {
		if err := c.TopicSubscribe(ctx, topic, q); err != nil {
			return err
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.TopicUnsubscribe(dctx, topic, q); err != nil {
				fmt.Fprintf(out, "unsubscribing %s: %v\n", q, err)
			}
		}()
	}
	fmt.Fprintf(out, "topic %s: subscriptions %s and %s\n", topic, email, audit)

	// Producer: three orders, one publish each; every subscription gets a
	// copy with an id of its own, fila.CopyID(published id, queue).
	orders := map[string]int64{} // copy id -> order id, for the story
	for _, o := range []int64{1, 2, 3} {
		m, err := OrderCreatedJob.Message(OrderCreated{OrderID: o})
		if err != nil {
			return err
		}
		res, err := c.PublishBatch(ctx, topic, []fila.Message{m})
		if err != nil {
			return err
		}
		for _, q := range []string{email, audit} {
			orders[fila.CopyID(res.IDs[0], q)] = o
		}
		fmt.Fprintf(out, "published order %d: %s\n", o, copies(res.Subscriptions))
	}

	// Two workers, one per subscription, as two services would run them.
	// Each stops once its three copies are done.
	var (
		mu    sync.Mutex
		story []string
		wg    sync.WaitGroup
		errs  = make([]error, 2)
	)
	for i, s := range []struct {
		name, queue string
		handle      func(context.Context, OrderCreated, *fila.Delivery) error
	}{
		{"email", email, sendConfirmation},
		{"audit", audit, recordOrder},
	} {
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := 0
		w, err := worker.New(c, worker.Config{
			Queues: map[string]worker.QueueConfig{s.queue: {Concurrency: 2}},
			// Quick retries, for the story.
			Backoff: func(int) time.Duration { return 100 * time.Millisecond },
			Logger:  logger,
			OnJobEnd: func(ev worker.JobEvent) {
				mu.Lock()
				defer mu.Unlock()
				o, ok := orders[ev.ID]
				if !ok {
					story = append(story, fmt.Sprintf("%s: a copy with an unknown id %s", s.name, ev.ID))
				}
				line := fmt.Sprintf("%s: order %d, attempt %d: %s", s.name, o, ev.Attempt, ev.Outcome)
				if ev.Reason != "" {
					line += " (" + ev.Reason + ")"
				}
				story = append(story, line)
				if ev.Outcome == worker.OutcomeAck || ev.Outcome == worker.OutcomeDead {
					done++
				}
				if done == 3 {
					stop()
				}
			},
		})
		if err != nil {
			return err
		}
		worker.Handle(w, OrderCreatedJob, s.handle)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(runCtx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("the workers did not finish within a minute")
	}

	// Concurrent jobs end in any order; print the story in a stable one.
	slices.Sort(story)
	for _, line := range story {
		fmt.Fprintln(out, " ", line)
	}
	if slices.ContainsFunc(story, func(l string) bool { return strings.Contains(l, "unknown id") }) {
		return errors.New("a worker got a copy whose id is not fila.CopyID(published id, its queue)")
	}
	fmt.Fprintln(out, "each worker processed its own copy of every order; both stopped")
	return nil
}

// copies says how many subscriptions got a copy; RabbitMQ knows only that
// at least one did (-1).
func copies(n int) string {
	switch {
	case n < 0:
		return "copied to at least one subscription"
	case n == 1:
		return "copied to 1 subscription"
	default:
		return fmt.Sprintf("copied to %d subscriptions", n)
	}
}

// sendConfirmation pretends to mail the customer.
func sendConfirmation(ctx context.Context, args OrderCreated, d *fila.Delivery) error {
	worker.Logger(ctx).Debug("mailing the confirmation", slog.Int64("order_id", args.OrderID))
	return nil
}

// recordOrder pretends to write the audit log, which is busy on the first
// try at order 2: the worker retries that copy, and the mail of order 2,
// another copy in another queue, does not wait for it.
func recordOrder(ctx context.Context, args OrderCreated, d *fila.Delivery) error {
	if args.OrderID == 2 && d.Attempt == 1 {
		return errors.New("audit log busy")
	}
	worker.Logger(ctx).Debug("recording the order", slog.Int64("order_id", args.OrderID))
	return nil
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
