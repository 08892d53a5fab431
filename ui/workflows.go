package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fila-go/fila"
)

// The workflows (fila.Client.WorkflowStart): a page listing their ids
// (fila.Client.WorkflowList), a page per workflow with the state of each
// step (fila.Client.WorkflowShow), and one action, cancel
// (fila.Client.WorkflowCancel), behind a confirmation page like every
// other action's. Step names are restricted to letters, digits and "._-",
// but reasons are whatever a worker wrote: the templates escape them.

const (
	// maxStepRows bounds the steps a workflow's page lists (a workflow
	// may have 50,000); the counts above the table cover them all.
	maxStepRows = 1000
	// maxAfterNames bounds the dependencies a step's row names.
	maxAfterNames = 5
	// opWorkflowCancel is the one workflow action.
	opWorkflowCancel = "cancel"
)

// workflowStatuses are the step statuses in the order the counts show
// them ("queued": in its queue, on a driver that cannot tell ready from
// running); any other follows in the order the steps have it.
var workflowStatuses = []fila.StepStatus{fila.StepDone, fila.StepRunning, fila.StepReady, "queued",
	fila.StepPending, fila.StepDead, fila.StepUnknown}

// workflowsView is the page listing workflows.
type workflowsView struct {
	IDs []workflowLink
	// Note says the driver cannot list workflows; ListErr that listing
	// them failed.
	Note     string
	ListErr  string
	FindURL  string
	NextURL  string
	FirstURL string
}

type workflowLink struct {
	ID  string
	URL string
}

// pathWorkflow returns the workflow id named in r's path, or an error for
// an invalid one.
func pathWorkflow(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := fila.ValidateWorkflowID(id); err != nil {
		return "", &httpError{status: http.StatusNotFound, msg: "no such workflow: " + err.Error()}
	}
	return id, nil
}

// workflowErr turns fila.ErrWorkflowNotFound into a 404 saying where the
// ids are; other errors say what failed.
func workflowErr(id, doing string, err error) error {
	if errors.Is(err, fila.ErrWorkflowNotFound) {
		return &httpError{status: http.StatusNotFound,
			msg: "no workflow " + id + ": never started, deleted, or mistyped (the Workflows page lists those the broker holds)"}
	}
	return fmt.Errorf("%s workflow %s: %w", doing, id, err)
}

func (h *Handler) workflowsURL() string { return h.prefix + "/workflows" }

func (h *Handler) workflowURL(id string) string {
	return h.prefix + "/workflows/" + url.PathEscape(id)
}

func (h *Handler) workflowsPage(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	// The find form: straight to the workflow's page.
	if find := strings.TrimSpace(query.Get("id")); find != "" {
		if err := fila.ValidateWorkflowID(find); err != nil {
			h.fail(w, r, &httpError{status: http.StatusBadRequest, msg: err.Error()})
			return
		}
		http.Redirect(w, r, h.workflowURL(find), http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !h.answering(ctx, w, r) {
		return
	}
	v := workflowsView{FindURL: h.workflowsURL()}
	ids, err := h.c.WorkflowList(ctx)
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		v.Note = "The " + h.driver + " broker cannot list its queues, where workflows are kept, so they cannot be listed here (on RabbitMQ, add fila_management_url to its URL): open one by its id."
	case err != nil:
		v.ListErr = "listing workflows: " + err.Error()
		h.log.Warn("fila ui: listing workflows failed", "error", err)
	}
	// Sorted ids, a page at a time after the last one shown.
	after := query.Get("after")
	start, _ := slices.BinarySearch(ids, after)
	if start < len(ids) && ids[start] == after {
		start++
	}
	end := min(start+pageSize, len(ids))
	for _, id := range ids[start:end] {
		v.IDs = append(v.IDs, workflowLink{ID: id, URL: h.workflowURL(id)})
	}
	if end < len(ids) {
		v.NextURL = h.workflowsURL() + "?" + url.Values{"after": {ids[end-1]}}.Encode()
	}
	if after != "" {
		v.FirstURL = h.workflowsURL()
	}
	p := &page{Title: "Workflows", P: v, Crumbs: []crumb{{"Queues", h.prefix + "/"}, {Text: "Workflows"}}}
	h.render(w, r, http.StatusOK, "workflows", p)
}

// workflowView is a workflow's page.
type workflowView struct {
	ID        string
	Created   string
	Cancelled bool
	Done      bool
	Total     int
	Counts    []statusCount
	Steps     []stepRow
	// Hidden is how many steps the table leaves out (maxStepRows).
	Hidden int
	// Blocked: a dead step blocks others (and the workflow is not
	// cancelled): the page says how to go on.
	Blocked   bool
	CancelURL string
}

type statusCount struct {
	Status string
	N      int
}

// stepRow is one step of a workflow's page. Reason is untrusted text.
type stepRow struct {
	Name      string
	Queue     string
	QueueURL  string
	Status    string
	Attempt   string
	After     string
	AfterAll  string // every dependency, for the cell's title
	MessageID string
	// MessageURL opens the step's message where it is: its dead letter,
	// or its pending message where the driver lists messages.
	MessageURL string
	BlockedBy  string
	Reason     string
}

// workflowCounts counts st's steps per status, in workflowStatuses'
// order, leaving out those with none.
func workflowCounts(st *fila.WorkflowState) []statusCount {
	var out []statusCount
	seen := map[fila.StepStatus]bool{}
	for _, s := range workflowStatuses {
		seen[s] = true
		if n := st.Count(s); n > 0 {
			out = append(out, statusCount{string(s), n})
		}
	}
	for _, s := range st.Steps {
		if !seen[s.Status] {
			seen[s.Status] = true
			out = append(out, statusCount{string(s.Status), st.Count(s.Status)})
		}
	}
	return out
}

// describeCounts is counts in words: "1 done, 2 pending".
func describeCounts(counts []statusCount) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%d %s", c.N, c.Status)
	}
	return strings.Join(parts, ", ")
}

// joinNames lists names, comma-separated, cut after max with "+N more".
func joinNames(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" +%d more", len(names)-max)
}

// unfinished reports whether a cancel would change anything of st: it is
// not cancelled and some step is neither done nor dead.
func unfinished(st *fila.WorkflowState) bool {
	return !st.Cancelled && st.Count(fila.StepDone)+st.Count(fila.StepDead) < len(st.Steps)
}

func (h *Handler) workflowPage(w http.ResponseWriter, r *http.Request) {
	id, err := pathWorkflow(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !h.answering(ctx, w, r) {
		return
	}
	st, err := h.c.WorkflowShow(ctx, id)
	if err != nil {
		h.fail(w, r, workflowErr(id, "reading", err))
		return
	}
	v := workflowView{ID: st.ID, Created: fmtTime(st.Created), Cancelled: st.Cancelled, Done: st.Done(),
		Total: len(st.Steps), Counts: workflowCounts(&st)}
	for i := range st.Steps {
		s := &st.Steps[i]
		if s.Status == fila.StepPending && len(s.BlockedBy) > 0 && !st.Cancelled {
			v.Blocked = true
		}
		if len(v.Steps) == maxStepRows {
			v.Hidden++
			continue
		}
		row := stepRow{Name: s.Name, Queue: s.Queue, QueueURL: h.queueURL(s.Queue), Status: string(s.Status), Attempt: "-",
			After: "-", MessageID: s.MessageID}
		if s.Attempt > 0 {
			row.Attempt = strconv.Itoa(s.Attempt)
		}
		if len(s.After) > 0 {
			row.After, row.AfterAll = joinNames(s.After, maxAfterNames), strings.Join(s.After, ", ")
		}
		switch s.Status {
		case fila.StepDead:
			row.Reason = firstLine(s.Reason, 100)
			row.MessageURL = h.letterURL(s.Queue, s.MessageID)
		case fila.StepReady, fila.StepRunning:
			if h.canList {
				row.MessageURL = h.messageURL(s.Queue, s.MessageID)
			}
		case fila.StepPending:
			row.BlockedBy = joinNames(s.BlockedBy, maxAfterNames)
		}
		v.Steps = append(v.Steps, row)
	}
	if !h.o.ReadOnly && unfinished(&st) {
		v.CancelURL = h.workflowURL(id) + "/confirm?" + url.Values{"op": {opWorkflowCancel}}.Encode()
	}
	p := &page{Title: "Workflow " + id, P: v, RefreshMS: h.refreshMS(),
		Crumbs: []crumb{{"Queues", h.prefix + "/"}, {"Workflows", h.workflowsURL()}, {Text: id}}}
	if r.URL.Query().Get("done") == opWorkflowCancel {
		p.Flash = workflowCancelFlash(r.URL.Query())
	}
	h.render(w, r, http.StatusOK, "workflow", p)
}

// workflowCancelFlash says what a cancel found: p pending steps and q in
// their queues, whether the driver cancels those (c=1), or that the
// workflow was cancelled already (a=1); only those numbers are read from
// the query, never text.
func workflowCancelFlash(q url.Values) string {
	if q.Get("a") == "1" {
		return "The workflow was cancelled already: nothing changed."
	}
	pending, errP := strconv.Atoi(q.Get("p"))
	queued, errQ := strconv.Atoi(q.Get("q"))
	if errP != nil || errQ != nil || pending < 0 || queued < 0 {
		return fmt.Sprintf("Cancelled the workflow: no step is released any more, and its pending steps are dead-lettered with reason %q.", fila.ReasonWorkflowCancelled)
	}
	out := fmt.Sprintf("Cancelled the workflow: %d pending step(s) dead-lettered with reason %q", pending, fila.ReasonWorkflowCancelled)
	if queued > 0 {
		if q.Get("c") == "1" {
			out += fmt.Sprintf("; %d step(s) in their queues cancelled (a waiting one is dead-lettered instead of run, a running one's handler is told to stop)", queued)
		} else {
			out += fmt.Sprintf("; %d step(s) in their queues will run, and be dead-lettered at their ack (the broker cannot cancel messages)", queued)
		}
	}
	return out + "."
}

// workflowConfirm shows what cancelling the workflow would do and the form
// that does it.
func (h *Handler) workflowConfirm(w http.ResponseWriter, r *http.Request) {
	id, err := pathWorkflow(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.o.ReadOnly {
		h.fail(w, r, errReadOnly)
		return
	}
	if r.URL.Query().Get("op") != opWorkflowCancel {
		h.fail(w, r, &httpError{status: http.StatusBadRequest, msg: "unknown action"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	st, err := h.c.WorkflowShow(ctx, id)
	if err != nil {
		h.fail(w, r, workflowErr(id, "reading", err))
		return
	}
	v := confirmView{Action: h.workflowURL(id) + "/" + opWorkflowCancel, CancelURL: h.workflowURL(id), CancelText: "Keep",
		Question: fmt.Sprintf("Cancel workflow %s (%d steps: %s)?", id, len(st.Steps), describeCounts(workflowCounts(&st))),
		Detail: "No step is released any more. Its pending steps are dead-lettered with reason \"" + fila.ReasonWorkflowCancelled + "\"; " +
			"a step already in its queue is cancelled where the broker can (a waiting one is dead-lettered instead of run, a running one's handler is told to stop), " +
			"else it runs and is dead-lettered at its ack. Steps done stay done. This cannot be undone: a step replayed later releases nothing.",
		Button: "Cancel workflow", Danger: true}
	if st.Cancelled {
		v.Detail = "It is cancelled already: cancelling it again changes nothing."
	}
	p := &page{Title: "Confirm", CSRF: h.csrfToken(w, r), P: v,
		Crumbs: []crumb{{"Queues", h.prefix + "/"}, {"Workflows", h.workflowsURL()}, {id, h.workflowURL(id)}, {Text: "Confirm"}}}
	h.render(w, r, http.StatusOK, "confirm", p)
}

// workflowCancel is the POST of the cancel: read-only mode, the form's
// size and CSRF are checked before the broker is called, as for every
// action.
func (h *Handler) workflowCancel(w http.ResponseWriter, r *http.Request) {
	id, err := pathWorkflow(r)
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), actionTimeout)
	defer cancel()
	attrs := []any{"workflow", id, "remote", r.RemoteAddr}
	if user, _, ok := r.BasicAuth(); ok && h.o.Password != "" {
		attrs = append(attrs, "user", user)
	}
	// The state before, so the page after can say what the cancel found
	// (and an unknown id is refused before anything is written).
	before, err := h.c.WorkflowShow(ctx, id)
	if err != nil {
		h.fail(w, r, workflowErr(id, "reading", err))
		return
	}
	if err := h.c.WorkflowCancel(ctx, id); err != nil {
		h.fail(w, r, workflowErr(id, "cancelling", err))
		return
	}
	found := url.Values{"done": {opWorkflowCancel}}
	if before.Cancelled {
		found.Set("a", "1")
	} else {
		pending := before.Count(fila.StepPending)
		queued := len(before.Steps) - pending - before.Count(fila.StepDone) - before.Count(fila.StepDead)
		found.Set("p", strconv.Itoa(pending))
		found.Set("q", strconv.Itoa(queued))
		if h.canCancel {
			found.Set("c", "1")
		}
		attrs = append(attrs, "pending", pending, "queued", queued)
	}
	h.log.Info("fila ui: cancelled workflow", attrs...)
	http.Redirect(w, r, h.workflowURL(id)+"?"+found.Encode(), http.StatusSeeOther)
}
