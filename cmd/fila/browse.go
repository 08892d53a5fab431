package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

// states are the states fila message list lists.
var states = []fila.MessageState{fila.StateReady, fila.StateDelayed, fila.StateLeased}

func newMessageListCmd(a *app, queue *string) *cobra.Command {
	var (
		state  string
		limit  int
		cursor string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a queue's ready, delayed or leased (running) messages, a page at a time",
		Long: `List a queue's messages in one state, a page of --limit at a time, in the
driver's order (ready messages, where the broker can, in the order workers
receive them: highest level first). --state is ready (waiting to be
received), delayed (waiting for their run-at or a retry's backoff) or leased
(running in a worker: the DUE column is the lease deadline, ATTEMPTS counts
the running attempt). Bodies are not read: fila message show prints one.

When there are more, the last line says "more: --cursor C" (and the JSON has
"next"): run the same command with --cursor C for the next page. A cursor
belongs to its queue and --state: used with another one it is refused (exit
2); --limit may change. Listing claims nothing and changes nothing; a
message that changes state between pages may be listed twice or not at
all. Control characters in kinds and errors print escaped (\x1b). Drivers
that cannot list messages (RabbitMQ: a queue's messages are read only by
consuming them) exit 4.`,
		Example: `  fila message list -q emails --state ready
  fila message list -q emails --state leased --json
  fila message list -q emails --state delayed --limit 20 --cursor <cursor printed by the previous page>`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st := fila.MessageState(state)
			if !slices.Contains(states, st) {
				return usagef("--state %q is not ready, delayed or leased", state)
			}
			if limit < 1 || limit > fila.MaxReceive {
				return usagef("--limit %d must be between 1 and %d", limit, fila.MaxReceive)
			}
			if err := fila.ValidateQueueName(*queue); err != nil {
				return err
			}
			p := fila.MessageListParams{State: st, Limit: limit, WithoutBodies: true}
			if cursor != "" {
				raw, err := unwrapMessageCursor(cursor, *queue, st)
				if err != nil {
					return err
				}
				p.Cursor = raw
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				page, err := c.MessageList(ctx, *queue, p)
				if err != nil {
					return err
				}
				if page.Next != "" {
					page.Next = wrapCursor(page.Next, *queue, messageFilter(st))
				}
				if asJSON {
					out := struct {
						Messages []messageJSON `json:"messages"`
						Next     string        `json:"next,omitempty"`
					}{Messages: make([]messageJSON, 0, len(page.Messages)), Next: page.Next}
					for i := range page.Messages {
						out.Messages = append(out.Messages, toMessageJSON(&page.Messages[i], false))
					}
					return writeJSONLine(a.stdout, out)
				}
				return writeMessageTable(a.stdout, *queue, st, page)
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "state to list: ready, delayed or leased (required)")
	_ = cmd.MarkFlagRequired("state")
	cmd.Flags().IntVar(&limit, "limit", 50, "page size")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from the cursor printed by the previous page")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// messageFilter is what binds a fila message list cursor to its state (with
// the queue, see wrapCursor): never a kind fila dead list filters by, since
// kinds hold no NUL.
func messageFilter(st fila.MessageState) string { return "\x00message " + string(st) }

// unwrapMessageCursor returns the driver's cursor of a cursor fila message
// list printed for queue and state, or a usage error saying what to do.
func unwrapMessageCursor(cursor, queue string, st fila.MessageState) (string, error) {
	tag, raw, ok := strings.Cut(cursor, ".")
	if !ok || len(tag) != tagLen || raw == "" {
		return "", usagef("--cursor is not a cursor fila message list printed (copy the word after \"more: --cursor\", or \"next\" of --json); drop --cursor to start from the first page")
	}
	if tag == filterTag(queue, messageFilter(st)) {
		return raw, nil
	}
	for _, other := range states {
		if other != st && tag == filterTag(queue, messageFilter(other)) {
			return "", usagef("--cursor continues a listing of --state %s, not %s: run it with --state %s, or drop --cursor to start listing %s messages from the first page", other, st, other, st)
		}
	}
	return "", usagef("--cursor continues a listing of another queue than %q: run it with the -q of the listing that printed it, or drop --cursor to start from the first page", queue)
}

// dueColumn names the DUE column of a state.
func dueColumn(st fila.MessageState) string {
	switch st {
	case fila.StateDelayed:
		return "DUE"
	case fila.StateLeased:
		return "LEASE DEADLINE"
	default:
		return "READY SINCE"
	}
}

func writeMessageTable(w io.Writer, queue string, st fila.MessageState, page fila.MessagePage) error {
	if len(page.Messages) == 0 {
		_, err := fmt.Fprintf(w, "no %s messages in queue %q\n", st, queue)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tKIND\tLEVEL\tATTEMPTS\t%s\tENQUEUED\tLAST ERROR\n", dueColumn(st))
	for _, m := range page.Messages {
		lastErr := "-"
		if m.LastError != "" {
			lastErr = termSafe(shortReason(m.LastError), false)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", termSafe(m.ID, false), termSafe(m.Kind, false), m.Priority, m.Attempts,
			formatTime(m.Due), formatTime(m.EnqueuedAt), lastErr)
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

// termSafe returns s with what a terminal would act on escaped the way Go
// quotes it (\x1b, \u009b, \u202e, \xff for a byte that is not UTF-8):
// message content is untrusted, and an escape sequence in a kind, header,
// error or body could otherwise rewrite the screen or the window title.
// Newlines and tabs are kept when lines is true (a body, an error in full),
// escaped otherwise (a table cell).
func termSafe(s string, lines bool) string {
	unsafe := func(r rune) bool {
		return unicode.IsControl(r) && !(lines && (r == '\n' || r == '\t')) || unicode.Is(unicode.Bidi_Control, r) ||
			r == '\u2028' || r == '\u2029' || r == utf8.RuneError
	}
	if strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// messageJSON is a pending message as printed with --json.
type messageJSON struct {
	ID          string    `json:"id"`
	Queue       string    `json:"queue"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Priority    int       `json:"priority"`
	Attempts    int       `json:"attempts"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
	EnqueuedAt  time.Time `json:"enqueued_at"`
	// Due is when a ready message became ready, a delayed one's run-at, a
	// leased one's lease deadline.
	Due       time.Time         `json:"due"`
	LastError string            `json:"last_error,omitempty"`
	Errors    []errorJSON       `json:"errors,omitempty"` // the error history, oldest first, the last error's last
	DedupKey  string            `json:"dedup_key,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// Body is the body as text when it is valid UTF-8; BodyBase64 holds it
	// otherwise.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
}

func toMessageJSON(m *fila.PendingMessage, withBody bool) messageJSON {
	j := messageJSON{ID: m.ID, Queue: m.Queue, Kind: m.Kind, State: string(m.State), Priority: m.Priority, Attempts: m.Attempts,
		MaxAttempts: m.MaxAttempts, EnqueuedAt: m.EnqueuedAt.UTC(), Due: m.Due.UTC(), LastError: m.LastError,
		Errors: toErrorsJSON(m.Errors), DedupKey: m.DedupKey, Headers: m.Headers}
	if withBody {
		if utf8.Valid(m.Body) {
			s := string(m.Body)
			j.Body = &s
		} else {
			j.BodyBase64 = base64.StdEncoding.EncodeToString(m.Body)
		}
	}
	return j
}

func newMessageShowCmd(a *app, queue *string) *cobra.Command {
	var asJSON, raw bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one ready, delayed or running message with its headers and body",
		Long: `Show one message of a queue that is not a dead letter, found by id whatever
its state: ready, delayed, or leased (running in a worker, with its attempt
and lease deadline), its last error and the earlier errors of its history
(attempt, time and first line; "errors" in --json holds them whole, the last
error included). A body that is not UTF-8 text is shown as a hex dump;
control characters in the kind, headers, last error and body print escaped
(\x1b); --raw writes the body bytes alone (for piping into other tools). A
message that is not pending (acked already, dead-lettered: see fila dead
show) exits 1; drivers that cannot list messages exit 4.`,
		Example: `  fila message show -q emails 0190a3c4-...
  fila message show -q emails --json 0190a3c4-...`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("name one message id (fila message show -q QUEUE ID)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && raw {
				return usagef("--json and --raw cannot be combined")
			}
			id := args[0]
			if id == "" || len(id) > 128 || termSafe(id, false) != id {
				return usagef("message id %q must be 1 to 128 printable bytes", id)
			}
			if err := fila.ValidateQueueName(*queue); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				m, err := findMessage(ctx, c, *queue, id)
				if err != nil {
					return err
				}
				switch {
				case raw:
					_, err = a.stdout.Write(m.Body)
					return err
				case asJSON:
					return writeJSONLine(a.stdout, toMessageJSON(m, true))
				default:
					return writeMessage(a.stdout, m)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&raw, "raw", false, "write only the body's bytes")
	return cmd
}

// findMessage reads queue's pending message id alone, whatever its state
// (MessageListParams.IDs).
func findMessage(ctx context.Context, c *fila.Client, queue, id string) (*fila.PendingMessage, error) {
	page, err := c.MessageList(ctx, queue, fila.MessageListParams{IDs: []string{id}, Limit: 1})
	if err != nil {
		return nil, err
	}
	for i := range page.Messages {
		if page.Messages[i].ID == id {
			return &page.Messages[i], nil
		}
	}
	return nil, &exitErr{code: exitError, err: fmt.Errorf("no ready, delayed or leased message %s in queue %q: acked already, dead-lettered (fila dead show -q %s %s), or mistyped", id, queue, queue, id)}
}

func writeMessage(w io.Writer, m *fila.PendingMessage) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", termSafe(m.ID, false))
	fmt.Fprintf(tw, "queue:\t%s\n", m.Queue)
	state := string(m.State)
	if m.State == fila.StateLeased {
		state += " (running)"
	}
	fmt.Fprintf(tw, "state:\t%s\n", state)
	fmt.Fprintf(tw, "kind:\t%s\n", termSafe(m.Kind, false))
	fmt.Fprintf(tw, "level:\t%d\n", m.Priority)
	fmt.Fprintf(tw, "attempts:\t%d\n", m.Attempts)
	if m.MaxAttempts > 0 {
		fmt.Fprintf(tw, "max attempts:\t%d\n", m.MaxAttempts)
	}
	fmt.Fprintf(tw, "enqueued at:\t%s\n", formatTime(m.EnqueuedAt))
	fmt.Fprintf(tw, "%s:\t%s\n", strings.ToLower(dueColumn(m.State)), formatTime(m.Due))
	if m.DedupKey != "" {
		fmt.Fprintf(tw, "dedup key:\t%s\n", termSafe(m.DedupKey, false))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeHeaders(w, m.Headers)
	if m.LastError != "" {
		fmt.Fprintln(w, "last error:")
		for _, line := range strings.Split(termSafe(m.LastError, true), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	if len(m.Errors) > 1 {
		writeEarlierErrors(w, m.Errors[:len(m.Errors)-1]) // the last is the last error
	}
	return writeBody(w, m.Body)
}
