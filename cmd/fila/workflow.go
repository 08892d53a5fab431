package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// maxNamesColumn bounds the step names an AFTER or "blocked by" cell of
// fila workflow show lists before "+N more" (a fan-in waits for
// thousands).
const maxNamesColumn = 3

// stepStatuses are the step statuses in the order fila workflow show
// counts them ("queued": in its queue, on a driver that cannot tell ready
// from running); any other follows in the order the steps show it.
var stepStatuses = []fila.StepStatus{fila.StepDone, fila.StepRunning, fila.StepReady, "queued",
	fila.StepPending, fila.StepDead, fila.StepUnknown}

func newWorkflowCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "List workflows, show a workflow's steps, cancel or delete a workflow",
		Long: `Inspect and stop workflows (fila.Client.WorkflowStart): sets of steps, each a
message for a queue, some of which wait for others. A step is pending until
the ack of its last dependency enqueues it; then it is ready, running, done
or dead like any message of its queue (fila stats, fila message, fila
dead). A dead step blocks the steps that wait for it: replay it (fila dead
replay -q QUEUE --id MESSAGE-ID) to let the workflow go on.`,
	}
	cmd.AddCommand(newWorkflowListCmd(a), newWorkflowShowCmd(a), newWorkflowCancelCmd(a), newWorkflowDeleteCmd(a))
	return cmd
}

// oneWorkflowArg accepts exactly one argument, the workflow id of fila
// workflow sub.
func oneWorkflowArg(sub string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("name one workflow id (fila workflow %s ID)", sub)
		}
		return nil
	}
}

// workflowErr explains an error of a workflow call on id: an unknown id
// exits 1 saying where the ids are.
func workflowErr(id string, err error) error {
	if errors.Is(err, fila.ErrWorkflowNotFound) {
		return &exitErr{code: exitError, err: fmt.Errorf("no workflow %s: never started, deleted, or mistyped (fila workflow list shows the ids of the workflows the broker holds)", termSafe(id, false))}
	}
	return err
}

func newWorkflowListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the ids of the workflows the broker holds",
		Long: `Print, one per line and sorted, the ids of the workflows the broker holds
(started and not deleted, finished or not). Workflows live in queues of
their own, so the command needs a driver that lists queues: RabbitMQ does
only through its management API (fila_management_url in its URL); without
it the command exits 4. fila workflow show ID reads one workflow whatever
the driver.`,
		Example: `  fila workflow list
  fila workflow list --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				ids, err := c.WorkflowList(ctx)
				if errors.Is(err, fila.ErrUnsupported) {
					return fmt.Errorf("%w\nThe broker cannot list its workflows: name one instead, fila workflow show ID (the id fila.Client.WorkflowStart returned; steps carry it in their %s header).", err, fila.HeaderWorkflow)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSONLine(a.stdout, struct {
						Workflows []string `json:"workflows"`
					}{append([]string{}, ids...)})
				}
				for _, id := range ids {
					if _, err := fmt.Fprintln(a.stdout, termSafe(id, false)); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of one id per line")
	return cmd
}

// stepJSON is a workflow step as printed with --json.
type stepJSON struct {
	Name      string   `json:"name"`
	Queue     string   `json:"queue"`
	MessageID string   `json:"message_id"`
	After     []string `json:"after"`
	Status    string   `json:"status"`
	// Attempt is the delivery count of a ready, running or dead step, 0
	// for the others.
	Attempt   int      `json:"attempt"`
	Reason    string   `json:"reason,omitempty"`
	BlockedBy []string `json:"blocked_by,omitempty"`
}

// workflowJSON is a workflow as printed by fila workflow show --json.
type workflowJSON struct {
	ID        string         `json:"id"`
	Created   time.Time      `json:"created"`
	Cancelled bool           `json:"cancelled"`
	Done      bool           `json:"done"`
	Counts    map[string]int `json:"counts"`
	Steps     []stepJSON     `json:"steps"`
}

func toWorkflowJSON(st *fila.WorkflowState) workflowJSON {
	j := workflowJSON{ID: st.ID, Created: st.Created.UTC(), Cancelled: st.Cancelled, Done: st.Done(),
		Counts: map[string]int{}, Steps: make([]stepJSON, 0, len(st.Steps))}
	for _, s := range st.Steps {
		j.Counts[string(s.Status)]++
		j.Steps = append(j.Steps, stepJSON{Name: s.Name, Queue: s.Queue, MessageID: s.MessageID,
			After: append([]string{}, s.After...), Status: string(s.Status), Attempt: s.Attempt,
			Reason: s.Reason, BlockedBy: s.BlockedBy})
	}
	return j
}

func newWorkflowShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a workflow and the state of each of its steps",
		Long: `Show workflow ID: when it was created, whether it was cancelled, how many
steps are in each state, and a table of its steps: name, queue, status,
attempt, the steps it waits for (AFTER), its message id, and a note: the
dead dependencies that block a pending step ("blocked by X"), the reason
of a dead step (its first line; fila dead show -q QUEUE MESSAGE-ID prints
it whole).

A step is pending (waiting for its dependencies, in no queue yet), ready
(in its queue, or delayed for a retry), running (leased by a worker), done
(acked), dead (in its queue's dead letters), queued (in its queue: the
driver cannot list messages to tell ready from running, RabbitMQ), or
unknown (it moved between two reads: run the command again). The state is
read step by step: it is exact for a workflow nothing changes meanwhile.
Control characters in names and reasons print escaped (\x1b). An unknown
id exits 1.`,
		Example: `  fila workflow show order-7
  fila workflow show order-7 --json`,
		Args: oneWorkflowArg("show"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := fila.ValidateWorkflowID(id); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				st, err := c.WorkflowShow(ctx, id)
				if err != nil {
					return workflowErr(id, err)
				}
				if asJSON {
					return writeJSONLine(a.stdout, toWorkflowJSON(&st))
				}
				return writeWorkflow(a.stdout, &st)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// statusCounts says how many steps of st are in each status, in the order
// of stepStatuses, leaving out those with none: "1 done, 2 pending".
func statusCounts(st *fila.WorkflowState) string {
	var parts []string
	seen := map[fila.StepStatus]bool{}
	for _, s := range stepStatuses {
		seen[s] = true
		if n := st.Count(s); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	// Any other: counted all the same.
	for _, s := range st.Steps {
		if !seen[s.Status] {
			seen[s.Status] = true
			parts = append(parts, fmt.Sprintf("%d %s", st.Count(s.Status), termSafe(string(s.Status), false)))
		}
	}
	return strings.Join(parts, ", ")
}

// shortNames lists names, comma-separated, cut after maxNamesColumn with
// "+N more"; "-" for none.
func shortNames(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	shown := names[:min(len(names), maxNamesColumn)]
	safe := make([]string, len(shown))
	for i, n := range shown {
		safe[i] = termSafe(n, false)
	}
	out := strings.Join(safe, ",")
	if more := len(names) - len(shown); more > 0 {
		out += fmt.Sprintf(" +%d more", more)
	}
	return out
}

// stepNote is the NOTE cell of a step: what blocks a pending step, why a
// dead one died.
func stepNote(s *fila.StepState) string {
	switch {
	case s.Status == fila.StepPending && len(s.BlockedBy) > 0:
		return "blocked by " + shortNames(s.BlockedBy)
	case s.Status == fila.StepDead:
		return termSafe(shortReason(s.Reason), false)
	}
	return ""
}

func writeWorkflow(w io.Writer, st *fila.WorkflowState) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", termSafe(st.ID, false))
	fmt.Fprintf(tw, "created:\t%s\n", formatTime(st.Created))
	cancelled := "no"
	if st.Cancelled {
		cancelled = "yes"
	}
	fmt.Fprintf(tw, "cancelled:\t%s\n", cancelled)
	state := statusCounts(st)
	if st.Done() {
		state += " (finished)"
	}
	fmt.Fprintf(tw, "steps:\t%d: %s\n", len(st.Steps), state)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tQUEUE\tSTATUS\tATTEMPT\tAFTER\tMESSAGE ID\tNOTE")
	blocked := false
	for i := range st.Steps {
		s := &st.Steps[i]
		attempt := "-"
		if s.Attempt > 0 {
			attempt = strconv.Itoa(s.Attempt)
		}
		blocked = blocked || len(s.BlockedBy) > 0
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(s.Name, false), termSafe(s.Queue, false),
			termSafe(string(s.Status), false), attempt, shortNames(s.After), termSafe(s.MessageID, false), stepNote(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if blocked && !st.Cancelled {
		_, err := fmt.Fprintln(w, "A dead step blocks the steps that wait for it: replay it (fila dead replay -q QUEUE --id MESSAGE-ID) to let the workflow go on.")
		return err
	}
	return nil
}

func newWorkflowCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a workflow: its pending steps are dead-lettered, those in queues cancelled",
		Long: `Cancel workflow ID: no step is released any more. Every pending step is
dead-lettered in its queue with reason "` + fila.ReasonWorkflowCancelled + `". A step already in its
queue is cancelled as fila message cancel does (a waiting one is
dead-lettered instead of run, a running one's handler is told to stop),
where the driver can cancel messages; elsewhere (RabbitMQ) it runs, and is
dead-lettered at its ack instead of completing. Steps done stay done. The
cancel cannot be undone: a step replayed from the dead letters runs, but
releases nothing. Cancelling a cancelled workflow changes nothing; an
unknown id exits 1. It prints what the cancel found.`,
		Example: `  fila workflow cancel order-7`,
		Args:    oneWorkflowArg("cancel"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := fila.ValidateWorkflowID(id); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				// The state before, so the output says what the cancel
				// found (it also tells an unknown id before anything is
				// written).
				before, err := c.WorkflowShow(ctx, id)
				if err != nil {
					return workflowErr(id, err)
				}
				if err := c.WorkflowCancel(ctx, id); err != nil {
					return workflowErr(id, err)
				}
				_, canCancel := c.Driver().(backend.MarkLister)
				_, err = fmt.Fprint(a.stdout, workflowCancelReport(&before, canCancel))
				return err
			})
		},
	}
}

// workflowCancelReport says what a cancel of the workflow found in state
// before; canCancel: the driver cancels the steps in queues (MessageCancel).
func workflowCancelReport(before *fila.WorkflowState, canCancel bool) string {
	id := termSafe(before.ID, false)
	if before.Cancelled {
		return fmt.Sprintf("workflow %s was cancelled already; nothing changed\n", id)
	}
	pending, done, dead := before.Count(fila.StepPending), before.Count(fila.StepDone), before.Count(fila.StepDead)
	queued := len(before.Steps) - pending - done - dead
	out := fmt.Sprintf("cancelled workflow %s: %d pending step(s) dead-lettered with reason %q", id, pending, fila.ReasonWorkflowCancelled)
	if queued > 0 {
		if canCancel {
			out += fmt.Sprintf("; %d step(s) in their queues cancelled (a waiting one is dead-lettered instead of run, a running one's handler told to stop)", queued)
		} else {
			out += fmt.Sprintf("; %d step(s) in their queues will run, and be dead-lettered at their ack (the broker cannot cancel messages)", queued)
		}
	}
	return out + fmt.Sprintf("; %d done and %d dead before left as they were\n", done, dead)
}

func newWorkflowDeleteCmd(a *app) *cobra.Command {
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a workflow's bookkeeping, after a confirmation prompt",
		Long: `Delete workflow ID's bookkeeping: its definition, its steps' results and
its progress. Its steps already in queues (or dead-lettered) stay there and
run as plain messages: their acks release nothing, and its pending steps
never run. Without --force a workflow that is neither finished (every step
done or dead) nor cancelled is refused (exit 1): cancel it first with fila
workflow cancel ID. The command asks for confirmation on standard input;
--yes skips the question (for scripts). An unknown id prints "nothing to
delete" with a warning (exit 0). Drivers that cannot delete queues exit 4.`,
		Example: `  fila workflow delete order-7
  fila workflow delete order-7 --force --yes`,
		Args: oneWorkflowArg("delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := fila.ValidateWorkflowID(id); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				st, err := c.WorkflowShow(ctx, id)
				if errors.Is(err, fila.ErrWorkflowNotFound) {
					a.warnf("no workflow %s (never started, deleted already, or mistyped; fila workflow list shows the ids)", id)
					_, err := fmt.Fprintf(a.stdout, "nothing to delete: no workflow %s\n", id)
					return err
				}
				if err != nil {
					return err
				}
				open := len(st.Steps) - st.Count(fila.StepDone) - st.Count(fila.StepDead)
				if open > 0 && !st.Cancelled && !force {
					return &exitErr{code: exitError, err: fmt.Errorf("workflow %s is not finished (%s); nothing deleted (cancel it first with 'fila workflow cancel %s', or add --force to delete it anyway: its pending steps would never run)",
						id, statusCounts(&st), id)}
				}
				if !yes {
					ok, err := a.confirm(ctx, fmt.Sprintf("Delete workflow %s (%d steps: %s) for good?", id, len(st.Steps), statusCounts(&st)))
					if err != nil {
						return err
					}
					if !ok {
						return &exitErr{code: exitError, err: fmt.Errorf("aborted; nothing deleted (answer y to delete, or pass --yes)")}
					}
				}
				if err := c.WorkflowDelete(ctx, id); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "deleted workflow %s\n", id)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete the workflow even when steps are not finished and it is not cancelled")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
