package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

func newMessageCmd(a *app) *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "message",
		Short: "List a queue's ready, delayed and running messages, show one, cancel by id",
		Long: `List the messages of a queue that are not dead letters (ready, delayed, or
leased: running in a worker), show one by id, or cancel messages by id (the
id fila enqueue printed, or the one a worker logs). Listing claims nothing
and changes nothing.`,
	}
	cmd.PersistentFlags().StringVarP(&queue, "queue", "q", "", "queue of the messages (required)")
	_ = cmd.MarkPersistentFlagRequired("queue")
	cmd.AddCommand(newMessageListCmd(a, &queue), newMessageShowCmd(a, &queue), newMessageCancelCmd(a, &queue))
	return cmd
}

func newMessageCancelCmd(a *app, queue *string) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel messages by id: they are dead-lettered with reason cancelled instead of run",
		Long: `Cancel messages by id. A message that is ready or delayed is never run: the
first worker to claim it dead-letters it with reason "` + fila.ReasonCancelled + `" (until then it
counts as ready or delayed in fila stats). A message a worker is running is
not stopped by force: within the control interval (1s by default) the
worker cancels its handler's context, and a retry dead-letters it instead;
a handler that succeeds anyway acks it. Replay a cancelled message from the
dead letters to run it after all. A cancel waits up to 90 days for its
message; an unknown id is not an error. Drivers that cannot cancel messages
exit 4.`,
		Example: `  fila message cancel -q emails 0190a3c4-...
  fila message cancel -q emails ID1 ID2 ID3`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("name at least one message id (fila message cancel -q QUEUE ID...)")
			}
			if len(args) > fila.MaxReceive {
				return usagef("at most %d ids at once, got %d", fila.MaxReceive, len(args))
			}
			for _, id := range args {
				if id == "" {
					return usagef("a message id is empty")
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := fila.ValidateQueueName(*queue); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				for i, id := range ids {
					if err := c.MessageCancel(ctx, *queue, id); err != nil {
						if i > 0 {
							// Say what was done before the failure, keeping
							// the error's exit code.
							return fmt.Errorf("cancelled %d of %d message(s) of queue %q, then %s: %w", i, len(ids), *queue, id, err)
						}
						return err
					}
				}
				_, err := fmt.Fprintf(a.stdout, "cancelled %d message(s) of queue %q\n", len(ids), *queue)
				return err
			})
		},
	}
}
