package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

func newEnqueueCmd(a *app) *cobra.Command {
	var (
		queue string
		mf    messageFlags
	)
	cmd := &cobra.Command{
		Use:   "enqueue",
		Short: "Enqueue one message and print its id",
		Long: `Enqueue one message and print its id. The body is --body, or standard input
when --body is not given. With a dedup key already held by a pending message,
nothing is stored, the holder's id is printed and the exit code is 5.`,
		Example: `  fila enqueue -q emails -k email.welcome --body '{"user_id":42}'
  echo '{"user_id":42}' | fila enqueue -q emails -k email.welcome --header tenant=acme --delay 10m
  fila enqueue -q reports -k report.build --dedup-key report:2026-11 < args.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := mf.message(cmd, a.stdin)
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				id, err := c.Enqueue(ctx, queue, m)
				var dup *fila.DuplicateError
				if errors.As(err, &dup) {
					fmt.Fprintln(a.stdout, dup.ID)
					return err
				}
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(a.stdout, id)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&queue, "queue", "q", "", "queue to enqueue into (required)")
	_ = cmd.MarkFlagRequired("queue")
	mf.register(cmd, "refuse the message while a pending one holds this key")
	return cmd
}

// messageFlags are the flags that make one fila.Message, shared by fila
// enqueue and fila topic publish.
type messageFlags struct {
	kind, body, dedup, runAt string
	headers                  []string
	delay                    time.Duration
	maxAttempts, priority    int
}

// register adds the message flags to cmd; dedupHelp tells what --dedup-key
// does there.
func (mf *messageFlags) register(cmd *cobra.Command, dedupHelp string) {
	f := cmd.Flags()
	f.StringVarP(&mf.kind, "kind", "k", "", "message kind, naming its handler (required)")
	f.StringVar(&mf.body, "body", "", "message body (default: read standard input)")
	f.StringArrayVar(&mf.headers, "header", nil, "header KEY=VALUE (repeatable)")
	f.DurationVar(&mf.delay, "delay", 0, "make the message ready after this delay")
	f.StringVar(&mf.runAt, "run-at", "", "make the message ready at this RFC 3339 time")
	f.StringVar(&mf.dedup, "dedup-key", "", dedupHelp)
	f.IntVar(&mf.maxAttempts, "max-attempts", 0, "the message's own max attempts (default: the client's)")
	f.IntVar(&mf.priority, "priority", 0, fmt.Sprintf("the message's level, 0 (lowest, the default) to %d (highest): higher levels are handed out first", fila.MaxPriority))
	_ = cmd.MarkFlagRequired("kind")
}

// message builds the message the flags describe, reading the body from stdin
// when --body is not given. Bad flag values are usage errors; the rest of
// the validation is the client's.
func (mf *messageFlags) message(cmd *cobra.Command, stdin io.Reader) (fila.Message, error) {
	m := fila.Message{Kind: mf.kind, Delay: mf.delay, DedupKey: mf.dedup, MaxAttempts: mf.maxAttempts, Priority: mf.priority}
	if mf.maxAttempts < 0 {
		return m, usagef("--max-attempts %d is negative", mf.maxAttempts)
	}
	if mf.priority < 0 || mf.priority > fila.MaxPriority {
		return m, usagef("--priority %d must be between 0 (lowest) and %d (highest)", mf.priority, fila.MaxPriority)
	}
	if mf.runAt != "" {
		t, err := time.Parse(time.RFC3339, mf.runAt)
		if err != nil {
			return m, usagef("--run-at %q is not an RFC 3339 time (2026-01-02T15:04:05Z)", mf.runAt)
		}
		m.RunAt = t
	}
	for _, h := range mf.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return m, usagef("--header %q must be KEY=VALUE", h)
		}
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		m.Headers[k] = v
	}
	if cmd.Flags().Changed("body") {
		m.Body = []byte(mf.body)
	} else {
		b, err := io.ReadAll(io.LimitReader(stdin, fila.DefaultMaxBodyBytes+1))
		if err != nil {
			return m, fmt.Errorf("read the body from standard input: %w", err)
		}
		m.Body = b
	}
	return m, nil
}
