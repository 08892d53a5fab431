package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fila-go/fila"
)

// The actions. Each is a GET confirmation page (no side effect) whose form
// POSTs to /queues/{queue}/{op} with the CSRF token.
const (
	opReplay = "replay"
	opPurge  = "purge"
	opDelete = "delete"
	opPause  = "pause"
	opResume = "resume"
	// opCancel cancels messages by id (not dead letters).
	opCancel = "cancel"
)

// knownOp reports whether op is one of the actions.
func knownOp(op string) bool {
	switch op {
	case opReplay, opPurge, opDelete, opPause, opResume, opCancel, opLimits:
		return true
	}
	return false
}

const (
	// maxFormBytes bounds an action's form.
	maxFormBytes = 64 << 10
	// maxIDs bounds the ids one action selects.
	maxIDs = fila.MaxReceive
	// actionTimeout bounds one action's broker calls. The action does not
	// stop when the browser goes away: half a replay helps nobody.
	actionTimeout = 2 * time.Minute
)

// errReadOnly refuses actions in read-only mode.
var errReadOnly = &httpError{status: http.StatusForbidden, msg: "this dashboard is read-only: actions are disabled"}

// selection is what a replay, purge or cancel applies to.
type selection struct {
	IDs  []string
	Kind string
	All  bool
}

// parseSelection reads the id, kind and all parameters. Replay and purge
// need one of them: nothing selected is refused, never read as "all".
// Cancel takes ids only (a field may hold several, separated by spaces,
// as pasted); delete, pause, resume and limits none (limits reads its own
// fields: parseLimits).
func parseSelection(op string, v url.Values) (selection, error) {
	s := selection{IDs: v["id"], Kind: v.Get("kind"), All: v.Get("all") == "1"}
	bad := func(msg string) (selection, error) {
		return selection{}, &httpError{status: http.StatusBadRequest, msg: msg}
	}
	switch op {
	case opDelete, opPause, opResume, opLimits:
		return selection{}, nil
	case opCancel:
		var ids []string
		for _, f := range s.IDs {
			ids = append(ids, strings.Fields(f)...)
		}
		switch {
		case s.All || s.Kind != "":
			return bad("cancel takes message ids only, not a kind or all")
		case len(ids) == 0:
			return bad("say which message to cancel: its id")
		case len(ids) > maxIDs:
			return bad(fmt.Sprintf("at most %d ids at once", maxIDs))
		}
		return selection{IDs: ids}, nil
	}
	switch {
	case len(s.IDs) > maxIDs:
		return bad(fmt.Sprintf("at most %d ids at once", maxIDs))
	case s.All && (len(s.IDs) > 0 || s.Kind != ""):
		return bad("all cannot be combined with an id or a kind")
	case !s.All && len(s.IDs) == 0 && s.Kind == "":
		return bad("say what to " + op + ": an id, a kind, or all")
	}
	for _, id := range s.IDs {
		if id == "" {
			return bad("an id is empty")
		}
	}
	return s, nil
}

func (s selection) filter() fila.DeadFilter {
	f := fila.DeadFilter{Kind: s.Kind}
	if len(s.IDs) > 0 {
		f.IDs = s.IDs
	}
	return f
}

// describe names the selection of op in a sentence.
func (s selection) describe(op string) string {
	if op == opCancel {
		if len(s.IDs) == 1 {
			return "message " + s.IDs[0]
		}
		return fmt.Sprintf("%d messages by id", len(s.IDs))
	}
	switch {
	case s.All:
		return "all dead letters"
	case len(s.IDs) == 1 && s.Kind == "":
		return "dead letter " + s.IDs[0]
	case len(s.IDs) > 0 && s.Kind != "":
		return fmt.Sprintf("%d dead letter(s) by id, of kind %q", len(s.IDs), s.Kind)
	case len(s.IDs) > 0:
		return fmt.Sprintf("%d dead letter(s) by id", len(s.IDs))
	default:
		return fmt.Sprintf("the dead letters of kind %q", s.Kind)
	}
}

// confirmView is the confirmation page of an action.
type confirmView struct {
	Question   string
	Detail     string
	Action     string
	Sel        selection
	ForceBox   bool
	ForceLabel string
	Button     string
	Danger     bool
	CancelURL  string
	// CancelText labels the link back; "Cancel" when empty.
	CancelText string
	// Fields are more hidden fields of the form (the limits).
	Fields []formField
}

// confirm shows what an action would do and the form that does it.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
	q, err := pathQueue(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.o.ReadOnly {
		h.fail(w, r, errReadOnly)
		return
	}
	op := r.URL.Query().Get("op")
	if !knownOp(op) {
		h.fail(w, r, &httpError{status: http.StatusBadRequest, msg: "unknown action"})
		return
	}
	sel, err := parseSelection(op, r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	st, stErr := h.c.QueueStats(ctx, q)
	v := confirmView{Action: h.prefix + "/queues/" + q + "/" + op, Sel: sel, CancelURL: h.queueURL(q)}
	if len(sel.IDs) == 1 && op != opCancel {
		v.CancelURL = h.letterURL(q, sel.IDs[0])
	}
	now := ""
	if stErr == nil {
		switch {
		case sel.All:
			now = fmt.Sprintf(" (%s now)", fmtCount(st.Dead))
		case len(sel.IDs) == 0 && st.DeadByKind != nil:
			now = fmt.Sprintf(" (%s now)", fmtCount(st.DeadByKind[sel.Kind]))
		}
	}
	switch op {
	case opReplay:
		v.Question = fmt.Sprintf("Replay %s%s of queue %s?", sel.describe(op), now, q)
		v.Detail = "They go back to ready with their attempts reset (dedup keys are dropped), and workers will run them again."
		v.Button = "Replay"
	case opPurge:
		v.Question = fmt.Sprintf("Purge %s%s of queue %s?", sel.describe(op), now, q)
		v.Detail = "They are deleted for good; this cannot be undone."
		v.Button, v.Danger = "Purge for good", true
	case opDelete:
		v.Question = fmt.Sprintf("Delete queue %s?", q)
		v.Detail = "Its messages, dead letters, dedup keys and the broker's structures for it are deleted; workers holding its messages get a lost lease when they settle them."
		v.Button, v.Danger = "Delete queue", true
		switch {
		case stErr != nil:
			v.ForceBox, v.ForceLabel = true, "Delete it even if it holds messages or dead letters"
		case st.Ready+st.Delayed+st.Leased+st.Dead > 0:
			v.ForceBox = true
			v.ForceLabel = fmt.Sprintf("Also delete the %s message(s) and %s dead letter(s) it holds",
				fmtCount(st.Ready+st.Delayed+st.Leased), fmtCount(st.Dead))
		}
	case opPause:
		v.Question = fmt.Sprintf("Pause queue %s?", q)
		v.Detail = "Within a few seconds no worker of any process receives its messages, until it is resumed. " +
			"Enqueueing goes on (messages wait as ready), and jobs already running finish."
		v.Button = "Pause queue"
	case opResume:
		v.Question = fmt.Sprintf("Resume queue %s?", q)
		v.Detail = "Workers receive its messages again within a second or so."
		v.Button = "Resume queue"
	case opCancel:
		v.Question = fmt.Sprintf("Cancel %s of queue %s?", sel.describe(op), q)
		v.Detail = "A message that is waiting is not run: the worker that next claims it dead-letters it with reason \"" +
			fila.ReasonCancelled + "\". A running one's handler sees its context cancelled, and a retry dead-letters it. " +
			"Replay it from the dead letters to run it after all. An unknown id is not an error."
		v.Button, v.Danger, v.CancelText = "Cancel "+plural(len(sel.IDs), "the message", "the messages"), true, "Keep"
	case opLimits:
		if err := h.confirmLimits(ctx, q, r.URL.Query(), &v); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	p := &page{Title: "Confirm", CSRF: h.csrfToken(w, r), P: v,
		Crumbs: []crumb{{"Queues", h.prefix + "/"}, {q, h.queueURL(q)}, {Text: "Confirm"}}}
	h.render(w, r, http.StatusOK, "confirm", p)
}

// action returns the POST handler of op: read-only mode, the form's size,
// CSRF and the selection are checked before the broker is called.
func (h *Handler) action(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := pathQueue(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if h.o.ReadOnly {
			h.fail(w, r, errReadOnly)
			return
		}
		if !h.readForm(w, r) {
			return
		}
		sel, err := parseSelection(op, r.PostForm)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), actionTimeout)
		defer cancel()
		attrs := []any{"queue", q, "remote", r.RemoteAddr}
		if user, _, ok := r.BasicAuth(); ok && h.o.Password != "" {
			attrs = append(attrs, "user", user)
		}
		switch op {
		case opReplay, opPurge:
			var n int
			if op == opReplay {
				n, err = h.c.DeadReplay(ctx, q, sel.filter())
			} else {
				n, err = h.c.DeadPurge(ctx, q, sel.filter())
			}
			if err != nil {
				h.fail(w, r, fmt.Errorf("%s %s of queue %s: %w", op, sel.describe(op), q, err))
				return
			}
			h.log.Info("fila ui: "+op+" dead letters", append(attrs, "selection", sel.describe(op), "count", n)...)
			http.Redirect(w, r, h.queueURL(q)+"?"+url.Values{"done": {op}, "n": {fmt.Sprint(n)}}.Encode(), http.StatusSeeOther)
		case opDelete:
			force := r.PostForm.Get("force") == "1"
			err := h.c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: force})
			if errors.Is(err, fila.ErrQueueNotEmpty) {
				err = &httpError{status: http.StatusConflict, msg: err.Error() + "; nothing deleted (tick the box to delete it with everything it holds)"}
			}
			if err != nil {
				h.fail(w, r, fmt.Errorf("deleting queue %s: %w", q, err))
				return
			}
			h.log.Info("fila ui: deleted queue", append(attrs, "force", force)...)
			http.Redirect(w, r, h.prefix+"/?"+url.Values{"done": {"delete"}, "queue": {q}}.Encode(), http.StatusSeeOther)
		case opPause, opResume:
			if op == opPause {
				err = h.c.QueuePause(ctx, q)
			} else {
				err = h.c.QueueResume(ctx, q)
			}
			if err != nil {
				h.fail(w, r, fmt.Errorf("%s queue %s: %w", map[string]string{opPause: "pausing", opResume: "resuming"}[op], q, err))
				return
			}
			h.log.Info("fila ui: "+map[string]string{opPause: "paused", opResume: "resumed"}[op]+" queue", attrs...)
			http.Redirect(w, r, h.queueURL(q)+"?"+url.Values{"done": {op}}.Encode(), http.StatusSeeOther)
		case opCancel:
			// What the queue holds of those ids, read before the cancel,
			// so the page can say what it found (where the driver can
			// list messages).
			found := url.Values{}
			if h.canList {
				if waiting, running, err := h.pendingStates(ctx, q, sel.IDs); err != nil {
					h.log.Warn("fila ui: looking up the messages to cancel failed", append(attrs, "error", err)...)
				} else {
					found.Set("w", fmt.Sprint(waiting))
					found.Set("r", fmt.Sprint(running))
				}
			}
			for i, id := range sel.IDs {
				if err := h.c.MessageCancel(ctx, q, id); err != nil {
					if i > 0 {
						h.log.Info("fila ui: cancelled messages", append(attrs, "ids", sel.IDs[:i], "count", i)...)
						err = fmt.Errorf("cancelled %d of %d messages, then %s: %w", i, len(sel.IDs), id, err)
					}
					h.fail(w, r, fmt.Errorf("cancelling %s of queue %s: %w", sel.describe(op), q, err))
					return
				}
			}
			h.log.Info("fila ui: cancelled messages", append(attrs, "ids", sel.IDs, "count", len(sel.IDs))...)
			found.Set("done", op)
			found.Set("n", fmt.Sprint(len(sel.IDs)))
			http.Redirect(w, r, h.queueURL(q)+"?"+found.Encode(), http.StatusSeeOther)
		case opLimits:
			h.setLimits(ctx, w, r, q, attrs)
		}
	}
}

// pendingStates counts the messages of ids that queue holds waiting (ready
// or delayed) and running (leased).
func (h *Handler) pendingStates(ctx context.Context, queue string, ids []string) (waiting, running int, err error) {
	page, err := h.c.MessageList(ctx, queue, fila.MessageListParams{IDs: ids, Limit: len(ids), WithoutBodies: true})
	if err != nil {
		return 0, 0, err
	}
	for _, m := range page.Messages {
		if m.State == fila.StateLeased {
			running++
		} else {
			waiting++
		}
	}
	return waiting, running, nil
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
