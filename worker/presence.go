package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// DefaultPresence is how often a running Worker renews its presence record
// when Config.Presence is zero.
const DefaultPresence = 10 * time.Second

// presenceTTLFactor: a presence record expires this many renewal intervals
// after its last renewal, so one late or failed renewal does not drop it.
const presenceTTLFactor = 3

// markPresencePrefix starts the name of every presence mark.
const markPresencePrefix = "worker/"

// maxPresenceHost bounds the host name a presence record carries, in bytes
// (mark names are at most backend.MaxMarkName bytes).
const maxPresenceHost = 200

// Presence is a running Worker as it records itself in a queue it serves:
// a mark in the broker that every client of it can list (PresenceList),
// renewed every Config.Presence, deleted when Run returns, and gone
// 3 × Config.Presence after its last renewal when the process died.
type Presence struct {
	// ID tells Run calls apart: random, new at each Run.
	ID string
	// Host is the host name of the worker's machine (os.Hostname), cut to
	// 200 bytes. It is what the record says: anyone who can write marks in
	// the broker can write a record, so treat it as untrusted text.
	Host string
	// PID is the worker's process id.
	PID int
	// Concurrency is the most jobs of the queue the worker runs at once
	// (QueueConfig.Concurrency).
	Concurrency int
	// Shared is Config.Concurrency, the slots the worker's queues share;
	// 0 when they share none.
	Shared int
	// Started is when Run began.
	Started time.Time
}

// PresenceList returns the workers whose presence records queue holds,
// oldest first. It needs a driver that lists marks (backend.MarkLister);
// with another it returns an error matching fila.ErrUnsupported, and its
// workers record no presence. Records it cannot read are skipped.
func PresenceList(ctx context.Context, c *fila.Client, queue string) ([]Presence, error) {
	names, _, err := listRecords(ctx, c, queue, markPresencePrefix, "workers")
	if err != nil {
		return nil, err
	}
	out := make([]Presence, 0, len(names))
	for _, n := range names {
		if p, ok := parsePresence(n); ok {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b Presence) int { return a.Started.Compare(b.Started) })
	return out, nil
}

// listRecords returns the names of queue's marks that start with prefix,
// and the driver's marks; what names the records in errors.
func listRecords(ctx context.Context, c *fila.Client, queue, prefix, what string) ([]string, backend.MarkLister, error) {
	lister, err := recordMarks(c, queue, "listing the "+what+" of a queue")
	if err != nil {
		return nil, nil, err
	}
	names, err := lister.MarkList(ctx, queue, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: listing the %s of queue %q: %w", what, queue, err)
	}
	return names, lister, nil
}

// recordMarks checks c and queue and returns the driver's marks, which
// doing (what the caller does with the records, for the error) needs.
func recordMarks(c *fila.Client, queue, doing string) (interface {
	backend.Marker
	backend.MarkLister
}, error) {
	if c == nil {
		return nil, errors.New("worker: client is nil")
	}
	if err := fila.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	lister, ok := presenceLister(c)
	if !ok {
		return nil, fmt.Errorf("worker: %s needs marks the driver can list: %w",
			doing, &fila.UnsupportedError{Driver: driverName(c), Capability: "listing marks (backend.MarkLister)"})
	}
	return lister, nil
}

// presenceLister returns the driver's mark lister, when it has marks it
// can list.
func presenceLister(c *fila.Client) (interface {
	backend.Marker
	backend.MarkLister
}, bool) {
	d := c.Driver()
	m, ok1 := d.(backend.Marker)
	l, ok2 := d.(backend.MarkLister)
	if !ok1 || !ok2 {
		return nil, false
	}
	return struct {
		backend.Marker
		backend.MarkLister
	}{m, l}, true
}

func driverName(c *fila.Client) string {
	if n, ok := c.Driver().(backend.Namer); ok {
		return n.DriverName()
	}
	return "unnamed"
}

// presenceName is the mark name of p: markPresencePrefix, the id, then the
// other fields as a URL query.
func presenceName(p Presence) string {
	v := url.Values{}
	v.Set("h", p.Host)
	v.Set("p", strconv.Itoa(p.PID))
	v.Set("c", strconv.Itoa(p.Concurrency))
	if p.Shared > 0 {
		v.Set("s", strconv.Itoa(p.Shared))
	}
	v.Set("t", strconv.FormatInt(p.Started.UnixMilli(), 10))
	name := markPresencePrefix + p.ID + "?" + v.Encode()
	if len(name) > backend.MaxMarkName && p.Host != "" {
		// A host name that escapes to more than a mark holds: cut it.
		_, size := utf8.DecodeLastRuneInString(p.Host)
		p.Host = p.Host[:len(p.Host)-size]
		return presenceName(p)
	}
	return name
}

// parsePresence reads a presence mark name; ok is false for one it cannot
// read.
func parsePresence(name string) (p Presence, ok bool) {
	rest, found := strings.CutPrefix(name, markPresencePrefix)
	if !found {
		return p, false
	}
	id, query, found := strings.Cut(rest, "?")
	if !found || id == "" {
		return p, false
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return p, false
	}
	p.ID = cleanText(id, 64)
	p.Host = cleanText(v.Get("h"), maxPresenceHost)
	p.PID, _ = strconv.Atoi(v.Get("p"))
	p.Concurrency, _ = strconv.Atoi(v.Get("c"))
	p.Shared, _ = strconv.Atoi(v.Get("s"))
	ms, err := strconv.ParseInt(v.Get("t"), 10, 64)
	if err != nil {
		return p, false
	}
	p.Started = time.UnixMilli(ms)
	return p, true
}

// cleanText makes s printable: invalid UTF-8 and control characters become
// U+FFFD, and it is cut to at most limit bytes on a rune boundary.
func cleanText(s string, limit int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > limit {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// presence keeps this Run's records: one mark per queue served, and one
// per schedule in the schedule's queue.
type presence struct {
	w       *Worker
	marks   backend.Marker
	records []record
	tp      *throughputRecorder // nil without queues
	every   time.Duration
	cancel  context.CancelFunc
	done    chan struct{}
}

// record is a presence mark: its queue and name. A schedule's record is
// shared by every process that runs the same schedule: it is left to
// expire rather than deleted when one of them stops.
type record struct {
	queue, name string
	shared      bool
}

// prepareRecords gives this Run its id and, when the worker records its
// presence, a throughput recorder for its jobs' outcomes. Run calls it
// before any job starts.
func (w *Worker) prepareRecords() {
	var id [8]byte
	_, _ = rand.Read(id[:])
	w.runID = hex.EncodeToString(id[:])
	if w.cfg.Presence < 0 || len(w.cfg.Queues) == 0 {
		return
	}
	if lister, ok := presenceLister(w.c); ok {
		w.tp = newThroughputRecorder(lister, w.runID, w.log)
	}
}

// startPresence records the worker in each queue it serves and renews the
// records until stop; nil when presence is off or the driver cannot list
// marks (nobody could read the records).
func (w *Worker) startPresence(ctx context.Context) *presence {
	if w.cfg.Presence < 0 || len(w.cfg.Queues) == 0 && len(w.schedules) == 0 {
		return nil
	}
	lister, ok := presenceLister(w.c)
	if !ok {
		return nil
	}
	host, _ := os.Hostname()
	base := Presence{
		ID:      w.runID,
		Host:    cleanText(host, maxPresenceHost),
		PID:     os.Getpid(),
		Shared:  max(w.cfg.Concurrency, 0),
		Started: time.Now(),
	}
	var records []record
	for q, qc := range w.cfg.Queues {
		p := base
		p.Concurrency = qc.Concurrency
		records = append(records, record{queue: q, name: presenceName(p)})
	}
	for _, s := range w.schedules {
		name := scheduleName(s)
		if len(name) > backend.MaxMarkName {
			w.log.Warn("fila worker: a schedule's settings are too long to record; it runs, but is not listed", slog.String("schedule", s.Name), slog.Int("bytes", len(name)), slog.Int("max", backend.MaxMarkName))
			continue
		}
		records = append(records, record{queue: s.Queue, name: name, shared: true})
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ps := &presence{w: w, marks: lister, records: records, tp: w.tp, every: w.cfg.Presence, cancel: cancel, done: make(chan struct{})}
	go ps.run(pctx)
	return ps
}

func (ps *presence) run(ctx context.Context) {
	defer close(ps.done)
	t := time.NewTicker(ps.every)
	defer t.Stop()
	for {
		ps.renew(ctx)
		ps.tp.flush(ctx, time.Now(), false)
		select {
		case <-ctx.Done():
			ps.remove()
			return
		case <-t.C:
		}
	}
}

// renew sets every record to expire presenceTTLFactor intervals from now.
func (ps *presence) renew(ctx context.Context) {
	until := time.Now().Add(presenceTTLFactor * ps.every)
	for _, r := range ps.records {
		if _, err := ps.marks.MarkSet(ctx, r.queue, r.name, until, false); err != nil && ctx.Err() == nil {
			ps.w.log.Debug("fila worker: renewing the worker's presence record failed", slog.String("queue", r.queue), slog.Any("error", err))
		}
	}
}

// remove writes the last throughput records and deletes the presence
// records, within a few seconds; those it cannot delete expire on their
// own.
func (ps *presence) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps.tp.flush(ctx, time.Now(), true)
	for _, r := range ps.records {
		if r.shared {
			continue
		}
		if err := ps.marks.MarkDelete(ctx, r.queue, r.name); err != nil {
			ps.w.log.Debug("fila worker: deleting the worker's presence record failed; it expires on its own", slog.String("queue", r.queue), slog.Any("error", err))
		}
	}
}

// stop ends the renewals, deletes the records and waits until that is done.
func (ps *presence) stop() {
	if ps == nil {
		return
	}
	ps.cancel()
	<-ps.done
}

// markSchedulePrefix starts the name of every schedule record.
const markSchedulePrefix = "schedule/"

// Schedule is a periodic job (Config.Periodic) as the workers running it
// record it in its queue, with its last and next tick.
type Schedule struct {
	// Name is Periodic.Name.
	Name string
	// Cron and Location are Periodic.Cron and its time zone's name; Every
	// is Periodic.Every. One of Cron and Every is set.
	Cron     string
	Location string
	Every    time.Duration
	// Kind is the kind of the messages it enqueues.
	Kind string
	// Last is the last tick some process enqueued (as its mark says, which
	// outlives the following tick by a minute or so); zero when none is
	// known.
	Last time.Time
	// Next is its first tick after the call; zero when the record cannot
	// be read as a schedule (its time zone is unknown here, say).
	Next time.Time
}

// ScheduleList returns the schedules whose records queue holds, sorted by
// name: those a running worker has in Config.Periodic (with Presence not
// negative), and for a few intervals those no worker runs any more. Two
// records of one name mean that processes run it with different settings.
// It needs what PresenceList needs.
func ScheduleList(ctx context.Context, c *fila.Client, queue string) ([]Schedule, error) {
	names, lister, err := listRecords(ctx, c, queue, markSchedulePrefix, "schedules")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Schedule
	for _, n := range names {
		sc, s, ok := parseScheduleRecord(queue, n)
		if !ok {
			continue
		}
		if s != nil {
			sc.Next = s.next(now)
		}
		ticks, err := lister.MarkList(ctx, queue, "periodic/"+sc.Name+"/")
		if err != nil {
			return nil, fmt.Errorf("worker: listing the ticks of schedule %q: %w", sc.Name, err)
		}
		for _, t := range ticks {
			ns, err := strconv.ParseInt(strings.TrimPrefix(t, "periodic/"+sc.Name+"/"), 10, 64)
			if err == nil && time.Unix(0, ns).After(sc.Last) {
				sc.Last = time.Unix(0, ns).UTC()
			}
		}
		out = append(out, sc)
	}
	slices.SortStableFunc(out, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// scheduleName is the record name of s: markSchedulePrefix, the name, then
// its settings as a URL query.
func scheduleName(s *schedule) string {
	v := url.Values{}
	v.Set("k", s.Message.Kind)
	if s.Cron != "" {
		v.Set("cron", s.Cron)
		v.Set("tz", s.Location.String())
	} else {
		v.Set("every", strconv.FormatInt(s.Every.Milliseconds(), 10))
	}
	return markSchedulePrefix + s.Name + "?" + v.Encode()
}

// parseScheduleRecord reads a schedule record of queue; s is the schedule
// it describes, nil when that cannot be rebuilt here.
func parseScheduleRecord(queue, name string) (sc Schedule, s *schedule, ok bool) {
	rest, _ := strings.CutPrefix(name, markSchedulePrefix)
	n, query, found := strings.Cut(rest, "?")
	if !found || fila.ValidateQueueName(n) != nil {
		return sc, nil, false
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return sc, nil, false
	}
	sc = Schedule{Name: n, Kind: cleanText(v.Get("k"), 200), Cron: cleanText(v.Get("cron"), 200), Location: cleanText(v.Get("tz"), 100)}
	p := Periodic{Name: n, Queue: queue, Cron: sc.Cron, Message: fila.Message{Kind: "k"}}
	if ms, err := strconv.ParseInt(v.Get("every"), 10, 64); err == nil && sc.Cron == "" {
		sc.Every = time.Duration(ms) * time.Millisecond
		p.Every = sc.Every
	}
	if sc.Cron != "" {
		loc, err := time.LoadLocation(sc.Location)
		if err != nil {
			return sc, nil, true
		}
		p.Location = loc
	}
	parsed, err := parseSchedule(p)
	if err != nil {
		return sc, nil, true
	}
	return sc, parsed, true
}
