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
		Short: "List a broker's queues, pause or resume a queue, delete a queue, list its workers, set its limits",
	}
	cmd.AddCommand(newQueueListCmd(a), newQueuePauseCmd(a, true), newQueuePauseCmd(a, false), newQueueDeleteCmd(a), newQueueWorkersCmd(a), newQueueLimitsCmd(a))
	return cmd
}

func newQueueListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the names of the queues that hold messages or dead letters",
		Long: `Print, one per line and sorted, the names of the queues that hold a ready,
delayed or leased message or a dead letter (some brokers also list queues
that were emptied but not deleted). RabbitMQ lists its queues only through
its management API (fila_management_url in its URL): without it the command
exits 4. With --json the document also names the
paused queues ("paused", left out when the driver cannot pause queues);
fila stats --all shows them too.`,
		Example: `  fila queue list
  fila queue list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				qs, err := c.QueueList(ctx)
				if err != nil {
					return listHint(err)
				}
				if asJSON {
					paused, err := pausedQueues(ctx, c, qs)
					if err != nil {
						return err
					}
					return writeJSONLine(a.stdout, struct {
						Queues []string `json:"queues"`
						// Paused is nil (left out) when the driver cannot
						// pause queues.
						Paused *[]string `json:"paused,omitempty"`
					}{append([]string{}, qs...), paused})
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

// pausedQueues returns the paused ones of qs, or nil when the driver cannot
// pause queues.
func pausedQueues(ctx context.Context, c *fila.Client, qs []string) (*[]string, error) {
	paused := []string{}
	for _, q := range qs {
		p, err := c.QueuePaused(ctx, q)
		if errors.Is(err, fila.ErrUnsupported) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("paused state of queue %q: %w", q, err)
		}
		if p {
			paused = append(paused, q)
		}
	}
	return &paused, nil
}

// newQueuePauseCmd makes fila queue pause (pause true) or fila queue resume.
func newQueuePauseCmd(a *app, pause bool) *cobra.Command {
	verb, done := "resume", "resumed"
	short := "Resume a paused queue: workers receive its messages again"
	long := `Resume a queue paused with fila queue pause: within the clients' control
interval (1s by default) workers of every process receive its messages
again. Resuming a queue that is not paused changes nothing. Drivers that
cannot pause queues exit 4.`
	if pause {
		verb, done = "pause", "paused"
		short = "Pause a queue: no worker receives its messages until it is resumed"
		long = `Pause a queue: within twice the clients' control interval (2s by default)
no worker of any process receives its messages. Enqueueing goes on, and
deliveries already handed out run to their end and are settled as usual.
The pause is stored in the broker and lasts until fila queue resume;
fila stats shows which queues are paused. Pausing a paused queue changes
nothing. Drivers that cannot pause queues exit 4.`
	}
	return &cobra.Command{
		Use:     verb + " QUEUE",
		Short:   short,
		Long:    long,
		Example: "  fila queue " + verb + " emails",
		Args:    oneQueueArg(verb),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := fila.ValidateQueueName(q); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				var err error
				if pause {
					err = c.QueuePause(ctx, q)
				} else {
					err = c.QueueResume(ctx, q)
				}
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "%s queue %q\n", done, q)
				return err
			})
		},
	}
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
confirmation on standard input; --yes skips the question (for scripts).

A queue that holds nothing and that the broker does not list (a misspelt
name, or a queue already deleted) gets a warning on standard error and
"nothing to delete" instead of "deleted" (exit 0: the queue is gone either
way); where the broker cannot list its queues (RabbitMQ) the warning says
it cannot tell whether the queue exists.`,
		Example: `  fila queue delete old-emails
  fila queue delete old-emails --force --yes`,
		Args: oneQueueArg("delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := fila.ValidateQueueName(q); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				hint, checked, unknown := "", false, false
				if s, err := c.QueueStats(ctx, q); err == nil {
					checked = true
					n := s.Ready + s.Delayed + s.Leased + s.Dead
					if n > 0 && !force {
						return &exitErr{code: exitError, err: fmt.Errorf("queue %q holds %d ready, %d delayed, %d leased and %d dead; nothing deleted (add --force to delete it with everything it holds)",
							q, s.Ready, s.Delayed, s.Leased, s.Dead)}
					}
					hint = fmt.Sprintf(" (%d messages, %d dead letters)", s.Ready+s.Delayed+s.Leased, s.Dead)
					if n == 0 {
						known, listable := queueKnown(ctx, c, q)
						if msg := unknownQueueWarning(c.DriverName(), q, known, listable); msg != "" {
							a.warnf("%s", msg)
						}
						unknown = listable && !known
					}
				}
				if !yes {
					ok, err := a.confirm(ctx, fmt.Sprintf("Delete queue %q%s for good?", q, hint))
					if err != nil {
						return err
					}
					if !ok {
						return &exitErr{code: exitError, err: fmt.Errorf("aborted; nothing deleted (answer y to delete, or pass --yes)")}
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
				if unknown {
					// The delete still ran, for whatever the broker keeps
					// of a queue it does not list (dedup keys).
					_, err = fmt.Fprintf(a.stdout, "nothing to delete: queue %q holds nothing and the broker has no such queue\n", q)
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

// oneQueueArg accepts exactly one argument, the queue of fila queue sub.
func oneQueueArg(sub string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("name one queue (fila queue %s QUEUE)", sub)
		}
		return nil
	}
}
