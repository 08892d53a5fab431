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
	"time"

	"github.com/fila-go/fila"
)

// The pending messages of a queue (fila.Client.MessageList): a page per
// state, a search by id, one message in full. They are read-only: listing
// claims nothing; the one action offered is the cancel that exists
// already, through its confirmation page.

// messageStates are the states listed, in the tabs' order.
var messageStates = []fila.MessageState{fila.StateReady, fila.StateDelayed, fila.StateLeased}

// stateLabel names a state on the pages: a leased message is one a worker
// is running.
func stateLabel(s fila.MessageState) string {
	switch s {
	case fila.StateReady:
		return "ready"
	case fila.StateDelayed:
		return "delayed"
	case fila.StateLeased:
		return "running"
	}
	return string(s)
}

// tabLabel names a state's tab.
func tabLabel(s fila.MessageState) string {
	switch s {
	case fila.StateReady:
		return "Ready"
	case fila.StateDelayed:
		return "Delayed"
	default:
		return "Leased (running)"
	}
}

// dueLabel names a message's due time in its state.
func dueLabel(s fila.MessageState) string {
	switch s {
	case fila.StateDelayed:
		return "due"
	case fila.StateLeased:
		return "lease deadline"
	default:
		return "ready since"
	}
}

// fmtRel prints t relative to now: "in 42s", "3m12s ago".
func fmtRel(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	if d := t.Sub(now); d > 0 {
		return "in " + fmtDuration(d.Round(time.Second))
	}
	return fmtDuration(now.Sub(t).Round(time.Second)) + " ago"
}

// messageTab is one state's tab: its link and count from the stats.
type messageTab struct {
	State   string
	Label   string
	URL     string
	Count   count
	Current bool
}

// messageRow is a pending message in a list. Kind and LastError are
// untrusted text: the template escapes them.
type messageRow struct {
	ID        string
	URL       string
	Kind      string
	Level     int
	Attempts  int
	State     string
	Leased    bool
	Due       string
	DueRel    string
	Enqueued  string
	LastError string
}

// deadHit is a searched id found among the dead letters instead.
type deadHit struct {
	ID  string
	URL string
}

type messageListView struct {
	Name     string
	QueueURL string
	ListURL  string
	DeadURL  string
	Tabs     []messageTab
	// State is the state listed; empty in a search.
	State    string
	DueLabel string
	// NA: the driver cannot list these messages (fila.ErrUnsupported);
	// Why says so.
	NA       bool
	Why      string
	Messages []messageRow
	NextURL  string
	FirstURL string
	// Search is the ids searched, as typed; Missing those not found
	// pending, DeadHits those of them that are dead letters.
	Search   string
	Missing  []string
	DeadHits []deadHit
}

// tabs makes the state tabs of queue with their counts, current marked.
func (h *Handler) tabs(ctx context.Context, queue string, current fila.MessageState) []messageTab {
	st, err := h.c.QueueStats(ctx, queue)
	if err != nil && !errors.Is(err, fila.ErrUnsupported) {
		h.log.Warn("fila ui: reading queue stats failed", "queue", queue, "error", err)
	}
	sv := h.statsView(queue, st, err, time.Now())
	counts := map[fila.MessageState]count{fila.StateReady: sv.Ready, fila.StateDelayed: sv.Delayed, fila.StateLeased: sv.Leased}
	var tabs []messageTab
	for _, s := range messageStates {
		tabs = append(tabs, messageTab{State: string(s), Label: tabLabel(s), URL: h.messagesURL(queue, s, ""), Count: counts[s], Current: s == current})
	}
	return tabs
}

// cannotList says what the driver cannot list.
func (h *Handler) cannotList(what string) string {
	if !h.canList {
		return "the " + h.driver + " driver cannot list a queue's messages (only receiving them reads them)"
	}
	return "the " + h.driver + " driver cannot list " + what
}

func (h *Handler) messageList(w http.ResponseWriter, r *http.Request) {
	q, err := pathQueue(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	query := r.URL.Query()
	search := strings.TrimSpace(query.Get("id"))
	ids := strings.Fields(search)
	state := fila.MessageState(query.Get("state"))
	cursor := query.Get("cursor")
	switch {
	case len(ids) > maxIDs:
		h.fail(w, r, &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf("at most %d ids at once", maxIDs)})
		return
	case len(ids) > 0:
		state, cursor = "", ""
	case state == "":
		state = fila.StateReady
	case !slices.Contains(messageStates, state):
		h.fail(w, r, &httpError{status: http.StatusBadRequest, msg: "unknown state: name ready, delayed or leased"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !h.answering(ctx, w, r) {
		return
	}
	v := messageListView{Name: q, QueueURL: h.queueURL(q), ListURL: h.messagesURL(q, "", ""), DeadURL: h.deadURL(q, "", ""),
		Tabs: h.tabs(ctx, q, state), State: string(state), DueLabel: dueLabel(state), Search: search}
	p := fila.MessageListParams{State: state, Limit: pageSize, Cursor: cursor, WithoutBodies: true}
	what := string(state) + " messages"
	if len(ids) > 0 {
		p = fila.MessageListParams{IDs: ids, Limit: len(ids), WithoutBodies: true}
		what = "messages by id"
	}
	pg, err := h.c.MessageList(ctx, q, p)
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		v.NA, v.Why = true, h.cannotList(what)
	case err != nil:
		h.fail(w, r, fmt.Errorf("listing the %s of %s: %w", what, q, err))
		return
	}
	now := time.Now()
	found := map[string]bool{}
	for _, m := range pg.Messages {
		found[m.ID] = true
		v.Messages = append(v.Messages, messageRow{ID: m.ID, URL: h.messageURL(q, m.ID), Kind: m.Kind, Level: m.Priority,
			Attempts: m.Attempts, State: stateLabel(m.State), Leased: m.State == fila.StateLeased,
			Due: fmtTime(m.Due), DueRel: fmtRel(m.Due, now), Enqueued: fmtTime(m.EnqueuedAt), LastError: firstLine(m.LastError, 100)})
	}
	if len(ids) > 0 && !v.NA {
		for _, id := range ids {
			if !found[id] && !slices.Contains(v.Missing, id) {
				v.Missing = append(v.Missing, id)
			}
		}
		v.DeadHits = h.deadHits(ctx, q, v.Missing)
	}
	if pg.Next != "" && len(ids) == 0 {
		v.NextURL = h.messagesURL(q, state, pg.Next)
	}
	if cursor != "" {
		v.FirstURL = h.messagesURL(q, state, "")
	}
	title := "Messages of " + q
	crumbs := []crumb{{"Queues", h.prefix + "/"}, {q, h.queueURL(q)}, {Text: "Messages"}}
	if len(ids) > 0 {
		crumbs = []crumb{{"Queues", h.prefix + "/"}, {q, h.queueURL(q)}, {"Messages", v.ListURL}, {Text: "Search"}}
	}
	h.render(w, r, http.StatusOK, "messages", &page{Title: title, P: v, Crumbs: crumbs})
}

// deadHits returns the ids among ids that are dead letters of queue, where
// the driver can tell; nothing when it cannot (the search says only that
// they are not pending).
func (h *Handler) deadHits(ctx context.Context, queue string, ids []string) []deadHit {
	if len(ids) == 0 {
		return nil
	}
	pg, err := h.c.DeadList(ctx, queue, fila.DeadListParams{IDs: ids, Limit: len(ids), WithoutBodies: true})
	if err != nil {
		if !errors.Is(err, fila.ErrUnsupported) {
			h.log.Warn("fila ui: looking ids up among the dead letters failed", "queue", queue, "error", err)
		}
		return nil
	}
	var hits []deadHit
	for _, l := range pg.Letters {
		hits = append(hits, deadHit{ID: l.ID, URL: h.letterURL(queue, l.ID)})
	}
	return hits
}

// messageView is one pending message in full.
type messageView struct {
	ID          string
	Queue       string
	Kind        string
	State       string
	Leased      bool
	Level       int
	Attempts    int
	MaxAttempts int
	Enqueued    string
	DueLabel    string
	Due         string
	DueRel      string
	DedupKey    string
	LastError   string
	Errors      []errorRow // the errors before LastError, oldest first
	Headers     []header
	Body        string
	BodyInfo    string
	Truncated   bool
	RawURL      string
	ListURL     string
	// CancelURL is the cancel's confirmation page; empty when read-only
	// or the driver cannot cancel messages.
	CancelURL string
	// NA: the driver cannot list messages; Why says so.
	NA  bool
	Why string
}

// errorRow is one earlier error of a message or dead letter, as its page
// shows it (the template escapes the reason).
type errorRow struct {
	Attempt string
	At      string
	Reason  string
}

// errorRows are the rows of errs, oldest first; "-" for an unknown
// attempt or time (a reason stored before histories existed).
func errorRows(errs []fila.AttemptError) []errorRow {
	rows := make([]errorRow, len(errs))
	for i, e := range errs {
		rows[i] = errorRow{Attempt: "-", At: fmtTime(e.At), Reason: e.Reason}
		if e.Attempt > 0 {
			rows[i].Attempt = strconv.Itoa(e.Attempt)
		}
	}
	return rows
}

// findMessage reads queue's pending message id alone, whatever its state.
func (h *Handler) findMessage(ctx context.Context, queue, id string) (*fila.PendingMessage, error) {
	pg, err := h.c.MessageList(ctx, queue, fila.MessageListParams{IDs: []string{id}, Limit: 1})
	if err != nil {
		return nil, err
	}
	for i := range pg.Messages {
		if pg.Messages[i].ID == id {
			return &pg.Messages[i], nil
		}
	}
	return nil, &httpError{status: http.StatusNotFound,
		msg: fmt.Sprintf("no ready, delayed or running message %s in queue %s (acked, dead-lettered or never enqueued?)", id, queue)}
}

func (h *Handler) messagePage(w http.ResponseWriter, r *http.Request) {
	q, err := pathQueue(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !h.answering(ctx, w, r) {
		return
	}
	crumbs := []crumb{{"Queues", h.prefix + "/"}, {q, h.queueURL(q)}, {"Messages", h.messagesURL(q, "", "")}, {Text: id}}
	m, err := h.findMessage(ctx, q, id)
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		v := messageView{ID: id, Queue: q, NA: true, Why: h.cannotList("messages by id"), ListURL: h.messagesURL(q, "", "")}
		h.render(w, r, http.StatusOK, "message", &page{Title: "Message " + id, P: v, Crumbs: crumbs})
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	now := time.Now()
	v := messageView{ID: m.ID, Queue: q, Kind: m.Kind, State: stateLabel(m.State), Leased: m.State == fila.StateLeased,
		Level: m.Priority, Attempts: m.Attempts, MaxAttempts: m.MaxAttempts, Enqueued: fmtTime(m.EnqueuedAt),
		DueLabel: dueLabel(m.State), Due: fmtTime(m.Due), DueRel: fmtRel(m.Due, now), DedupKey: m.DedupKey,
		LastError: m.LastError, RawURL: h.messageURL(q, m.ID) + "/body", ListURL: h.messagesURL(q, m.State, "")}
	if len(m.Errors) > 1 {
		v.Errors = errorRows(m.Errors[:len(m.Errors)-1]) // the last is LastError
	}
	for k, val := range m.Headers {
		v.Headers = append(v.Headers, header{k, val})
	}
	slices.SortFunc(v.Headers, func(a, b header) int { return strings.Compare(a.Key, b.Key) })
	v.Body, v.BodyInfo, v.Truncated = showBody(m.Body)
	if !h.o.ReadOnly && h.canCancel {
		v.CancelURL = h.confirmURL(q, opCancel, []string{m.ID}, "", false)
	}
	h.render(w, r, http.StatusOK, "message", &page{Title: "Message " + m.ID, P: v, Crumbs: crumbs})
}

// messageBody serves a pending message's body as a download, as deadBody
// does a dead letter's.
func (h *Handler) messageBody(w http.ResponseWriter, r *http.Request) {
	q, err := pathQueue(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !h.answering(ctx, w, r) {
		return
	}
	m, err := h.findMessage(ctx, q, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	serveBody(w, "message-"+safeFileName(m.ID)+".bin", m.Body)
}

// messagesURL is the list of queue's messages in state (the first tab
// when empty), from cursor.
func (h *Handler) messagesURL(q string, state fila.MessageState, cursor string) string {
	u := h.prefix + "/queues/" + q + "/messages"
	v := url.Values{}
	if state != "" {
		v.Set("state", string(state))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

func (h *Handler) messageURL(q, id string) string {
	return h.prefix + "/queues/" + q + "/messages/" + url.PathEscape(id)
}
