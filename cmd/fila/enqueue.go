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
		queue, kind, body, dedup, runAt string
		headers                         []string
		delay                           time.Duration
		maxAttempts                     int
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
			m := fila.Message{Kind: kind, Delay: delay, DedupKey: dedup, MaxAttempts: maxAttempts}
			if maxAttempts < 0 {
				return usagef("--max-attempts %d is negative", maxAttempts)
			}
			if runAt != "" {
				t, err := time.Parse(time.RFC3339, runAt)
				if err != nil {
					return usagef("--run-at %q is not an RFC 3339 time (2026-01-02T15:04:05Z)", runAt)
				}
				m.RunAt = t
			}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, "=")
				if !ok || k == "" {
					return usagef("--header %q must be KEY=VALUE", h)
				}
				if m.Headers == nil {
					m.Headers = map[string]string{}
				}
				m.Headers[k] = v
			}
			if cmd.Flags().Changed("body") {
				m.Body = []byte(body)
			} else {
				b, err := io.ReadAll(io.LimitReader(a.stdin, fila.DefaultMaxBodyBytes+1))
				if err != nil {
					return fmt.Errorf("read the body from standard input: %w", err)
				}
				m.Body = b
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
	f := cmd.Flags()
	f.StringVarP(&queue, "queue", "q", "", "queue to enqueue into (required)")
	f.StringVarP(&kind, "kind", "k", "", "message kind, naming its handler (required)")
	f.StringVar(&body, "body", "", "message body (default: read standard input)")
	f.StringArrayVar(&headers, "header", nil, "header KEY=VALUE (repeatable)")
	f.DurationVar(&delay, "delay", 0, "make the message ready after this delay")
	f.StringVar(&runAt, "run-at", "", "make the message ready at this RFC 3339 time")
	f.StringVar(&dedup, "dedup-key", "", "refuse the message while a pending one holds this key")
	f.IntVar(&maxAttempts, "max-attempts", 0, "the message's own max attempts (default: the client's)")
	_ = cmd.MarkFlagRequired("queue")
	_ = cmd.MarkFlagRequired("kind")
	return cmd
}
