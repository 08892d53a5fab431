package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

func newQueueCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List a broker's queues, delete a queue",
	}
	cmd.AddCommand(newQueueListCmd(a), newQueueDeleteCmd(a))
	return cmd
}

func newQueueListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the names of the queues that hold messages or dead letters",
		Long: `Print, one per line and sorted, the names of the queues that hold a ready,
delayed or leased message or a dead letter (some brokers also list queues
that were emptied but not deleted). RabbitMQ cannot list its queues over
AMQP: there the command exits 4.`,
		Example: `  fila queue list
  fila queue list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				qs, err := c.QueueList(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSONLine(a.stdout, struct {
						Queues []string `json:"queues"`
					}{append([]string{}, qs...)})
				}
				for _, q := range qs {
					if _, err := fmt.Fprintln(a.stdout, q); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of one name per line")
	return cmd
}

func newQueueDeleteCmd(a *app) *cobra.Command {
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "delete QUEUE",
		Short: "Delete a queue with its messages and dead letters, after a confirmation prompt",
		Long: `Delete a queue: its ready, delayed and leased messages, its dead letters, its
dedup keys and the broker's structures for it. Workers holding its messages
get a lost lease when they settle them. Without --force a queue that holds
anything is refused (exit 1) and keeps it all. The command asks for
confirmation on standard input; --yes skips the question (for scripts).`,
		Example: `  fila queue delete old-emails
  fila queue delete old-emails --force --yes`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("name one queue (fila queue delete QUEUE)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := fila.ValidateQueueName(q); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				hint, checked := "", false
				if s, err := c.QueueStats(ctx, q); err == nil {
					checked = true
					n := s.Ready + s.Delayed + s.Leased + s.Dead
					if n > 0 && !force {
						return &exitErr{code: exitError, err: fmt.Errorf("queue %q holds %d ready, %d delayed, %d leased and %d dead; nothing deleted (add --force to delete it with everything it holds)",
							q, s.Ready, s.Delayed, s.Leased, s.Dead)}
					}
					hint = fmt.Sprintf(" (%d messages, %d dead letters)", s.Ready+s.Delayed+s.Leased, s.Dead)
				}
				if !yes {
					ok, err := a.confirm(ctx, fmt.Sprintf("Delete queue %q%s for good?", q, hint))
					if err != nil {
						return err
					}
					if !ok {
						return &exitErr{code: exitError, err: fmt.Errorf("aborted; nothing deleted")}
					}
				}
				// Checked empty above: no need for QueueDelete to read the
				// stats again.
				err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: force || checked})
				if errors.Is(err, fila.ErrQueueNotEmpty) {
					return &exitErr{code: exitError, err: fmt.Errorf("%w; nothing deleted (add --force to delete it with everything it holds)", err)}
				}
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "deleted queue %q\n", q)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete the queue even when it holds messages or dead letters")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
