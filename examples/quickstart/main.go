// Command quickstart shows Fila's producer, consumer, retry and dead letter
// in one short story. It runs on the in-memory broker by default; set
// FILA_URL to run the same code on a real broker:
//
//	go run ./examples/quickstart
//	FILA_URL=postgres://postgres@127.0.0.1:5432/test?fila_migrate=true go run ./examples/quickstart
//	FILA_URL=redis://127.0.0.1:6379/0 go run ./examples/quickstart
//
// Each run uses a queue of its own (quickstart-<random>) and deletes it, with
// its dead letter, at the end. On PostgreSQL, fila_migrate=true creates
// Fila's tables (schema "fila") if they are missing; they are left in place.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

type welcome struct {
	UserID int `json:"user_id"` // an id, not the user: the handler reads fresh data
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	return story(os.Stdout, os.Getenv("FILA_URL"))
}

func story(out io.Writer, url string) error {
	if url == "" {
		url = "mem://"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Quiet the client's own logs so the story reads cleanly.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := fila.Open(ctx, url, fila.WithLease(10*time.Second), fila.WithMaxAttempts(3), fila.WithLogger(logger))
	if err != nil {
		return err
	}
	defer c.Close()
	queue := "quickstart-" + suffix()
	fmt.Fprintf(out, "broker %s, queue %s\n", fila.Redact(url), queue)
	// The demo queue goes at the end, with its messages and dead letters,
	// whatever happened.
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.QueueDelete(dctx, queue, fila.QueueDeleteParams{Force: true}); err != nil {
			fmt.Fprintf(out, "deleting queue %s: %v\n", queue, err)
			return
		}
		fmt.Fprintf(out, "deleted queue %s\n", queue)
	}()

	// Producer: three jobs. User 2's mail server times out once; user 3's
	// address is malformed, which no retry can fix.
	for _, id := range []int{1, 2, 3} {
		body, _ := json.Marshal(welcome{UserID: id})
		if _, err := c.Enqueue(ctx, queue, fila.Message{Kind: "email.welcome", Body: body}); err != nil {
			return err
		}
		fmt.Fprintf(out, "enqueued welcome email for user %d\n", id)
	}

	// Consumer: receive under a lease, then ack, retry or dead-letter.
	done := 0
	for done < 3 {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 10})
		if err != nil {
			return err
		}
		for _, d := range ds {
			var job welcome
			if err := json.Unmarshal(d.Body, &job); err != nil {
				return err
			}
			switch err := sendWelcome(job.UserID, d.Attempt); {
			case err == nil:
				fmt.Fprintf(out, "user %d: sent on attempt %d, ack\n", job.UserID, d.Attempt)
				err = d.Ack(ctx)
				done++
			case errors.Is(err, errPermanent):
				fmt.Fprintf(out, "user %d: %v, dead-letter\n", job.UserID, err)
				err = d.Dead(ctx, err.Error())
				done++
			default:
				fmt.Fprintf(out, "user %d: %v on attempt %d, retry in 200ms\n", job.UserID, err, d.Attempt)
				err = d.Retry(ctx, 200*time.Millisecond, err.Error())
			}
			if err != nil {
				return err
			}
		}
	}

	page, err := c.DeadList(ctx, queue, fila.DeadListParams{})
	if errors.Is(err, fila.ErrUnsupported) {
		fmt.Fprintln(out, "this broker cannot list dead letters")
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

var errPermanent = errors.New("invalid address")

func sendWelcome(userID, attempt int) error {
	switch {
	case userID == 2 && attempt == 1:
		return errors.New("smtp timeout")
	case userID == 3:
		return fmt.Errorf("user-%d@: %w", userID, errPermanent)
	}
	return nil
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
