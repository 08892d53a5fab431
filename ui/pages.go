package ui

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// Limits of the pages.
const (
	// pageSize is how many dead letters or messages a list page shows.
	pageSize = 50
	// maxTextBody and maxHexBody bound the body shown on a dead letter's
	// or a message's page (a hex dump is four times as long); the whole body is a
	// download away.
	maxTextBody = 64 << 10
	maxHexBody  = 16 << 10
	// callTimeout bounds one page's broker calls.
	callTimeout = 30 * time.Second
	// pingTimeout bounds the overview's check that the broker answers.
	pingTimeout = 2 * time.Second
	// statsParallel bounds the stats read at once for the overview.
	statsParallel = 4
)

// page is what every template gets: the layout's fields and the page's
// own in P.
type page struct {
	Title     string
	Prefix    string
	Broker    string
	Driver    string
	ReadOnly  bool
	RefreshMS int64
	CSRF      string
	// Public: a page shown without credentials (the sign-in form), which
	// names neither the broker nor the driver.
	Public bool
	// SignOut is the sign-out form's action, for a browser signed in with
	// the token.
	SignOut string
	Crumbs  []crumb
	Flash   string
	P       any
}

type crumb struct {
	Text string
	URL  string
}

// count is one number of a queue's stats as shown: its text, and why it
// is n/a when it is.
type count struct {
	Text string
	NA   bool
	Why  string
}

// statsView is a queue's stats as shown.
type statsView struct {
	Err                          string
	Ready, Delayed, Leased, Dead count
	Oldest                       count
	// OldestLate marks an oldest ready age above a minute.
	OldestLate bool
	// Kinds are the dead letters per kind, largest first; KindsNA when the
	// broker does not count them.
	Kinds   []kindCount
	KindsNA bool
	Note    string
	// Levels are the ready counts per priority level, highest first; empty
	// when the broker does not count them or nothing above level 0 is
	// ready.
	Levels []levelCount
}

type levelCount struct {
	Level int
	Count string
}

type kindCount struct {
	Kind      string
	Count     string
	ListURL   string
	ReplayURL string
	PurgeURL  string
}

// partialCounts names the drivers whose delayed and leased counts hold only
// what the client's own process handled (see package rabbitmq's
// QueueStats), with the note the pages show.
var partialCounts = map[string]string{
	"rabbitmq": "RabbitMQ counts delayed and leased messages only for the process that made them: " +
		"the dashboard shows those it knows of as a lower bound (≥), n/a when it knows of none. " +
		"It reports neither the oldest ready age nor dead letters per kind.",
}

// statsView makes the view of a queue's stats read at now, or of the error
// reading them.
func (h *Handler) statsView(queue string, st fila.Stats, err error, now time.Time) statsView {
	var v statsView
	if errors.Is(err, fila.ErrUnsupported) {
		na := count{Text: notReported, NA: true, Why: "the " + h.driver + " driver does not report queue stats"}
		v.Ready, v.Delayed, v.Leased, v.Dead, v.Oldest = na, na, na, na, na
		v.KindsNA = true
		return v
	}
	if err != nil {
		v.Err = "stats: " + err.Error()
		return v
	}
	v.Ready = count{Text: fmtCount(st.Ready)}
	v.Dead = count{Text: fmtCount(st.Dead)}
	v.Delayed = count{Text: fmtCount(st.Delayed)}
	v.Leased = count{Text: fmtCount(st.Leased)}
	if note, partial := partialCounts[h.driver]; partial {
		v.Note = note
		lower := func(n int64) count {
			why := "counted only for the processes that made them"
			if n == 0 {
				return count{Text: notReported, NA: true, Why: why}
			}
			return count{Text: "≥" + fmtCount(n), Why: why}
		}
		v.Delayed, v.Leased = lower(st.Delayed), lower(st.Leased)
	}
	above := int64(0)
	for p := 1; p < len(st.ReadyByPriority); p++ {
		above += st.ReadyByPriority[p]
	}
	if above > 0 {
		for p := len(st.ReadyByPriority) - 1; p >= 0; p-- {
			v.Levels = append(v.Levels, levelCount{Level: p, Count: fmtCount(st.ReadyByPriority[p])})
		}
	}
	switch {
	case st.Ready == 0:
		v.Oldest = count{Text: "-", Why: "nothing is ready"}
	case st.OldestReadyAt.IsZero():
		v.Oldest = count{Text: notReported, NA: true, Why: "the " + h.driver + " broker does not report when its oldest ready message became ready"}
	default:
		age := st.OldestReadyAge(now)
		v.Oldest = count{Text: fmtDuration(age)}
		v.OldestLate = age > time.Minute
	}
	if st.DeadByKind == nil {
		v.KindsNA = true
		return v
	}
	for k, n := range st.DeadByKind {
		kc := kindCount{Kind: k, Count: fmtCount(n), ListURL: h.deadURL(queue, k, "")}
		if !h.o.ReadOnly {
			kc.ReplayURL = h.confirmURL(queue, opReplay, nil, k, false)
			kc.PurgeURL = h.confirmURL(queue, opPurge, nil, k, false)
		}
		v.Kinds = append(v.Kinds, kc)
	}
	slices.SortFunc(v.Kinds, func(a, b kindCount) int {
		na, nb := st.DeadByKind[a.Kind], st.DeadByKind[b.Kind]
		if na != nb {
			if na > nb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return v
}

// charts makes the charts of a queue: the throughput and wait charts over
// span from the workers' records in the broker, then the three from the
// sampler's history. While the broker does not answer (up false) only
// what the sampler read before is shown.
func (h *Handler) charts(ctx context.Context, queue string, now time.Time, span time.Duration, up bool) []chartView {
	ss := h.hist.get(queue)
	f := chartFrame{now: now, span: h.history, maxGap: h.interval*5/2 + time.Second}
	return append(h.throughputCharts(ctx, queue, span, now, up),
		f.ageChart(ss, h.driver), f.deadChart(ss, h.driver), f.runChart(ss, h.o.RunTimes != nil))
}

// queueCard is one queue on the overview.
type queueCard struct {
	Name   string
	URL    string
	Paused bool
	Stats  statsView
	Charts []chartView
}

// errBrokerDown is each card's stats error while the broker does not
// answer (the page says why once, above the cards).
var errBrokerDown = errors.New("the broker does not answer")

type overviewView struct {
	Queues  []queueCard
	Note    string
	ListErr string
	// CountsNote is the driver's caveat on its counts, shown once above
	// the cards rather than on each.
	CountsNote string
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	v := overviewView{}
	// A broker that does not answer is said once, quickly: otherwise the
	// listing and each card's stats would wait for it in turn (5-10 s a
	// page on RabbitMQ). The cards are then the queues named and those the
	// charts have samples of.
	down := h.ping(ctx)
	var names []string
	canList := true
	if down != nil {
		v.ListErr = "The broker does not answer (" + down.Error() + "): the counts cannot be read now; the charts show what was sampled before."
		h.log.Warn("fila ui: the broker does not answer", "error", down)
		names = slices.Concat(h.o.Queues, h.hist.names())
		slices.Sort(names)
		names = slices.Compact(names)
	} else {
		var err error
		names, canList, err = h.queueNames(ctx)
		if err != nil {
			v.ListErr = err.Error()
			h.log.Warn("fila ui: listing queues failed", "error", err)
		}
	}
	if !canList {
		if len(h.o.Queues) == 0 {
			v.Note = "The " + h.driver + " broker cannot list its queues: name the queues to show (Options.Queues, or fila ui --queue), or, on RabbitMQ, add fila_management_url to its URL."
		} else {
			v.Note = "The " + h.driver + " broker cannot list its queues (on RabbitMQ, add fila_management_url to its URL): showing the configured ones."
		}
	}
	v.Queues = make([]queueCard, len(names))
	sem := make(chan struct{}, statsParallel)
	var wg sync.WaitGroup
	for i, q := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			now := time.Now()
			var st fila.Stats
			err := errBrokerDown
			if down == nil {
				st, err = h.c.QueueStats(ctx, q)
			}
			v.Queues[i] = queueCard{Name: q, URL: h.queueURL(q), Stats: h.statsView(q, st, err, now),
				Charts: h.charts(ctx, q, now, spanHour, down == nil)}
			if down == nil {
				v.Queues[i].Paused, _ = h.paused(ctx, q)
			}
		}()
	}
	wg.Wait()
	for i := range v.Queues {
		if n := v.Queues[i].Stats.Note; n != "" {
			v.CountsNote, v.Queues[i].Stats.Note = n, ""
		}
	}
	pg := &page{Title: "Queues", Crumbs: []crumb{{Text: "Queues"}}, P: v, RefreshMS: h.refreshMS()}
	if r.URL.Query().Get("done") == "delete" {
		if q := r.URL.Query().Get("queue"); fila.ValidateQueueName(q) == nil {
			pg.Flash = "Deleted queue " + q + "."
		}
	}
	h.render(w, r, http.StatusOK, "overview", pg)
}

// paused reads whether queue is paused; known is false when the driver
// cannot pause queues or reading failed (logged).
func (h *Handler) paused(ctx context.Context, queue string) (paused, known bool) {
	p, err := h.c.QueuePaused(ctx, queue)
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		return false, false
	case err != nil:
		h.log.Warn("fila ui: reading whether a queue is paused failed", "queue", queue, "error", err)
		return false, false
	}
	return p, true
}

func (h *Handler) refreshMS() int64 {
	if h.refresh < 0 {
		return 0
	}
	return h.refresh.Milliseconds()
}

// queueView is the queue page.
type queueView struct {
	Name   string
	Stats  statsView
	Charts []chartView
	// Spans are the links to the throughput charts' spans.
	Spans        []spanLink
	DeadURL      string
	ReplayAllURL string
	PurgeAllURL  string
	DeleteURL    string
	// Paused is the queue's state; PauseKnown is false when the driver
	// cannot pause queues (or reading the state failed), and then no
	// pause or resume button shows.
	Paused     bool
	PauseKnown bool
	PauseURL   string
	ResumeURL  string
	// ConfirmURL is where the cancel form goes (a GET: the confirmation
	// page); empty when the driver cannot cancel messages or read-only.
	ConfirmURL string
	// Workers are the workers running on the queue, from their presence
	// records (worker.PresenceList); WorkersNA: the driver cannot list
	// them; WorkersErr: reading them failed (logged).
	Workers    []workerRow
	WorkersNA  bool
	WorkersErr bool
	// Schedules are the periodic jobs recorded in the queue
	// (worker.ScheduleList); none where the workers cannot be listed.
	Schedules []scheduleRow
	// MessagesURL lists the queue's pending messages, MessageLinks by
	// state; MessagesNA: the driver cannot list them.
	MessagesURL  string
	MessageLinks []messageTab
	MessagesNA   bool
	MessagesWhy  string
	// Limits are the queue's flow control limits and the form that sets
	// them (limits.go).
	Limits limitsView
}

// scheduleRow is a periodic job's record, with its last and next tick.
type scheduleRow struct {
	Name string
	Spec string // "every 1m" or the cron expression with its time zone
	Kind string
	Last string
	Next string
}

// workerRow is a worker's presence record. Host is untrusted text (anyone
// who can write marks can write a record): the template escapes it.
type workerRow struct {
	ID          string
	Host        string
	PID         int
	Concurrency int
	Shared      string // "-" when the worker's queues share no slots
	Started     string
	Up          string // how long it has run
}

// workers fills v's worker rows for queue.
func (h *Handler) workers(ctx context.Context, queue string, v *queueView, now time.Time) {
	ps, err := worker.PresenceList(ctx, h.c, queue)
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		v.WorkersNA = true
		return
	case err != nil:
		h.log.Warn("fila ui: listing the workers of a queue failed", "queue", queue, "error", err)
		v.WorkersErr = true
		return
	}
	scheds, err := worker.ScheduleList(ctx, h.c, queue)
	if err != nil {
		h.log.Warn("fila ui: listing the schedules of a queue failed", "queue", queue, "error", err)
	}
	for _, sc := range scheds {
		spec := sc.Cron + " (" + sc.Location + ")"
		if sc.Cron == "" {
			spec = "every " + sc.Every.String()
		}
		v.Schedules = append(v.Schedules, scheduleRow{Name: sc.Name, Spec: spec, Kind: sc.Kind, Last: fmtTime(sc.Last), Next: fmtTime(sc.Next)})
	}
	for _, p := range ps {
		r := workerRow{ID: p.ID, Host: p.Host, PID: p.PID, Concurrency: p.Concurrency, Shared: "-",
			Started: fmtTime(p.Started), Up: fmtDuration(max(now.Sub(p.Started), 0).Truncate(time.Second))} // a clock behind the worker's: not negative
		if p.Shared > 0 {
			r.Shared = strconv.Itoa(p.Shared)
		}
		v.Workers = append(v.Workers, r)
	}
}

// pathQueue returns the queue named in r's path, or an error for an
// invalid name.
func pathQueue(r *http.Request) (string, error) {
	q := r.PathValue("queue")
	if err := fila.ValidateQueueName(q); err != nil {
		return "", &httpError{status: http.StatusNotFound, msg: "no such queue: " + err.Error()}
	}
	return q, nil
}

func (h *Handler) queuePage(w http.ResponseWriter, r *http.Request) {
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
	st, err := h.c.QueueStats(ctx, q)
	if err != nil && !errors.Is(err, fila.ErrUnsupported) {
		h.log.Warn("fila ui: reading queue stats failed", "queue", q, "error", err)
	}
	now := time.Now()
	span := spanHour
	if r.URL.Query().Get("span") == "day" {
		span = spanDay
	}
	v := queueView{Name: q, Stats: h.statsView(q, st, err, now), Charts: h.charts(ctx, q, now, span, true), DeadURL: h.deadURL(q, "", "")}
	v.Spans = []spanLink{
		{Label: "last hour", URL: h.queueURL(q), Current: span == spanHour},
		{Label: "last day", URL: h.queueURL(q) + "?span=day", Current: span == spanDay},
	}
	v.Paused, v.PauseKnown = h.paused(ctx, q)
	v.Limits = h.limitsView(ctx, q)
	h.workers(ctx, q, &v, now)
	v.MessagesURL = h.messagesURL(q, "", "")
	if h.canList {
		for _, s := range messageStates {
			v.MessageLinks = append(v.MessageLinks, messageTab{State: string(s), Label: tabLabel(s), URL: h.messagesURL(q, s, "")})
		}
	} else {
		v.MessagesNA, v.MessagesWhy = true, h.cannotList("")
	}
	if !h.o.ReadOnly {
		v.ReplayAllURL = h.confirmURL(q, opReplay, nil, "", true)
		v.PurgeAllURL = h.confirmURL(q, opPurge, nil, "", true)
		v.DeleteURL = h.confirmURL(q, opDelete, nil, "", false)
		if v.PauseKnown {
			v.PauseURL = h.confirmURL(q, opPause, nil, "", false)
			v.ResumeURL = h.confirmURL(q, opResume, nil, "", false)
		}
		if h.canCancel {
			v.ConfirmURL = h.prefix + "/queues/" + q + "/confirm"
		}
	}
	pg := &page{Title: "Queue " + q, Crumbs: []crumb{{"Queues", h.prefix + "/"}, {Text: q}}, P: v, RefreshMS: h.refreshMS()}
	pg.Flash = doneFlash(r.URL.Query())
	h.render(w, r, http.StatusOK, "queue", pg)
}

// spanLink is a link to a span of the queue page's throughput charts.
type spanLink struct {
	Label, URL string
	Current    bool
}

// cancelFlash says what a cancel of n ids found: w waiting and r running
// messages, when the driver could look them up (only those counts are
// read from the query).
func cancelFlash(q url.Values, n int) string {
	w, errW := strconv.Atoi(q.Get("w"))
	r, errR := strconv.Atoi(q.Get("r"))
	if errW != nil || errR != nil || w < 0 || r < 0 || w+r > n {
		// The driver cannot list messages (or the lookup failed): say
		// what the cancel does, not that it found anything.
		return fmt.Sprintf("Cancel recorded for %d id(s). If the queue holds such a message, a waiting one is dead-lettered with reason %q instead of run and a running one's handler is told; an id it does not hold (acked already, or mistyped) changes nothing.", n, fila.ReasonCancelled)
	}
	var parts []string
	if w > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting message(s) will be dead-lettered with reason %q instead of run", w, fila.ReasonCancelled))
	}
	if r > 0 {
		parts = append(parts, fmt.Sprintf("%d running message(s) had their handler told to stop; a retry dead-letters them", r))
	}
	if miss := n - w - r; miss > 0 {
		parts = append(parts, fmt.Sprintf("%d id(s) are not pending in this queue (acked, dead-lettered already, or mistyped): nothing was there to cancel, and the cancel is kept %d days in case such a message arrives", miss, int(fila.CancelHold.Hours()/24)))
	}
	return "Cancelled: " + strings.Join(parts, "; ") + "."
}

// doneFlash is the message of an action that redirected here with
// done=OP&n=N (and the numbers of limitsDone); only those known values are
// read, never text.
func doneFlash(q url.Values) string {
	switch q.Get("done") {
	case opPause:
		return "Paused the queue: within a few seconds no worker receives its messages."
	case opResume:
		return "Resumed the queue: workers receive its messages again."
	case opLimits:
		return limitsFlash(q)
	}
	n, err := strconv.Atoi(q.Get("n"))
	if err != nil || n < 0 {
		return ""
	}
	const gone = ": no dead letter matched (replayed or purged already?)."
	switch q.Get("done") {
	case opReplay:
		if n == 0 {
			return "Nothing was replayed" + gone
		}
		return fmt.Sprintf("Replayed %d dead letter(s): they are ready again, attempts reset.", n)
	case opPurge:
		if n == 0 {
			return "Nothing was purged" + gone
		}
		return fmt.Sprintf("Purged %d dead letter(s).", n)
	case opCancel:
		return cancelFlash(q, n)
	}
	return ""
}

// letterRow is a dead letter in a list.
type letterRow struct {
	ID        string
	URL       string
	Kind      string
	Attempts  int
	Enqueued  string
	DeadAt    string
	Reason    string
	ReplayURL string
	PurgeURL  string
}

type deadListView struct {
	Name        string
	Kind        string
	ListURL     string
	KindOptions []kindOption
	Letters     []letterRow
	NextURL     string
	FirstURL    string
	QueueURL    string
	// Bulk actions for the list's selection (a kind, or all).
	ReplayURL string
	PurgeURL  string
}

type kindOption struct {
	Kind     string
	Count    string
	Selected bool
}

func (h *Handler) deadList(w http.ResponseWriter, r *http.Request) {
	q, err := pathQueue(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	kind, cursor := r.URL.Query().Get("kind"), r.URL.Query().Get("cursor")
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if !h.answering(ctx, w, r) {
		return
	}
	pg, err := h.c.DeadList(ctx, q, fila.DeadListParams{Kind: kind, Limit: pageSize, Cursor: cursor, WithoutBodies: true})
	if err != nil {
		h.fail(w, r, fmt.Errorf("listing the dead letters of %s: %w", q, err))
		return
	}
	v := deadListView{Name: q, Kind: kind, ListURL: h.deadURL(q, "", ""), QueueURL: h.queueURL(q)}
	if st, err := h.c.QueueStats(ctx, q); err == nil && st.DeadByKind != nil {
		for k, n := range st.DeadByKind {
			v.KindOptions = append(v.KindOptions, kindOption{Kind: k, Count: fmtCount(n), Selected: k == kind})
		}
		if kind != "" && st.DeadByKind[kind] == 0 {
			v.KindOptions = append(v.KindOptions, kindOption{Kind: kind, Count: "0", Selected: true})
		}
		slices.SortFunc(v.KindOptions, func(a, b kindOption) int { return strings.Compare(a.Kind, b.Kind) })
	}
	for _, l := range pg.Letters {
		row := letterRow{ID: l.ID, URL: h.letterURL(q, l.ID), Kind: l.Kind, Attempts: l.Attempts,
			Enqueued: fmtTime(l.EnqueuedAt), DeadAt: fmtTime(l.DeadAt), Reason: firstLine(l.Reason, 100)}
		if !h.o.ReadOnly {
			row.ReplayURL = h.confirmURL(q, opReplay, []string{l.ID}, "", false)
			row.PurgeURL = h.confirmURL(q, opPurge, []string{l.ID}, "", false)
		}
		v.Letters = append(v.Letters, row)
	}
	if pg.Next != "" {
		v.NextURL = h.deadURL(q, kind, pg.Next)
	}
	if cursor != "" {
		v.FirstURL = h.deadURL(q, kind, "")
	}
	if !h.o.ReadOnly && len(v.Letters) > 0 {
		v.ReplayURL = h.confirmURL(q, opReplay, nil, kind, kind == "")
		v.PurgeURL = h.confirmURL(q, opPurge, nil, kind, kind == "")
	}
	p := &page{Title: "Dead letters of " + q, P: v,
		Crumbs: []crumb{{"Queues", h.prefix + "/"}, {q, h.queueURL(q)}, {Text: "Dead letters"}}}
	h.render(w, r, http.StatusOK, "dead", p)
}

// header is one header of a dead letter.
type header struct{ Key, Value string }

type letterView struct {
	ID          string
	Queue       string
	Kind        string
	Attempts    int
	MaxAttempts int
	Enqueued    string
	DeadAt      string
	DedupKey    string
	Reason      string
	Errors      []errorRow // the errors before Reason, oldest first
	Headers     []header
	Body        string
	BodyInfo    string
	Truncated   bool
	RawURL      string
	ReplayURL   string
	PurgeURL    string
	ListURL     string
}

// findDead reads queue's dead letter id alone (DeadListParams.IDs): the
// page holds one body, not a page of them.
func (h *Handler) findDead(ctx context.Context, queue, id string) (*fila.DeadLetter, error) {
	page, err := h.c.DeadList(ctx, queue, fila.DeadListParams{IDs: []string{id}, Limit: 1})
	if err != nil {
		return nil, err
	}
	for i := range page.Letters {
		if page.Letters[i].ID == id {
			return &page.Letters[i], nil
		}
	}
	return nil, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("no dead letter %s in queue %s (replayed or purged already?)", id, queue)}
}

func (h *Handler) deadLetter(w http.ResponseWriter, r *http.Request) {
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
	l, err := h.findDead(ctx, q, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := letterView{ID: l.ID, Queue: q, Kind: l.Kind, Attempts: l.Attempts, MaxAttempts: l.MaxAttempts,
		Enqueued: fmtTime(l.EnqueuedAt), DeadAt: fmtTime(l.DeadAt), DedupKey: l.DedupKey, Reason: l.Reason,
		Errors: errorRows(l.Errors), RawURL: h.letterURL(q, l.ID) + "/body", ListURL: h.deadURL(q, "", "")}
	for k, val := range l.Headers {
		v.Headers = append(v.Headers, header{k, val})
	}
	slices.SortFunc(v.Headers, func(a, b header) int { return strings.Compare(a.Key, b.Key) })
	v.Body, v.BodyInfo, v.Truncated = showBody(l.Body)
	if !h.o.ReadOnly {
		v.ReplayURL = h.confirmURL(q, opReplay, []string{l.ID}, "", false)
		v.PurgeURL = h.confirmURL(q, opPurge, []string{l.ID}, "", false)
	}
	p := &page{Title: "Dead letter " + l.ID, P: v,
		Crumbs: []crumb{{"Queues", h.prefix + "/"}, {q, h.queueURL(q)}, {"Dead letters", h.deadURL(q, "", "")}, {Text: l.ID}}}
	h.render(w, r, http.StatusOK, "letter", p)
}

// showBody is a body as a page shows it: as text when it is valid UTF-8,
// else as a hex dump, cut to maxTextBody or maxHexBody (truncated says
// so), with what it is in info. The template escapes it.
func showBody(b []byte) (body, info string, truncated bool) {
	if utf8.Valid(b) {
		shown := cutUTF8(b, maxTextBody)
		return string(shown), fmt.Sprintf("%s bytes, text", fmtCount(int64(len(b)))), len(shown) < len(b)
	}
	shown := b[:min(len(b), maxHexBody)]
	return hex.Dump(shown), fmt.Sprintf("%s bytes, not UTF-8: hex dump", fmtCount(int64(len(b)))), len(shown) < len(b)
}

// deadBody serves a dead letter's body as a download: never rendered by
// the browser (attachment, octet-stream, nosniff, a sandboxing CSP).
func (h *Handler) deadBody(w http.ResponseWriter, r *http.Request) {
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
	l, err := h.findDead(ctx, q, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	serveBody(w, "dead-"+safeFileName(l.ID)+".bin", l.Body)
}

// serveBody writes body as a download named name: attachment,
// octet-stream and a sandboxing CSP, so no browser renders it (nosniff
// comes with every page).
func serveBody(w http.ResponseWriter, name string, body []byte) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// safeFileName keeps the letters, digits, '-' and '_' of s.
func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, s)
}

// staticFile serves the embedded script and style sheet.
func (h *Handler) staticFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(h.static, name)
	if err != nil {
		h.fail(w, r, &httpError{status: http.StatusNotFound, msg: "no such file"})
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	// Assets are not secret and change only with the binary.
	w.Header().Set("Cache-Control", "private, max-age=300")
	_, _ = w.Write(b)
}

// errorView is the error page.
type errorView struct {
	Status  int
	Text    string
	Message string
}

// fail answers err with its status and the error page. Server-side
// failures are logged; the message never holds credentials (fila's errors
// do not carry them).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := errStatus(err)
	if status >= 500 {
		h.log.Warn("fila ui: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
	} else {
		h.log.Debug("fila ui: request refused", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
	}
	p := &page{Title: http.StatusText(status), P: errorView{Status: status, Text: http.StatusText(status), Message: err.Error()},
		Crumbs: []crumb{{"Queues", h.prefix + "/"}, {Text: "Error"}}}
	h.render(w, r, status, "error", p)
}

// render executes the named page into a buffer and writes it with status.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	p.Prefix, p.Broker, p.Driver, p.ReadOnly = h.prefix, h.broker, h.driver, h.o.ReadOnly
	if p.Public {
		p.Broker, p.Driver = "", ""
	} else if h.o.Token != "" && h.validSession(r, time.Now()) {
		p.SignOut = h.prefix + "/logout"
		if p.CSRF == "" {
			p.CSRF = h.csrfToken(w, r)
		}
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("fila ui: rendering a page failed", "page", name, "error", err)
		http.Error(w, "500 internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// parsePages parses each page's template with the shared layout.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		// cell pairs a count with the class of its cell.
		"cell": func(class string, c count) any {
			return struct {
				Class string
				C     count
			}{class, c}
		},
	}
	base, err := template.New("base").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", "assets/templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("ui: parsing the layout: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "queue", "dead", "letter", "messages", "message", "confirm", "error", "login", "workflows", "workflow"} {
		t, err := template.Must(base.Clone()).ParseFS(assets, "assets/templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: parsing page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// URLs of the pages, with the prefix. Queue names need no escaping (they
// are letters, digits and ".-_"); ids and kinds are escaped.

func (h *Handler) queueURL(q string) string { return h.prefix + "/queues/" + q }

func (h *Handler) deadURL(q, kind, cursor string) string {
	u := h.prefix + "/queues/" + q + "/dead"
	v := url.Values{}
	if kind != "" {
		v.Set("kind", kind)
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

func (h *Handler) letterURL(q, id string) string {
	return h.prefix + "/queues/" + q + "/dead/" + url.PathEscape(id)
}

func (h *Handler) confirmURL(q, op string, ids []string, kind string, all bool) string {
	v := url.Values{"op": {op}}
	if len(ids) > 0 {
		v["id"] = ids
	}
	if kind != "" {
		v.Set("kind", kind)
	}
	if all {
		v.Set("all", "1")
	}
	return h.prefix + "/queues/" + q + "/confirm?" + v.Encode()
}

// answering checks within pingTimeout that the broker answers, and fails
// the page with 503 when it does not: each of the page's calls would
// otherwise wait for it in turn.
func (h *Handler) answering(ctx context.Context, w http.ResponseWriter, r *http.Request) bool {
	if err := h.ping(ctx); err != nil {
		h.fail(w, r, &httpError{status: http.StatusServiceUnavailable,
			msg: "the broker does not answer (" + err.Error() + "); try again once it is back"})
		return false
	}
	return true
}

// ping checks within pingTimeout that the broker answers.
func (h *Handler) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return h.c.Ping(ctx)
}
