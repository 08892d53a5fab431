package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

func newQueueWorkersCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers QUEUE",
		Short: "List the worker processes serving a queue, and its schedules",
		Long: `List the workers (package worker) running on the queue, from the presence
records they keep in the broker: host, process id, the queue's concurrency,
the slots the worker's queues share, and when it started. A worker renews
its record every 10s (worker.Config.Presence) and deletes it when it stops;
one that died drops out of the list within 30s. Below them come the
periodic jobs (worker.Config.Periodic) that enqueue into the queue, with
their last and next tick. RabbitMQ cannot list the records: there the
command exits 4.`,
		Example: `  fila queue workers emails
  fila queue workers emails --json`,
		Args: oneQueueArg("workers"),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := fila.ValidateQueueName(q); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				ps, err := worker.PresenceList(ctx, c, q)
				if err != nil {
					return err
				}
				scheds, err := worker.ScheduleList(ctx, c, q)
				if err != nil {
					return err
				}
				if asJSON {
					type row struct {
						ID          string    `json:"id"`
						Host        string    `json:"host"`
						PID         int       `json:"pid"`
						Concurrency int       `json:"concurrency"`
						Shared      int       `json:"shared,omitempty"`
						Started     time.Time `json:"started"`
					}
					rows := make([]row, len(ps))
					for i, p := range ps {
						rows[i] = row{p.ID, p.Host, p.PID, p.Concurrency, p.Shared, p.Started.UTC()}
					}
					type sched struct {
						Name     string     `json:"name"`
						Cron     string     `json:"cron,omitempty"`
						Location string     `json:"location,omitempty"`
						EveryMS  int64      `json:"every_ms,omitempty"`
						Kind     string     `json:"kind"`
						Last     *time.Time `json:"last"`
						Next     *time.Time `json:"next"`
					}
					at := func(t time.Time) *time.Time {
						if t.IsZero() {
							return nil
						}
						t = t.UTC()
						return &t
					}
					ss := make([]sched, len(scheds))
					for i, sc := range scheds {
						ss[i] = sched{sc.Name, sc.Cron, sc.Location, sc.Every.Milliseconds(), sc.Kind, at(sc.Last), at(sc.Next)}
					}
					return writeJSONLine(a.stdout, struct {
						Queue     string  `json:"queue"`
						Workers   []row   `json:"workers"`
						Schedules []sched `json:"schedules"`
					}{q, rows, ss})
				}
				if len(ps) == 0 {
					if _, err := fmt.Fprintf(a.stdout, "no worker is running on queue %q\n", q); err != nil {
						return err
					}
				} else {
					tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tHOST\tPID\tCONCURRENCY\tSHARED\tSTARTED")
					for _, p := range ps {
						shared := "-"
						if p.Shared > 0 {
							shared = fmt.Sprint(p.Shared)
						}
						fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", p.ID, p.Host, p.PID, p.Concurrency, shared, formatTime(p.Started))
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				if len(scheds) == 0 {
					return nil
				}
				if len(ps) > 0 {
					if _, err := fmt.Fprintln(a.stdout); err != nil {
						return err
					}
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "SCHEDULE\tWHEN\tKIND\tLAST TICK\tNEXT TICK")
				for _, sc := range scheds {
					when := "every " + sc.Every.String()
					if sc.Cron != "" {
						when = sc.Cron + " (" + sc.Location + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", sc.Name, when, sc.Kind, formatTime(sc.Last), formatTime(sc.Next))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}
