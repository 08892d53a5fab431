package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

// defaultWatch is the refresh interval of a bare --watch.
const defaultWatch = 2 * time.Second

type statsFlags struct {
	json  bool
	all   bool
	watch time.Duration
}

func newStatsCmd(a *app) *cobra.Command {
	var f statsFlags
	cmd := &cobra.Command{
		Use:   "stats (QUEUE... | --all)",
		Short: "Show ready, delayed, leased and dead counts and the oldest ready age of queues",
		Long: `Show each queue's ready, delayed, leased and dead message counts and the age of
its oldest ready message (how long the head of the queue has waited: the first
number to watch). Counts are exact on a quiescent queue. "-" means none
(nothing ready, no dead letters); "n/a" means the broker cannot tell, never
0, and is null in the JSON. RabbitMQ has no oldest-ready time nor dead counts
per kind, and counts delayed and leased messages only for the process that
made them, which fila is not: they show n/a ("≥N", and "lower_bounds" in
the JSON, where the process knows of some), as in fila ui. Paused queues
(fila queue pause) are named on a line below the table, and in the JSON as
"paused": true ("paused" is null when the driver cannot pause queues).

A queue named on the command line that holds nothing gets a warning on
standard error when the broker lists no such queue (a misspelt name reads
as an empty queue), or cannot list its queues (RabbitMQ without fila_management_url).

--watch refreshes every 2s (or --watch=10s); on a terminal the table is
redrawn in place, otherwise each refresh is printed after the last (one JSON
document per line with --json). Stop with Ctrl-C.

--all shows every queue the broker holds (fila queue list), read again at each
refresh; RabbitMQ lists its queues only through its management API
(fila_management_url in its URL): otherwise name them.`,
		Example: `  fila stats emails reports
  fila stats --all
  fila stats --json emails
  fila stats --watch=5s emails`,
		Args: func(cmd *cobra.Command, args []string) error {
			all, _ := cmd.Flags().GetBool("all")
			switch {
			case all && len(args) > 0:
				return usagef("--all cannot be combined with queue names")
			case !all && len(args) == 0:
				return usagef("name at least one queue (fila stats QUEUE...), or use --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, queues []string) error {
			for _, q := range queues {
				if err := fila.ValidateQueueName(q); err != nil {
					return err
				}
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				if f.watch > 0 {
					return a.watchStats(ctx, c, queues, f)
				}
				rows, err := collectStats(ctx, c, queues, f.all)
				if err != nil {
					return err
				}
				if !f.all {
					a.warnEmpty(ctx, c, rows)
				}
				return writeStats(a.stdout, rows, f.json, time.Now())
			})
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON instead of a table")
	cmd.Flags().BoolVar(&f.all, "all", false, "every queue the broker holds (not on RabbitMQ)")
	cmd.Flags().DurationVar(&f.watch, "watch", 0, "refresh every interval until interrupted (bare --watch: 2s)")
	cmd.Flags().Lookup("watch").NoOptDefVal = defaultWatch.String()
	return cmd
}

// statsRow is one queue's stats as printed.
type statsRow struct {
	Queue string `json:"queue"`
	Ready int64  `json:"ready"`
	// Delayed and Leased are nil when the broker cannot tell (see
	// partialCounts).
	Delayed *int64 `json:"delayed"`
	Leased  *int64 `json:"leased"`
	Dead    int64  `json:"dead"`
	// LowerBounds names the counts that are only lower bounds: those the
	// driver knows of from its own process (see partialCounts).
	LowerBounds []string `json:"lower_bounds,omitempty"`
	// OldestReadyAt is when the oldest ready message became ready; nil when
	// none is ready or the driver does not tell.
	OldestReadyAt *time.Time `json:"oldest_ready_at"`
	// OldestReadyAgeSeconds is the age of the oldest ready message at the
	// time the stats were read: 0 when none is ready, null when the driver
	// does not tell.
	OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
	// DeadByKind counts dead letters per kind; null when the driver does not
	// tell.
	DeadByKind map[string]int64 `json:"dead_by_kind"`
	// Paused tells whether the queue is paused; null when the driver cannot
	// pause queues.
	Paused *bool `json:"paused"`
	age    time.Duration
}

// collectStats reads the stats of queues, or with all of every queue
// QueueList names.
func collectStats(ctx context.Context, c *fila.Client, queues []string, all bool) ([]statsRow, error) {
	if all {
		var err error
		if queues, err = c.QueueList(ctx); err != nil {
			return nil, listHint(err)
		}
	}
	rows := make([]statsRow, 0, len(queues))
	canPause := true
	_, partial := partialCounts[c.DriverName()]
	for _, q := range queues {
		s, err := c.QueueStats(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("stats of queue %q: %w", q, err)
		}
		now := time.Now()
		r := statsRow{Queue: q, Ready: s.Ready, Delayed: &s.Delayed, Leased: &s.Leased, Dead: s.Dead, DeadByKind: s.DeadByKind}
		if partial {
			// The same rule as the dashboard's (package ui): a count the
			// process knows none of is unknown, not 0; one it knows of
			// some is a lower bound.
			if s.Delayed == 0 {
				r.Delayed = nil
			} else {
				r.LowerBounds = append(r.LowerBounds, "delayed")
			}
			if s.Leased == 0 {
				r.Leased = nil
			} else {
				r.LowerBounds = append(r.LowerBounds, "leased")
			}
		}
		switch {
		case !s.OldestReadyAt.IsZero():
			t := s.OldestReadyAt.UTC()
			r.OldestReadyAt = &t
			r.age = s.OldestReadyAge(now)
			secs := r.age.Seconds()
			r.OldestReadyAgeSeconds = &secs
		case s.Ready == 0:
			r.OldestReadyAgeSeconds = new(float64)
		}
		if canPause {
			p, err := c.QueuePaused(ctx, q)
			switch {
			case errors.Is(err, fila.ErrUnsupported):
				canPause = false // the same for every queue: ask no more
			case err != nil:
				return nil, fmt.Errorf("paused state of queue %q: %w", q, err)
			default:
				r.Paused = &p
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func writeStats(w io.Writer, rows []statsRow, asJSON bool, at time.Time) error {
	if asJSON {
		return writeJSONLine(w, struct {
			At     time.Time  `json:"at"`
			Queues []statsRow `json:"queues"`
		}{at.UTC(), rows})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tREADY\tDELAYED\tLEASED\tDEAD\tOLDEST READY\tDEAD BY KIND\t")
	for _, r := range rows {
		age := "-" // nothing ready
		switch {
		case r.OldestReadyAt != nil:
			age = formatAge(r.age)
		case r.OldestReadyAgeSeconds == nil:
			age = notReported
		}
		kinds := formatKinds(r.DeadByKind)
		if r.DeadByKind == nil && r.Dead > 0 {
			kinds = notReported
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t\n", r.Queue, r.Ready,
			formatCount(r.Delayed, r.lowerBound("delayed")), formatCount(r.Leased, r.lowerBound("leased")), r.Dead, age, kinds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Paused queues are rare: a line when there are some, rather than a
	// column that is almost always "no".
	var paused []string
	for _, r := range rows {
		if r.Paused != nil && *r.Paused {
			paused = append(paused, r.Queue)
		}
	}
	if len(paused) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "paused (nothing is received until fila queue resume): %s\n", strings.Join(paused, ", "))
	return err
}

// listHint adds to a driver's lack of queue listing what to do instead.
func listHint(err error) error {
	if errors.Is(err, fila.ErrUnsupported) {
		return fmt.Errorf("%w\nName the queues instead: fila stats QUEUE... (fila ui --queue QUEUE for the dashboard).", err)
	}
	return err
}

// notReported fills a column the driver does not report.
const notReported = "n/a"

// partialCounts names the drivers whose delayed and leased counts hold only
// what the client's own process handled (see package rabbitmq's
// QueueStats), as package ui's dashboard does: fila's own process handled
// none, so they are unknown.
var partialCounts = map[string]struct{}{"rabbitmq": {}}

// lowerBound tells whether the count named field is a lower bound.
func (r *statsRow) lowerBound(field string) bool {
	return slices.Contains(r.LowerBounds, field)
}

// formatCount prints a count that may be unknown (nil) or a lower bound.
func formatCount(n *int64, lowerBound bool) string {
	switch {
	case n == nil:
		return notReported
	case lowerBound:
		return fmt.Sprintf("≥%d", *n)
	default:
		return fmt.Sprint(*n)
	}
}

// holdsNothing tells whether a row counts no message and no dead letter
// (unknown counts aside).
func (r *statsRow) holdsNothing() bool {
	zero := func(n *int64) bool { return n == nil || *n == 0 }
	return r.Ready == 0 && r.Dead == 0 && zero(r.Delayed) && zero(r.Leased)
}

// queueKnown tells whether the broker lists queue: known is false when it
// does not, and listable false when the driver cannot list queues (then
// known means nothing). A failure to list counts as not listable.
func queueKnown(ctx context.Context, c *fila.Client, queue string) (known, listable bool) {
	qs, err := c.QueueList(ctx)
	if err != nil {
		return false, false
	}
	return slices.Contains(qs, queue), true
}

// warnEmpty warns, on standard error, of each queue of rows that holds
// nothing and that the broker does not list (or cannot list): a misspelt
// queue name looks like an empty queue.
func (a *app) warnEmpty(ctx context.Context, c *fila.Client, rows []statsRow) {
	var listed []string
	listable, read := false, false
	for _, r := range rows {
		if !r.holdsNothing() {
			continue
		}
		if !read {
			qs, err := c.QueueList(ctx)
			listed, listable, read = qs, err == nil, true
		}
		if msg := unknownQueueWarning(c.DriverName(), r.Queue, listable && slices.Contains(listed, r.Queue), listable); msg != "" {
			a.warnf("%s", msg)
		}
	}
}

// unknownQueueWarning is the warning about an empty queue the broker does
// not list (or cannot list), or "" when it lists it.
func unknownQueueWarning(driver, queue string, known, listable bool) string {
	switch {
	case !listable:
		return fmt.Sprintf("queue %q holds no ready message nor dead letter, and the %s driver cannot tell whether the queue exists: check the name", queue, driver)
	case !known:
		return fmt.Sprintf("queue %q holds nothing and the broker has no such queue (fila queue list does not name it): check the name", queue)
	}
	return ""
}

// formatAge prints an age with a precision that fits its size.
func formatAge(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// formatKinds prints dead counts per kind, largest first.
func formatKinds(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if m[kinds[i]] != m[kinds[j]] {
			return m[kinds[i]] > m[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// watchStats prints the stats every f.watch until ctx ends. On a terminal
// (and without --json) each refresh redraws the previous one in place;
// otherwise refreshes are appended. A failed refresh is shown and the watch
// goes on.
func (a *app) watchStats(ctx context.Context, c *fila.Client, queues []string, f statsFlags) error {
	inPlace := !f.json && a.isTerminal(a.stdout)
	prevLines := 0
	warned := f.all // --all names only the queues the broker lists
	t := time.NewTicker(f.watch)
	defer t.Stop()
	for {
		var buf bytes.Buffer
		now := time.Now()
		rows, err := collectStats(ctx, c, queues, f.all)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil && !warned {
			warned = true // once, before the first frame
			a.warnEmpty(ctx, c, rows)
		}
		switch {
		case err != nil && f.json:
			_ = writeJSONLine(&buf, map[string]any{"at": now.UTC(), "error": err.Error()})
		case err != nil:
			fmt.Fprintf(&buf, "%s  error: %v\n", now.Format(time.TimeOnly), err)
		case f.json:
			_ = writeStats(&buf, rows, true, now)
		default:
			fmt.Fprintf(&buf, "%s  every %v (Ctrl-C to stop)\n", now.Format(time.TimeOnly), f.watch)
			_ = writeStats(&buf, rows, false, now)
		}
		if inPlace {
			prevLines = redraw(a.stdout, prevLines, buf.String())
		} else {
			if prevLines > 0 && !f.json {
				fmt.Fprintln(a.stdout)
			}
			_, _ = io.Copy(a.stdout, &buf)
			prevLines++
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ANSI control sequences used to redraw in place.
const (
	ansiClearLine  = "\x1b[2K"
	ansiClearBelow = "\x1b[J"
)

// redraw moves the cursor up over the prevLines lines printed last, writes
// frame over them line by line (clearing each) and clears what is left
// below. It returns the number of lines of frame.
func redraw(w io.Writer, prevLines int, frame string) int {
	var b strings.Builder
	if prevLines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", prevLines)
	}
	lines := strings.Split(strings.TrimSuffix(frame, "\n"), "\n")
	for _, l := range lines {
		b.WriteString(ansiClearLine)
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(ansiClearBelow)
	_, _ = io.WriteString(w, b.String())
	return len(lines)
}
