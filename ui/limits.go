package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fila-go/fila"
)

// Flow control limits (fila.Client.QueueLimitsSet): the queue page shows
// them on its Limits line, with the concurrency slots held, and offers a
// form that sets them through the confirmation page like every action.

// opLimits sets or removes a queue's limits.
const opLimits = "limits"

// The limits form's fields. Empty numbers mean none; the period is
// seconds ("1", "0.5") or a duration ("500ms", "1m"), a second when
// empty. remove=1 removes every limit and takes no other field.
const (
	fieldConcurrency = "concurrency"
	fieldRate        = "rate"
	fieldPer         = "per"
	fieldBurst       = "burst"
	fieldRemove      = "remove"
)

// limitsView is the queue page's Limits line, and the form that changes
// them.
type limitsView struct {
	// Text is the limits in force, "concurrency 5 (3 held now), rate 50
	// per 1s, burst 10", or "none".
	Text string
	// NA: the driver cannot keep limits (fila.ErrUnsupported), Why says
	// so.
	NA  bool
	Why string
	// Err: reading them failed (logged), in short.
	Err string
	// Form changes them; nil in read-only mode, where the driver cannot
	// keep limits, or when they could not be read (the form would show
	// none).
	Form *limitsForm
}

// limitsForm is the form of the queue page that sets the limits: a GET to
// the confirmation page, pre-filled with the limits in force.
type limitsForm struct {
	ConfirmURL string
	// The current values as the inputs hold them; empty for none.
	Concurrency, Rate, Per, Burst string
	// RemoveURL is the confirmation of removing every limit; empty when
	// none is set.
	RemoveURL string
	// The inputs' bounds.
	MaxConcurrency, MaxRate, MaxBurst int
}

// limitsView reads queue's limits and the concurrency slots held for the
// queue page.
func (h *Handler) limitsView(ctx context.Context, queue string) limitsView {
	u, err := h.c.QueueLimitsUsage(ctx, queue)
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		return limitsView{Text: notReported, NA: true, Why: "the " + h.driver + " driver cannot keep queue limits (they need marks it can list)"}
	case err != nil:
		h.log.Warn("fila ui: reading the limits of a queue failed", "queue", queue, "error", err)
		return limitsView{Err: "could not be read: " + firstLine(err.Error(), 120)}
	}
	v := limitsView{Text: fmtLimits(u.Limits, u.Held, true)}
	if h.o.ReadOnly {
		return v
	}
	l := u.Limits
	f := &limitsForm{ConfirmURL: h.prefix + "/queues/" + queue + "/confirm",
		MaxConcurrency: fila.MaxConcurrencyLimit, MaxRate: fila.MaxRateLimit, MaxBurst: fila.MaxRateBurst}
	if l.Concurrency > 0 {
		f.Concurrency = strconv.Itoa(l.Concurrency)
	}
	if l.Rate > 0 {
		f.Rate, f.Per, f.Burst = strconv.Itoa(l.Rate), fmtPer(l.Per), strconv.Itoa(l.Burst)
	}
	if !l.IsZero() {
		f.RemoveURL = h.prefix + "/queues/" + queue + "/confirm?" + url.Values{"op": {opLimits}, fieldRemove: {"1"}}.Encode()
	}
	v.Form = f
	return v
}

// fmtLimits gives limits as the pages show them: "concurrency 5 (3 held
// now), rate 50 per 1s, burst 10", or "none"; the held count only when
// withHeld.
func fmtLimits(l fila.QueueLimits, held int, withHeld bool) string {
	if l.IsZero() {
		return "none"
	}
	var parts []string
	if l.Concurrency > 0 {
		s := "concurrency " + strconv.Itoa(l.Concurrency)
		if withHeld {
			s += fmt.Sprintf(" (%d held now)", held)
		}
		parts = append(parts, s)
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %d per %s, burst %d", l.Rate, fmtPer(l.Per), l.Burst))
	}
	return strings.Join(parts, ", ")
}

// fmtPer gives a rate's period as a duration that time.ParseDuration reads
// back: 1s, 500ms, 1.5s, 1m, 1h30m.
func fmtPer(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// parseLimits reads the limits form's fields, with fila's defaults filled
// in (a second per, a burst of one), so what is confirmed and flashed is
// what is set. Bad input returns an error matching fila.ErrInvalid that
// says what is wrong. Without a rate, the period and burst are ignored
// (the form keeps them when the rate is cleared) once they parse.
func parseLimits(v url.Values) (fila.QueueLimits, error) {
	var l fila.QueueLimits
	fields := []string{fieldConcurrency, fieldRate, fieldPer, fieldBurst}
	for _, f := range append(fields, fieldRemove) {
		if len(v[f]) > 1 {
			return l, invalidf("the form gives %s more than once", f)
		}
	}
	switch v.Get(fieldRemove) {
	case "":
	case "1":
		for _, f := range fields {
			if strings.TrimSpace(v.Get(f)) != "" {
				return l, invalidf("removing the limits takes no %s", f)
			}
		}
		return l, nil
	default:
		return l, invalidf("remove is %q, not 1", shorten(v.Get(fieldRemove)))
	}
	num := func(field, what string, max int, zero string) (int, error) {
		s := strings.TrimSpace(v.Get(field))
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, invalidf("%s %q is not a whole number", what, shorten(s))
		}
		if n < 0 || n > max {
			return 0, invalidf("%s %d must be between 0 (%s) and %d", what, n, zero, max)
		}
		return n, nil
	}
	var err error
	if l.Concurrency, err = num(fieldConcurrency, "concurrency limit", fila.MaxConcurrencyLimit, "none"); err != nil {
		return l, err
	}
	if l.Rate, err = num(fieldRate, "rate limit", fila.MaxRateLimit, "none"); err != nil {
		return l, err
	}
	if l.Burst, err = num(fieldBurst, "burst", fila.MaxRateBurst, "one"); err != nil {
		return l, err
	}
	if l.Per, err = parsePer(v.Get(fieldPer)); err != nil {
		return l, err
	}
	if l.Rate == 0 {
		l.Per, l.Burst = 0, 0
		return l, nil
	}
	if l.Per == 0 {
		l.Per = time.Second
	}
	if l.Burst == 0 {
		l.Burst = 1
	}
	if l.Per/time.Duration(l.Rate) < time.Microsecond {
		return l, invalidf("rate %d per %s is more than one a microsecond", l.Rate, fmtPer(l.Per))
	}
	return l, nil
}

// parsePer reads a rate's period: seconds ("1", "0.5") or a duration
// ("500ms", "1m"), whole milliseconds from 1ms to 24h; 0 when empty (a
// second).
func parsePer(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	in := s
	if strings.Trim(s, "0123456789.") == "" {
		in += "s" // plain seconds; ParseDuration reads decimals exactly
	}
	d, err := time.ParseDuration(in)
	if err != nil {
		return 0, invalidf("period %q is neither seconds (such as 1 or 0.5) nor a duration (such as 500ms, 10s, 1m)", shorten(s))
	}
	if d == 0 {
		return 0, nil
	}
	if d < time.Millisecond || d > 24*time.Hour || d%time.Millisecond != 0 {
		return 0, invalidf("period %s must be whole milliseconds from 1ms to 24h", shorten(s))
	}
	return d, nil
}

// shorten cuts a value typed into the form for an error message.
func shorten(s string) string { return firstLine(s, 40) }

// confirmLimits fills in v, the confirmation page of setting queue's
// limits from the query. It fails for bad limits, and where the driver
// cannot keep limits.
func (h *Handler) confirmLimits(ctx context.Context, queue string, query url.Values, v *confirmView) error {
	l, err := parseLimits(query)
	if err != nil {
		return err
	}
	cur, err := h.c.QueueLimits(ctx, queue)
	now := ""
	switch {
	case errors.Is(err, fila.ErrUnsupported):
		return err
	case err != nil:
		h.log.Warn("fila ui: reading the limits of a queue failed", "queue", queue, "error", err)
		now = "The limits in force now could not be read. "
	default:
		now = "In force now: " + fmtLimits(cur, 0, false) + ". "
	}
	if l.IsZero() {
		v.Question = fmt.Sprintf("Remove the limits of queue %s?", queue)
		v.Detail = now + "Within a few seconds every client of the broker, in every process, receives its messages without limit."
		v.Button = "Remove limits"
		v.Fields = []formField{{fieldRemove, "1"}}
		return nil
	}
	v.Question = fmt.Sprintf("Set the limits of queue %s to %s?", queue, fmtLimits(l, 0, false))
	v.Detail = now + "They replace the limits in force, and every client of the broker, in every process, obeys them within a few seconds " +
		"(this dashboard's at once): at most the concurrency limit of its messages leased at once, at most the rate handed out per period " +
		"with the burst at once after a quiet spell. A lower concurrency limit applies as running messages settle."
	v.Button = "Set limits"
	v.Fields = []formField{{fieldConcurrency, strconv.Itoa(l.Concurrency)}, {fieldRate, strconv.Itoa(l.Rate)}}
	if l.Rate > 0 {
		v.Fields = append(v.Fields, formField{fieldPer, fmtPer(l.Per)}, formField{fieldBurst, strconv.Itoa(l.Burst)})
	}
	return nil
}

// formField is a hidden field of a confirmation page's form.
type formField struct{ Name, Value string }

// setLimits is the POST of the limits action: it sets the form's limits
// and goes back to the queue page, saying what is now in force.
func (h *Handler) setLimits(ctx context.Context, w http.ResponseWriter, r *http.Request, queue string, attrs []any) {
	l, err := parseLimits(r.PostForm)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.c.QueueLimitsSet(ctx, queue, l); err != nil {
		h.fail(w, r, fmt.Errorf("setting the limits of queue %s: %w", queue, err))
		return
	}
	h.log.Info("fila ui: set queue limits", append(attrs, "limits", fmtLimits(l, 0, false))...)
	http.Redirect(w, r, h.queueURL(queue)+"?"+limitsDone(l).Encode(), http.StatusSeeOther)
}

// limitsDone is the query of the queue page after limits were set: the
// numbers only, which limitsFlash reads back.
func limitsDone(l fila.QueueLimits) url.Values {
	return url.Values{"done": {opLimits}, "c": {strconv.Itoa(l.Concurrency)}, "r": {strconv.Itoa(l.Rate)},
		"p": {strconv.FormatInt(l.Per.Milliseconds(), 10)}, "b": {strconv.Itoa(l.Burst)}}
}

// limitsFlash says what limits are in force after the action, from the
// numbers of limitsDone; numbers that make no limits fila would set give
// no details.
func limitsFlash(q url.Values) string {
	n := func(k string) int {
		i, err := strconv.Atoi(q.Get(k))
		if err != nil || i < 0 {
			return -1
		}
		return i
	}
	c, r, p, b := n("c"), n("r"), n("p"), n("b")
	l := fila.QueueLimits{Concurrency: c, Rate: r, Per: time.Duration(p) * time.Millisecond, Burst: b}
	valid := c >= 0 && c <= fila.MaxConcurrencyLimit && r >= 0 && r <= fila.MaxRateLimit &&
		(r == 0 && p == 0 && b == 0 || r > 0 && p >= 1 && p <= 24*3600*1000 && b >= 1 && b <= fila.MaxRateBurst)
	switch {
	case !valid:
		return "Set the queue's limits."
	case l.IsZero():
		return "Removed the queue's limits: within a few seconds every client receives its messages without limit."
	}
	return "Set the queue's limits: now in force " + fmtLimits(l, 0, false) + ", for every client within a few seconds."
}
