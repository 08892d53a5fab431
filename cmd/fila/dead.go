package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

// maxReasonColumn bounds the reason printed by dead list (its first line).
const maxReasonColumn = 72

func newDeadCmd(a *app) *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "Inspect, replay and purge a queue's dead letters",
		Long: `Inspect, replay and purge the dead letters of a queue: messages that failed
permanently or ran out of attempts, kept with their reason and attempt count.`,
	}
	cmd.PersistentFlags().StringVarP(&queue, "queue", "q", "", "queue whose dead letters to handle (required)")
	_ = cmd.MarkPersistentFlagRequired("queue")
	cmd.AddCommand(newDeadListCmd(a, &queue), newDeadShowCmd(a, &queue),
		newDeadReplayCmd(a, &queue), newDeadPurgeCmd(a, &queue))
	return cmd
}

func newDeadListCmd(a *app, queue *string) *cobra.Command {
	var (
		p      fila.DeadListParams
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first, a page at a time",
		Long: `List a queue's dead letters, oldest first, a page of --limit at a time. When
there are more, the last line says "more: --cursor C" (and the JSON has
"next"): run the same command with --cursor C for the next page. A cursor
belongs to its queue and --kind: used with another one it is refused (exit
2) rather than returning a page of some other listing; --limit may change.`,
		Example: `  fila dead list -q emails
  fila dead list -q emails --kind email.welcome --limit 20
  fila dead list -q emails --cursor <cursor printed by the previous page>`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p.Limit < 1 || p.Limit > fila.MaxReceive {
				return usagef("--limit %d must be between 1 and %d", p.Limit, fila.MaxReceive)
			}
			p := p
			if p.Cursor != "" {
				raw, err := unwrapCursor(p.Cursor, *queue, p.Kind)
				if err != nil {
					return err
				}
				p.Cursor = raw
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				page, err := c.DeadList(ctx, *queue, p)
				if err != nil {
					return err
				}
				if page.Next != "" {
					page.Next = wrapCursor(page.Next, *queue, p.Kind)
				}
				if asJSON {
					out := struct {
						Letters []deadJSON `json:"letters"`
						Next    string     `json:"next,omitempty"`
					}{Letters: make([]deadJSON, 0, len(page.Letters)), Next: page.Next}
					for i := range page.Letters {
						out.Letters = append(out.Letters, toDeadJSON(&page.Letters[i], false))
					}
					return writeJSONLine(a.stdout, out)
				}
				return writeDeadTable(a.stdout, *queue, page)
			})
		},
	}
	cmd.Flags().StringVar(&p.Kind, "kind", "", "only dead letters of this kind")
	cmd.Flags().IntVar(&p.Limit, "limit", 50, "page size")
	cmd.Flags().StringVar(&p.Cursor, "cursor", "", "continue from the cursor printed by the previous page")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// The cursors fila dead list prints are the driver's cursor prefixed with a
// short hash of the listing's queue and kind and a '.', so that a cursor
// used with another filter is refused instead of silently paging through
// another listing (drivers' cursors do not say which filter made them).

// filterTag is the short hash binding a cursor to a queue and kind.
func filterTag(queue, kind string) string {
	h := sha256.Sum256([]byte(queue + "\x00" + kind))
	return hex.EncodeToString(h[:4])
}

const tagLen = 8 // hex digits of filterTag

// wrapCursor binds a driver's cursor to queue and kind.
func wrapCursor(raw, queue, kind string) string {
	return filterTag(queue, kind) + "." + raw
}

// unwrapCursor returns the driver's cursor of a cursor fila dead list
// printed for queue and kind, or a usage error saying what to do.
func unwrapCursor(cursor, queue, kind string) (string, error) {
	tag, raw, ok := strings.Cut(cursor, ".")
	if !ok || len(tag) != tagLen || raw == "" {
		return "", usagef("--cursor is not a cursor fila dead list printed (copy the word after \"more: --cursor\", or \"next\" of --json); drop --cursor to start from the first page")
	}
	if tag == filterTag(queue, kind) {
		return raw, nil
	}
	if kind != "" && tag == filterTag(queue, "") {
		return "", usagef("--cursor continues a listing of every kind, not --kind %q: drop --kind, or drop --cursor to start a listing of kind %q from the first page", kind, kind)
	}
	what := "every kind"
	if kind != "" {
		what = fmt.Sprintf("kind %q", kind)
	}
	return "", usagef("--cursor continues a listing of another queue or --kind than queue %q, %s: run it with the -q and --kind of the listing that printed it, or drop --cursor to start from the first page", queue, what)
}

func writeDeadTable(w io.Writer, queue string, page fila.DeadPage) error {
	if len(page.Letters) == 0 {
		_, err := fmt.Fprintf(w, "no dead letters in queue %q\n", queue)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tATTEMPTS\tENQUEUED\tDEAD AT\tREASON")
	for _, l := range page.Letters {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", l.ID, l.Kind, l.Attempts,
			formatTime(l.EnqueuedAt), formatTime(l.DeadAt), termSafe(shortReason(l.Reason), false))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		_, err := fmt.Fprintf(w, "more: --cursor %s\n", page.Next)
		return err
	}
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// shortReason is a reason's first line, cut to fit a table column.
func shortReason(r string) string {
	line, _, more := strings.Cut(r, "\n")
	if utf8.RuneCountInString(line) > maxReasonColumn {
		rs := []rune(line)
		return string(rs[:maxReasonColumn-1]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}

// deadJSON is a dead letter as printed with --json.
type deadJSON struct {
	ID          string            `json:"id"`
	Queue       string            `json:"queue"`
	Kind        string            `json:"kind"`
	Attempts    int               `json:"attempts"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	Reason      string            `json:"reason"`
	Errors      []errorJSON       `json:"errors,omitempty"` // the errors before Reason, oldest first
	EnqueuedAt  time.Time         `json:"enqueued_at"`
	DeadAt      time.Time         `json:"dead_at"`
	DedupKey    string            `json:"dedup_key,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// Body is the body as text when it is valid UTF-8; BodyBase64 holds it
	// otherwise.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
}

func toDeadJSON(l *fila.DeadLetter, withBody bool) deadJSON {
	j := deadJSON{ID: l.ID, Queue: l.Queue, Kind: l.Kind, Attempts: l.Attempts, MaxAttempts: l.MaxAttempts,
		Reason: l.Reason, Errors: toErrorsJSON(l.Errors), EnqueuedAt: l.EnqueuedAt.UTC(), DeadAt: l.DeadAt.UTC(),
		DedupKey: l.DedupKey, Headers: l.Headers}
	if withBody {
		if utf8.Valid(l.Body) {
			s := string(l.Body)
			j.Body = &s
		} else {
			j.BodyBase64 = base64.StdEncoding.EncodeToString(l.Body)
		}
	}
	return j
}

func newDeadShowCmd(a *app, queue *string) *cobra.Command {
	var asJSON, raw bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead letter with its reason, headers and body",
		Long: `Show one dead letter with its reason, the message's earlier errors (the
reasons of its latest retries: attempt, time and first line; "errors" in
--json holds them whole), headers and body. A body that is not UTF-8 text
is shown as a hex dump, and control characters of the headers, reasons and
body print escaped (\x1b), so a terminal runs none; --raw writes the body
bytes alone (for piping into other tools). The dead letter is looked up by
its id (on RabbitMQ, by reading the dead queue up to it).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("name one dead letter id (fila dead show -q QUEUE ID)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && raw {
				return usagef("--json and --raw cannot be combined")
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				l, err := findDead(ctx, c, *queue, args[0])
				if err != nil {
					return err
				}
				switch {
				case raw:
					_, err = a.stdout.Write(l.Body)
					return err
				case asJSON:
					return writeJSONLine(a.stdout, toDeadJSON(l, true))
				default:
					return writeDeadLetter(a.stdout, l)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&raw, "raw", false, "write only the body's bytes")
	return cmd
}

// findDead reads queue's dead letter id alone (DeadListParams.IDs).
func findDead(ctx context.Context, c *fila.Client, queue, id string) (*fila.DeadLetter, error) {
	page, err := c.DeadList(ctx, queue, fila.DeadListParams{IDs: []string{id}, Limit: 1})
	if err != nil {
		return nil, err
	}
	for i := range page.Letters {
		if page.Letters[i].ID == id {
			return &page.Letters[i], nil
		}
	}
	return nil, &exitErr{code: exitError, err: fmt.Errorf("no dead letter %s in queue %q (fila dead list -q %s shows the ids of its dead letters)", id, queue, queue)}
}

func writeDeadLetter(w io.Writer, l *fila.DeadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", l.ID)
	fmt.Fprintf(tw, "queue:\t%s\n", l.Queue)
	fmt.Fprintf(tw, "kind:\t%s\n", l.Kind)
	fmt.Fprintf(tw, "attempts:\t%d\n", l.Attempts)
	if l.MaxAttempts > 0 {
		fmt.Fprintf(tw, "max attempts:\t%d\n", l.MaxAttempts)
	}
	fmt.Fprintf(tw, "enqueued at:\t%s\n", formatTime(l.EnqueuedAt))
	fmt.Fprintf(tw, "dead at:\t%s\n", formatTime(l.DeadAt))
	if l.DedupKey != "" {
		fmt.Fprintf(tw, "dedup key:\t%s\n", termSafe(l.DedupKey, false))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeHeaders(w, l.Headers)
	fmt.Fprintln(w, "reason:")
	for _, line := range strings.Split(l.Reason, "\n") {
		fmt.Fprintf(w, "  %s\n", termSafe(line, false))
	}
	writeEarlierErrors(w, l.Errors)
	return writeBody(w, l.Body)
}

// writeEarlierErrors prints a message's earlier errors, oldest first, one
// line each: attempt, time and the reason's first line, escaped. Nothing
// when there are none.
func writeEarlierErrors(w io.Writer, errs []fila.AttemptError) {
	if len(errs) == 0 {
		return
	}
	fmt.Fprintln(w, "earlier errors:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range errs {
		attempt := "attempt ?"
		if e.Attempt > 0 {
			attempt = fmt.Sprintf("attempt %d", e.Attempt)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", attempt, formatTime(e.At), termSafe(shortReason(e.Reason), false))
	}
	_ = tw.Flush()
}

// errorJSON is one error of a message's history as printed with --json.
type errorJSON struct {
	// Attempt is 0 and At is left out when unknown.
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at,omitzero"`
	Reason  string    `json:"reason"`
}

func toErrorsJSON(errs []fila.AttemptError) []errorJSON {
	if len(errs) == 0 {
		return nil
	}
	out := make([]errorJSON, len(errs))
	for i, e := range errs {
		out[i] = errorJSON{Attempt: e.Attempt, Reason: e.Reason}
		if !e.At.IsZero() {
			out[i].At = e.At.UTC()
		}
	}
	return out
}

// writeHeaders prints a message's headers sorted by key, their control
// characters escaped; nothing when there are none.
func writeHeaders(w io.Writer, headers map[string]string) {
	if len(headers) == 0 {
		return
	}
	fmt.Fprintln(w, "headers:")
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", termSafe(k, false), termSafe(headers[k], false))
	}
}

// writeBody prints a message's body: UTF-8 text with its control
// characters escaped, anything else as a hex dump.
func writeBody(w io.Writer, b []byte) error {
	if utf8.Valid(b) {
		fmt.Fprintf(w, "body (%d bytes):\n", len(b))
		body := termSafe(string(b), true)
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		_, err := io.WriteString(w, body)
		return err
	}
	fmt.Fprintf(w, "body (%d bytes, not UTF-8; hex dump):\n", len(b))
	_, err := io.WriteString(w, hex.Dump(b))
	return err
}

// selection are the flags that pick the dead letters to replay or purge.
type selection struct {
	ids  []string
	kind string
	all  bool
}

func (s *selection) register(cmd *cobra.Command, verb string) {
	cmd.Flags().StringArrayVar(&s.ids, "id", nil, "dead letter id to "+verb+" (repeatable)")
	cmd.Flags().StringVar(&s.kind, "kind", "", verb+" the dead letters of this kind")
	cmd.Flags().BoolVar(&s.all, "all", false, verb+" every dead letter of the queue")
}

// filter checks the selection and returns its filter and a description.
// Without --id, --kind or --all nothing is selected, which is refused rather
// than read as "all".
func (s *selection) filter(verb string) (fila.DeadFilter, string, error) {
	switch {
	case s.all && (len(s.ids) > 0 || s.kind != ""):
		return fila.DeadFilter{}, "", usagef("--all cannot be combined with --id or --kind")
	case s.all:
		return fila.DeadFilter{}, "all dead letters", nil
	case len(s.ids) == 0 && s.kind == "":
		return fila.DeadFilter{}, "", usagef("say what to %s: --id ID (repeatable), --kind KIND or --all", verb)
	}
	f := fila.DeadFilter{Kind: s.kind}
	var desc []string
	if len(s.ids) > 0 {
		for _, id := range s.ids {
			if id == "" {
				return fila.DeadFilter{}, "", usagef("--id is empty")
			}
		}
		f.IDs = s.ids
		desc = append(desc, fmt.Sprintf("%d dead letter(s) by id", len(s.ids)))
	}
	if s.kind != "" {
		if len(desc) == 0 {
			desc = append(desc, "the dead letters")
		}
		desc = append(desc, fmt.Sprintf("of kind %q", s.kind))
	}
	return f, strings.Join(desc, " "), nil
}

func newDeadReplayCmd(a *app, queue *string) *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Move dead letters back to ready (attempts reset) and print how many moved",
		Example: `  fila dead replay -q emails --id 0190a3c4-...
  fila dead replay -q emails --kind email.welcome
  fila dead replay -q emails --all`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, desc, err := s.filter("replay")
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				n, err := c.DeadReplay(ctx, *queue, f)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "replayed %d dead letter(s) of queue %q (%s)\n", n, *queue, desc)
				return err
			})
		},
	}
	s.register(cmd, "replay")
	return cmd
}

func newDeadPurgeCmd(a *app, queue *string) *cobra.Command {
	var (
		s   selection
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete dead letters for good, after a confirmation prompt",
		Long: `Delete the selected dead letters for good. The command asks for confirmation
on standard input; --yes skips the question (for scripts).`,
		Example: `  fila dead purge -q emails --kind email.welcome
  fila dead purge -q emails --all --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, desc, err := s.filter("purge")
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				if !yes {
					ok, err := a.confirm(ctx, fmt.Sprintf("Delete %s%s of queue %q for good?", desc, countHint(ctx, c, *queue, f), *queue))
					if err != nil {
						return err
					}
					if !ok {
						return &exitErr{code: exitError, err: fmt.Errorf("aborted; nothing purged (answer y to purge, or pass --yes)")}
					}
				}
				n, err := c.DeadPurge(ctx, *queue, f)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "purged %d dead letter(s) of queue %q (%s)\n", n, *queue, desc)
				return err
			})
		},
	}
	s.register(cmd, "purge")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// countHint tells how many dead letters a kind or --all selection holds,
// from the queue's stats, when the driver can count them.
func countHint(ctx context.Context, c *fila.Client, queue string, f fila.DeadFilter) string {
	if len(f.IDs) > 0 {
		return ""
	}
	st, err := c.QueueStats(ctx, queue)
	if err != nil {
		return ""
	}
	if f.Kind == "" {
		return fmt.Sprintf(" (%d now)", st.Dead)
	}
	if st.DeadByKind == nil {
		return ""
	}
	return fmt.Sprintf(" (%d now)", st.DeadByKind[f.Kind])
}

// confirm asks question on stderr and reads a y/N answer from stdin; only
// "y" or "yes" confirm. End of input is a no. An interrupt (ctx ending)
// while waiting returns ctx.Err().
func (a *app) confirm(ctx context.Context, question string) (bool, error) {
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		ch <- answer{line, err}
	}()
	var ans answer
	select {
	case <-ctx.Done():
		fmt.Fprintln(a.stderr)
		return false, ctx.Err()
	case ans = <-ch:
	}
	if ans.err != nil && ans.err != io.EOF {
		return false, ans.err
	}
	if ans.err == io.EOF && ans.line == "" {
		fmt.Fprintln(a.stderr)
	}
	switch strings.ToLower(strings.TrimSpace(ans.line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// noArgs refuses positional arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
