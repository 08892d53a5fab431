package main

import (
	"context"
	"fmt"
	"strings"

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
dead letters to run it after all. It prints how many of the ids were
waiting and running, and names those the queue does not hold (acked,
dead-lettered, mistyped) where the broker can list messages. A cancel waits
up to 90 days for its message; an unknown id is not an error. Drivers that
cannot cancel messages exit 4.`,
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
				// What the queue holds of those ids, looked up first so the
				// output says what was found (where the driver can list
				// messages; a failed lookup only loses that detail).
				page, lerr := c.MessageList(ctx, *queue, fila.MessageListParams{IDs: ids, Limit: len(ids), WithoutBodies: true})
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
				_, err := fmt.Fprint(a.stdout, cancelReport(*queue, ids, page, lerr))
				return err
			})
		},
	}
}

// cancelReport says what a cancel of ids found in queue, from page (the
// pending messages among them, looked up before the cancel) unless lerr
// says the lookup could not be made.
func cancelReport(queue string, ids []string, page fila.MessagePage, lerr error) string {
	if lerr != nil {
		return fmt.Sprintf("cancel recorded for %d message id(s) of queue %q (the broker cannot say which it holds: a waiting one will be dead-lettered instead of run, a running one's handler told to stop)\n", len(ids), queue)
	}
	state := map[string]fila.MessageState{}
	for _, m := range page.Messages {
		state[m.ID] = m.State
	}
	waiting, running := 0, 0
	var missing []string
	for _, id := range ids {
		switch st, ok := state[id]; {
		case !ok:
			missing = append(missing, termSafe(id, false))
		case st == fila.StateLeased:
			running++
		default:
			waiting++
		}
	}
	out := fmt.Sprintf("cancelled %d waiting and %d running message(s) of queue %q\n", waiting, running, queue)
	if len(missing) > 0 {
		out += fmt.Sprintf("not pending (acked, dead-lettered already, or mistyped; the cancel is kept %d days in case it arrives): %s\n",
			int(fila.CancelHold.Hours()/24), strings.Join(missing, " "))
	}
	return out
}
