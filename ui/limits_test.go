package ui_test

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/ui"
)

// usage reads queue's limits and held slots through the client.
func usage(t testing.TB, c *fila.Client, queue string) fila.LimitsUsage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	u, err := c.QueueLimitsUsage(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var limitsTextRE = regexp.MustCompile(`<b id="limits-text">([^<]*)</b>`)

// limitsText is the queue page's Limits line, unescaped.
func limitsText(t testing.TB, body string) string {
	t.Helper()
	m := limitsTextRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no limits line in\n%s", mainText(body))
	}
	return html.UnescapeString(m[1])
}

// inputValue is the value of the input with the id in body.
func inputValue(t testing.TB, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<input[^>]*id="` + regexp.QuoteMeta(id) + `"[^>]*value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no input #%s in\n%s", id, mainText(body))
	}
	return html.UnescapeString(m[1])
}

// flash is the page's one-time message, unescaped.
func flash(body string) string {
	m := regexp.MustCompile(`<p class="flash" id="flash"[^>]*>([^<]*)</p>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// TestLimits shows and sets a queue's limits through the queue page and
// the confirmation, on every broker: none, then limits set, the slots held
// while another client of the broker holds a message, a change with a
// period typed as a duration, and the removal. Where the driver cannot
// keep limits (RabbitMQ) the page shows n/a with the reason, offers no
// form, and the action is refused.
func TestLimits(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw := b.url(t)
			c := open(t, raw)
			q := newQueue(t, c, "uilim")
			logs := testenv.NewLogRecorder()
			o := ui.Options{Prefix: "/ops", Password: "pw", User: "alice", Logger: logs.Logger()}
			if b.rabbit {
				o.Queues = []string{q}
			}
			d := newDash(t, c, o)
			d.header.Set("Authorization", "Basic "+basic("alice", "pw"))
			qp := d.get("/queues/"+q, http.StatusOK)

			if _, err := c.QueueLimitsUsage(ctx, q); errors.Is(err, fila.ErrUnsupported) {
				if !strings.Contains(qp.body, `<span class="na" id="limits-na">n/a</span> <span class="why">the `+b.name+` driver cannot keep queue limits`) {
					t.Errorf("the queue page does not show the limits as n/a with the reason:\n%s", mainText(qp.body))
				}
				for _, id := range []string{`id="limits-form"`, `id="remove-limits"`, `id="limits-text"`, "op=limits"} {
					if strings.Contains(qp.body, id) {
						t.Errorf("the queue page offers %s on a driver that cannot keep limits", id)
					}
				}
				d.get("/queues/"+q+"/confirm?op=limits&concurrency=2", http.StatusNotImplemented)
				token := html.UnescapeString(csrfRE.FindStringSubmatch(d.get("/queues/"+q+"/confirm?op=delete", http.StatusOK).body)[1])
				if r := d.post("/queues/"+q+"/limits", url.Values{"csrf": {token}, "concurrency": {"2"}}); r.status != http.StatusNotImplemented {
					t.Errorf("setting limits where the driver cannot: status %d\n%s", r.status, mainText(r.body))
				}
				if !b.rabbit {
					t.Errorf("the %s driver cannot keep limits: %v", b.name, err)
				}
				return
			} else if err != nil {
				t.Fatal(err)
			}
			if b.rabbit {
				t.Log("RabbitMQ keeps queue limits now: the n/a case is no longer tested")
			}

			// None yet: the form is empty and offers no removal.
			if got := limitsText(t, qp.body); got != "none" {
				t.Errorf("limits of a new queue shown as %q, want none", got)
			}
			if strings.Contains(qp.body, `id="limits-na"`) || strings.Contains(qp.body, `id="remove-limits"`) {
				t.Errorf("a new queue's page shows n/a or a removal:\n%s", mainText(qp.body))
			}
			for _, id := range []string{"limits-concurrency", "limits-rate", "limits-per", "limits-burst"} {
				if v := inputValue(t, qp.body, id); v != "" {
					t.Errorf("#%s of a queue without limits holds %q", id, v)
				}
			}
			fm := regexp.MustCompile(`<form method="get" action="([^"]+)" class="[^"]*" id="limits-form">`).FindStringSubmatch(qp.body)
			if fm == nil {
				t.Fatalf("no limits form:\n%s", mainText(qp.body))
			}
			confirmURL := html.UnescapeString(fm[1]) + "?"

			// Set them through the form's confirmation: the period in
			// seconds.
			set := confirmURL + url.Values{"op": {"limits"}, "concurrency": {"5"}, "rate": {"50"}, "per": {"1"}, "burst": {"10"}}.Encode()
			cp := d.get(strings.TrimPrefix(set, "/ops"), http.StatusOK)
			if want := "Set the limits of queue " + q + " to concurrency 5, rate 50 per 1s, burst 10?"; !strings.Contains(html.UnescapeString(cp.body), want) {
				t.Errorf("limits confirmation lacks %q:\n%s", want, mainText(cp.body))
			}
			if !strings.Contains(cp.body, "In force now: none.") {
				t.Errorf("limits confirmation does not say what is in force:\n%s", mainText(cp.body))
			}
			if u := usage(t, c, q); !u.Limits.IsZero() {
				t.Fatalf("the confirmation page set limits: %+v", u)
			}
			res := d.confirm(html.EscapeString(set), nil)
			if res.status != http.StatusSeeOther || !strings.HasPrefix(res.header.Get("Location"), "/ops/queues/"+q+"?") {
				t.Fatalf("set limits: status %d, location %q\n%s", res.status, res.header.Get("Location"), mainText(res.body))
			}
			want := fila.QueueLimits{Concurrency: 5, Rate: 50, Per: time.Second, Burst: 10}
			if u := usage(t, c, q); u.Limits != want || u.Held != 0 {
				t.Fatalf("after setting: %+v, want %+v and none held", u, want)
			}
			after := d.get(strings.TrimPrefix(res.header.Get("Location"), "/ops"), http.StatusOK)
			if got := flash(after.body); !strings.Contains(got, "now in force concurrency 5, rate 50 per 1s, burst 10") {
				t.Errorf("flash after setting limits: %q", got)
			}
			if got := limitsText(t, after.body); got != "concurrency 5 (0 held now), rate 50 per 1s, burst 10" {
				t.Errorf("limits shown as %q", got)
			}
			for id, v := range map[string]string{"limits-concurrency": "5", "limits-rate": "50", "limits-per": "1s", "limits-burst": "10"} {
				if got := inputValue(t, after.body, id); got != v {
					t.Errorf("#%s holds %q, want %q", id, got, v)
				}
			}
			logged := false
			for _, rec := range logs.Records() {
				if rec.Message != "fila ui: set queue limits" {
					continue
				}
				attrs := map[string]string{}
				rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
				logged = attrs["queue"] == q && attrs["user"] == "alice" && attrs["limits"] == "concurrency 5, rate 50 per 1s, burst 10"
			}
			if !logged {
				t.Errorf("setting the limits was not logged with the queue, user and limits:\n%s", logs)
			}

			// Another client of the broker holds a message under the
			// limit: the page counts its slot, until the message is acked
			// and the client closed (a client may keep a freed slot for
			// its next Receive a little while).
			enqueue(t, c, q, fila.Message{Kind: "a"}, fila.Message{Kind: "b"})
			other := open(t, raw)
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			ds, err := other.Receive(rctx, q, fila.ReceiveParams{Max: 1})
			if err != nil || len(ds) != 1 {
				t.Fatalf("receive under the limits: %v, %v", ds, err)
			}
			if got := limitsText(t, d.get("/queues/"+q, http.StatusOK).body); got != "concurrency 5 (1 held now), rate 50 per 1s, burst 10" {
				t.Errorf("limits shown as %q while a message is held", got)
			}
			if err := ds[0].Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if err := other.Close(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the page to show no slot held", func() bool {
				return limitsText(t, d.get("/queues/"+q, http.StatusOK).body) == "concurrency 5 (0 held now), rate 50 per 1s, burst 10"
			})

			// Change them, the period as a duration, the concurrency
			// cleared and the burst left to its default.
			change := confirmURL + url.Values{"op": {"limits"}, "concurrency": {""}, "rate": {"3"}, "per": {"1m"}, "burst": {""}}.Encode()
			cp = d.get(strings.TrimPrefix(change, "/ops"), http.StatusOK)
			if want := "Set the limits of queue " + q + " to rate 3 per 1m, burst 1?"; !strings.Contains(html.UnescapeString(cp.body), want) ||
				!strings.Contains(cp.body, "In force now: concurrency 5, rate 50 per 1s, burst 10.") {
				t.Errorf("limits confirmation does not say %q and what is in force:\n%s", want, mainText(cp.body))
			}
			res = d.confirm(html.EscapeString(change), nil)
			if res.status != http.StatusSeeOther {
				t.Fatalf("change limits: status %d\n%s", res.status, mainText(res.body))
			}
			want = fila.QueueLimits{Rate: 3, Per: time.Minute, Burst: 1}
			if u := usage(t, c, q); u.Limits != want || u.Held != 0 {
				t.Fatalf("after the change: %+v, want %+v", u, want)
			}
			after = d.get(strings.TrimPrefix(res.header.Get("Location"), "/ops"), http.StatusOK)
			if got := limitsText(t, after.body); got != "rate 3 per 1m, burst 1" {
				t.Errorf("limits shown as %q after the change", got)
			}
			if got := inputValue(t, after.body, "limits-concurrency"); got != "" {
				t.Errorf("#limits-concurrency holds %q without a concurrency limit", got)
			}

			// Remove them all.
			remove := link(t, after.body, "remove-limits")
			cp = d.get(strings.TrimPrefix(html.UnescapeString(remove), "/ops"), http.StatusOK)
			if !strings.Contains(cp.body, "Remove the limits of queue "+q+"?") {
				t.Errorf("removal confirmation:\n%s", mainText(cp.body))
			}
			res = d.confirm(remove, nil)
			if res.status != http.StatusSeeOther {
				t.Fatalf("remove limits: status %d\n%s", res.status, mainText(res.body))
			}
			if u := usage(t, c, q); !u.Limits.IsZero() {
				t.Fatalf("after the removal: %+v", u)
			}
			after = d.get(strings.TrimPrefix(res.header.Get("Location"), "/ops"), http.StatusOK)
			if got := flash(after.body); !strings.HasPrefix(got, "Removed the queue's limits") {
				t.Errorf("flash after the removal: %q", got)
			}
			if got := limitsText(t, after.body); got != "none" || strings.Contains(after.body, `id="remove-limits"`) {
				t.Errorf("limits shown as %q after the removal:\n%s", got, mainText(after.body))
			}
		})
	}
}

// TestLimitsRefused: bad limits are refused with a message saying what is
// wrong, on the confirmation page and on the POST, and change nothing; so
// are a read-only dashboard, and a POST without the CSRF token.
func TestLimitsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := open(t, "mem://"+unique("uilimref"))
	enqueue(t, c, "jobs", fila.Message{Kind: "k"})
	start := fila.QueueLimits{Concurrency: 2}
	if err := c.QueueLimitsSet(ctx, "jobs", start); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if u := usage(t, c, "jobs"); u.Limits != start {
			t.Fatalf("%s changed the limits: %+v", what, u.Limits)
		}
	}
	rw := newDash(t, c, ui.Options{})
	token := html.UnescapeString(csrfRE.FindStringSubmatch(rw.get("/queues/jobs/confirm?op=limits&concurrency=3", http.StatusOK).body)[1])

	for name, tc := range map[string]struct {
		form url.Values
		want string
	}{
		"a word":              {url.Values{"concurrency": {"five"}}, `concurrency limit "five" is not a whole number`},
		"a fraction":          {url.Values{"concurrency": {"1.5"}}, `concurrency limit "1.5" is not a whole number`},
		"negative":            {url.Values{"concurrency": {"-1"}}, "concurrency limit -1 must be between 0 (none) and 10000"},
		"too many":            {url.Values{"concurrency": {"10001"}}, "concurrency limit 10001 must be between 0 (none) and 10000"},
		"too fast":            {url.Values{"rate": {"100001"}}, "rate limit 100001 must be between 0 (none) and 100000"},
		"burst too large":     {url.Values{"rate": {"5"}, "burst": {"10001"}}, "burst 10001 must be between 0 (one) and 10000"},
		"a bad period":        {url.Values{"rate": {"5"}, "per": {"soon"}}, `period "soon" is neither seconds`},
		"a negative period":   {url.Values{"rate": {"5"}, "per": {"-1s"}}, "period -1s must be whole milliseconds from 1ms to 24h"},
		"a period too short":  {url.Values{"rate": {"5"}, "per": {"0.0005"}}, "period 0.0005 must be whole milliseconds from 1ms to 24h"},
		"a period too long":   {url.Values{"rate": {"5"}, "per": {"25h"}}, "period 25h must be whole milliseconds from 1ms to 24h"},
		"above a microsecond": {url.Values{"rate": {"100000"}, "per": {"1ms"}}, "rate 100000 per 1ms is more than one a microsecond"},
		"removal with limits": {url.Values{"remove": {"1"}, "concurrency": {"3"}}, "removing the limits takes no concurrency"},
		"twice":               {url.Values{"concurrency": {"3", "4"}}, "the form gives concurrency more than once"},
		"markup":              {url.Values{"concurrency": {"<script>alert(1)</script>"}}, `concurrency limit "<script>alert(1)</script>" is not a whole number`},
	} {
		f := url.Values{"op": {"limits"}}
		for k, v := range tc.form {
			f[k] = v
		}
		for _, r := range []response{
			rw.get("/queues/jobs/confirm?"+f.Encode(), http.StatusBadRequest),
			rw.post("/queues/jobs/limits", func() url.Values { f.Set("csrf", token); return f }()),
		} {
			if r.status != http.StatusBadRequest || !strings.Contains(html.UnescapeString(r.body), tc.want) {
				t.Errorf("%s: status %d, want 400 saying %q\n%s", name, r.status, tc.want, mainText(r.body))
			}
			if strings.Contains(r.body, "<script>alert") {
				t.Errorf("%s: the value typed shows unescaped", name)
			}
		}
		unchanged(name)
	}

	// Read-only: the limits show, with no form; the confirmation and the
	// POST are refused, even with a valid token of a writable dashboard.
	ro := newDash(t, c, ui.Options{ReadOnly: true})
	ro.client.Jar = rw.client.Jar
	qp := ro.get("/queues/jobs", http.StatusOK)
	if got := limitsText(t, qp.body); got != "concurrency 2 (0 held now)" {
		t.Errorf("read-only page shows the limits as %q", got)
	}
	for _, action := range []string{`id="limits-form"`, `id="remove-limits"`, "/confirm", "op=limits"} {
		if strings.Contains(qp.body, action) {
			t.Errorf("read-only page shows an action (%s)", action)
		}
	}
	ro.get("/queues/jobs/confirm?op=limits&concurrency=3", http.StatusForbidden)
	ro.get("/queues/jobs/confirm?op=limits&remove=1", http.StatusForbidden)
	for _, f := range []url.Values{{"concurrency": {"3"}}, {"remove": {"1"}}} {
		f.Set("csrf", token)
		if r := ro.post("/queues/jobs/limits", f); r.status != http.StatusForbidden || !strings.Contains(r.body, "this dashboard is read-only") {
			t.Errorf("read-only limits %v: status %d\n%s", f, r.status, mainText(r.body))
		}
	}
	unchanged("a read-only dashboard")

	// CSRF: refused without the token, with a wrong one, from another
	// browser; GET never acts.
	for name, r := range map[string]response{
		"without a token":      rw.post("/queues/jobs/limits", url.Values{"remove": {"1"}}),
		"with a wrong token":   rw.post("/queues/jobs/limits", url.Values{"remove": {"1"}, "csrf": {"x" + token}}),
		"from another browser": rw.fresh().post("/queues/jobs/limits", url.Values{"remove": {"1"}, "csrf": {token}}),
	} {
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "CSRF") {
			t.Errorf("limits %s: status %d, want 403 for the CSRF token\n%s", name, r.status, mainText(r.body))
		}
	}
	rw.get("/queues/jobs/limits?"+url.Values{"remove": {"1"}, "csrf": {token}}.Encode(), http.StatusNotFound)
	unchanged("a refused request")

	// A forged flash says nothing it was not given as numbers.
	for _, q := range []string{"done=limits&c=99999999&r=0&p=0&b=0", "done=limits&c=%3Cb%3E", "done=limits"} {
		if got := flash(rw.get("/queues/jobs?"+q, http.StatusOK).body); got != "Set the queue's limits." {
			t.Errorf("flash of %s: %q", q, got)
		}
	}

	// With the token, the same form works.
	if r := rw.post("/queues/jobs/limits", url.Values{"csrf": {token}, "concurrency": {"3"}, "rate": {"0"}, "per": {"1s"}, "burst": {"4"}}); r.status != http.StatusSeeOther {
		t.Fatalf("limits with the token: status %d\n%s", r.status, mainText(r.body))
	}
	if u := usage(t, c, "jobs"); u.Limits != (fila.QueueLimits{Concurrency: 3}) {
		t.Fatalf("limits with the token (a period and burst without a rate are ignored): %+v", u.Limits)
	}
}

// unreadableMarks is a memory driver whose marks cannot be listed.
type unreadableMarks struct{ *memory.Driver }

func (unreadableMarks) MarkList(context.Context, string, string) ([]string, error) {
	return nil, errors.New("marks unreadable: the disk is on fire\nand a second line")
}

// TestLimitsReadError: when the limits cannot be read, the queue page
// still renders, says so in short, and offers no form (it would show none
// set); the confirmation says what it could not read.
func TestLimitsReadError(t *testing.T) {
	t.Parallel()
	c, err := fila.New(unreadableMarks{memory.NewBroker(memory.BrokerOptions{}).Open()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	enqueue(t, c, "jobs", fila.Message{Kind: "k"})
	d := newDash(t, c, ui.Options{})
	qp := d.get("/queues/jobs", http.StatusOK)
	if want := `<span class="error" id="limits-error">could not be read: marks unreadable: the disk is on fire …</span>`; !strings.Contains(qp.body, want) {
		t.Errorf("the queue page does not say the limits could not be read (%s):\n%s", want, mainText(qp.body))
	}
	if got := cell(t, qp.body, "ready"); got != "1" {
		t.Errorf("ready = %q: the rest of the page should show", got)
	}
	if strings.Contains(qp.body, `id="limits-form"`) || strings.Contains(qp.body, `id="limits-text"`) {
		t.Errorf("the queue page offers a form or shows limits it could not read:\n%s", mainText(qp.body))
	}
	cp := d.get("/queues/jobs/confirm?op=limits&concurrency=3", http.StatusOK)
	if !strings.Contains(cp.body, "The limits in force now could not be read.") {
		t.Errorf("the confirmation does not say the limits could not be read:\n%s", mainText(cp.body))
	}
}
