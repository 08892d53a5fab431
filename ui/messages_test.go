package ui_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/ui"
)

// pending are the messages pendingSetup leaves in a queue.
type pending struct {
	leased, retried, delayed string
	// ready: 51 messages, a page and one; the first with headers, at
	// level 2 where the driver has levels.
	ready []string
	level int
	dead  string
}

// pendingSetup fills q with a dead letter, a leased message (its first
// attempt running), one retried with reason and delayed by an hour, one
// delayed by an hour, and 51 ready ones.
func pendingSetup(t *testing.T, c *fila.Client, q string, reason string, first fila.Message) pending {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p pending
	p.dead = kill(t, c, q, "boom", fila.Message{Kind: "dead.one", Body: []byte("x")})[0]
	receive := func(want string) *fila.Delivery {
		t.Helper()
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
		if err != nil || len(ds) != 1 || ds[0].ID != want {
			t.Fatalf("received %v, %v; want %s", ds, err, want)
		}
		return ds[0]
	}
	p.leased = enqueue(t, c, q, fila.Message{Kind: "job.running", Body: []byte("running")})[0]
	receive(p.leased)
	p.retried = enqueue(t, c, q, fila.Message{Kind: "job.retry", Body: []byte("retry")})[0]
	if err := receive(p.retried).Retry(ctx, time.Hour, reason); err != nil {
		t.Fatal(err)
	}
	p.delayed = enqueue(t, c, q, fila.Message{Kind: "job.later", Body: []byte("later"), Delay: time.Hour})[0]
	if pr, ok := c.Driver().(backend.Prioritizer); ok && pr.Priorities() {
		p.level = 2
	}
	first.Priority = p.level
	msgs := []fila.Message{first}
	for range 50 {
		msgs = append(msgs, fila.Message{Kind: "bulk", Body: []byte("x")})
	}
	p.ready = enqueue(t, c, q, msgs...)
	return p
}

// canList reports whether c's driver lists messages: whether MessageList
// returns something other than fila.ErrUnsupported.
func canList(t *testing.T, c *fila.Client, q string) bool {
	t.Helper()
	_, err := c.MessageList(context.Background(), q, fila.MessageListParams{State: fila.StateReady, Limit: 1})
	if err != nil && !errors.Is(err, fila.ErrUnsupported) {
		t.Fatal(err)
	}
	return err == nil
}

var idCellRE = regexp.MustCompile(`<td class="id"><a href="[^"]*">([^<]*)</a>`)

// listed returns the ids of a messages table.
func listed(body string) []string {
	var ids []string
	for _, m := range idCellRE.FindAllStringSubmatch(body, -1) {
		ids = append(ids, html.UnescapeString(m[1]))
	}
	return ids
}

// TestMessagesPages walks the messages pages on every broker: the queue
// page's links, each state's tab with its count, paging by cursor, the
// search by id (pending, dead and unknown ids), one message in each state
// and its body download, and the cancel link; where the driver cannot
// list messages, every page says so with n/a instead of failing.
func TestMessagesPages(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uimsgs")
		o := ui.Options{Prefix: "/ops"}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)
		if !canList(t, c, q) {
			if qp := d.get("/queues/"+q, http.StatusOK).body; !strings.Contains(qp, `id="messages-na"`) || strings.Contains(qp, `id="find-form"`) {
				t.Errorf("queue page of a driver that cannot list messages:\n%s", mainText(qp))
			}
			for _, p := range []string{"/queues/" + q + "/messages", "/queues/" + q + "/messages?state=leased",
				"/queues/" + q + "/messages?id=0190aaaa-0000-7000-8000-000000000000", "/queues/" + q + "/messages/0190aaaa-0000-7000-8000-000000000000"} {
				body := d.get(p, http.StatusOK).body
				if !strings.Contains(body, `<span class="na" id="messages-na">n/a</span> <span class="why">the `+b.name+` driver cannot list`) {
					t.Errorf("%s does not say the driver cannot list messages:\n%s", p, mainText(body))
				}
			}
			return
		}
		reason := "smtp: 550 mailbox unavailable\ngoroutine 7 [running]"
		p := pendingSetup(t, c, q, reason, fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":1}`),
			Headers: map[string]string{"trace": "abc-123"}})

		// The queue page links each state and has the search form.
		qp := d.get("/queues/"+q, http.StatusOK).body
		for _, id := range []string{"messages", "messages-ready", "messages-delayed", "messages-leased"} {
			if l := link(t, qp, id); !strings.HasPrefix(l, "/ops/queues/"+q+"/messages") {
				t.Errorf("link #%s = %q", id, l)
			}
		}
		if !strings.Contains(qp, `<form method="get" action="/ops/queues/`+q+`/messages" class="filter" id="find-form">`) {
			t.Errorf("queue page lacks the search form:\n%s", mainText(qp))
		}

		// Ready, the default tab: a page of 50, then the one left.
		first := d.get("/queues/"+q+"/messages", http.StatusOK).body
		if !strings.Contains(first, `id="tab-ready" class="current"`) || !strings.Contains(first, `Ready <span class="tab-count">51</span>`) ||
			!strings.Contains(first, `Delayed <span class="tab-count">2</span>`) || !strings.Contains(first, `Leased (running) <span class="tab-count">1</span>`) {
			t.Errorf("tabs with the counts:\n%s", mainText(first))
		}
		page1 := listed(first)
		if len(page1) != 50 || strings.Contains(first, `id="first-page"`) || !strings.Contains(first, "<th>ready since</th>") {
			t.Fatalf("first ready page holds %d messages, or links to the first page:\n%s", len(page1), mainText(first))
		}
		if p.level > 0 && page1[0] != p.ready[0] {
			t.Errorf("the ready page starts with %s, want %s at level %d", page1[0], p.ready[0], p.level)
		}
		next := html.UnescapeString(link(t, first, "next-page"))
		if !strings.HasPrefix(next, "/ops/queues/"+q+"/messages?") || !strings.Contains(next, "state=ready") {
			t.Errorf("next page %q", next)
		}
		second := d.get(strings.TrimPrefix(next, "/ops"), http.StatusOK).body
		page2 := listed(second)
		if len(page2) != 1 || strings.Contains(second, `id="next-page"`) || !strings.Contains(second, `id="first-page"`) {
			t.Errorf("second ready page holds %v, or links a third, or no first page:\n%s", page2, mainText(second))
		}
		if !sameIDs(append(page1, page2...), p.ready) {
			t.Errorf("the ready pages do not hold exactly the ready messages")
		}
		row := regexp.MustCompile(`(?s)<td class="id"><a href="/ops/queues/` + q + `/messages/` + regexp.QuoteMeta(url.PathEscape(p.ready[0])) +
			`">[^<]*</a></td><td class="kind">email\.welcome</td>\s*<td class="num">` + string(rune('0'+p.level)) + `</td><td class="num">0</td>`)
		if !row.MatchString(first + second) {
			t.Errorf("the first ready message's row lacks its kind, level and attempts:\n%s", mainText(first))
		}

		// Delayed: the retried one with its attempt and error, the delayed one.
		delayed := d.get("/queues/"+q+"/messages?state=delayed", http.StatusOK).body
		if got := listed(delayed); !sameIDs(got, []string{p.retried, p.delayed}) || !strings.Contains(delayed, "<th>due</th>") ||
			!strings.Contains(delayed, `<td class="reason">smtp: 550 mailbox unavailable …</td>`) {
			t.Errorf("delayed tab lists %v:\n%s", got, mainText(delayed))
		}
		// Leased: the running one, with its lease deadline.
		leased := d.get("/queues/"+q+"/messages?state=leased", http.StatusOK).body
		if got := listed(leased); !slices.Equal(got, []string{p.leased}) || !strings.Contains(leased, "<th>lease deadline</th>") ||
			!strings.Contains(leased, `<span class="badge running">running</span>`) || !strings.Contains(leased, `<td class="num">1</td>`) {
			t.Errorf("leased tab lists %v:\n%s", got, mainText(leased))
		}
		// Unknown state: refused.
		d.get("/queues/"+q+"/messages?state=running", http.StatusBadRequest)

		// Search by id: pending ones in any state, the dead letter, an unknown id.
		unknown := "0190aaaa-0000-7000-8000-000000000000"
		found := d.get("/queues/"+q+"/messages?"+url.Values{"id": {p.leased + " " + p.delayed + " " + p.dead + " " + unknown}}.Encode(), http.StatusOK).body
		if got := listed(found); !sameIDs(got, []string{p.leased, p.delayed}) {
			t.Errorf("search finds %v, want %s and %s:\n%s", got, p.leased, p.delayed, mainText(found))
		}
		if !strings.Contains(found, `<td class="state"><span class="badge running">running</span></td>`) || !strings.Contains(found, `<td class="state">delayed</td>`) {
			t.Errorf("search results lack the states:\n%s", mainText(found))
		}
		nf := regexp.MustCompile(`(?s)<p class="muted" id="not-found">(.*?)</p>`).FindStringSubmatch(found)
		if nf == nil || !strings.Contains(nf[1], p.dead) || !strings.Contains(nf[1], unknown) {
			t.Errorf("search does not say which ids it did not find:\n%s", mainText(found))
		}
		if !strings.Contains(found, `<a class="id" href="/ops/queues/`+q+`/dead/`+url.PathEscape(p.dead)+`">`) {
			t.Errorf("search does not link the dead letter it found:\n%s", mainText(found))
		}

		// One message in each state.
		mp := d.get("/queues/"+q+"/messages/"+url.PathEscape(p.ready[0]), http.StatusOK).body
		if got := pre(t, mp, "body"); got != `{"user_id":1}` {
			t.Errorf("body shown %q", got)
		}
		if !strings.Contains(mp, "<tr><th>trace</th><td>abc-123</td></tr>") || !strings.Contains(mp, `<dd id="message-state">ready</dd>`) ||
			!strings.Contains(mp, "<dt>ready since</dt>") || !strings.Contains(mp, `<dd class="kind" id="message-kind">email.welcome</dd>`) {
			t.Errorf("message page:\n%s", mainText(mp))
		}
		lp := d.get("/queues/"+q+"/messages/"+url.PathEscape(p.leased), http.StatusOK).body
		if !strings.Contains(lp, `<span class="badge running">running</span>`) || !strings.Contains(lp, "<dt>lease deadline</dt>") ||
			!strings.Contains(lp, `<dd id="message-attempts">1</dd>`) {
			t.Errorf("leased message page:\n%s", mainText(lp))
		}
		rp := d.get("/queues/"+q+"/messages/"+url.PathEscape(p.retried), http.StatusOK).body
		if got := pre(t, rp, "last-error"); got != reason || !strings.Contains(rp, "<dt>due</dt>") {
			t.Errorf("retried message page shows error %q:\n%s", got, mainText(rp))
		}
		raw := d.get("/queues/"+q+"/messages/"+url.PathEscape(p.retried)+"/body", http.StatusOK)
		if raw.body != "retry" || !strings.HasPrefix(raw.header.Get("Content-Disposition"), "attachment") ||
			raw.header.Get("Content-Type") != "application/octet-stream" || !strings.Contains(raw.header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("body download: %q, headers %v", raw.body, raw.header)
		}
		d.get("/queues/"+q+"/messages/"+unknown, http.StatusNotFound)
		d.get("/queues/"+q+"/messages/"+url.PathEscape(p.dead), http.StatusNotFound)

		// The cancel, where the driver can: through its confirmation page.
		if _, ok := c.Driver().(backend.MarkLister); ok {
			conf := d.get(strings.TrimPrefix(html.UnescapeString(link(t, lp, "cancel")), "/ops"), http.StatusOK).body
			if !strings.Contains(conf, "Cancel message "+p.leased+" of queue "+q+"?") {
				t.Errorf("the cancel link's confirmation:\n%s", mainText(conf))
			}
		} else if strings.Contains(lp, `id="cancel"`) {
			t.Errorf("a driver that cannot cancel shows a cancel link")
		}

		// Nothing was claimed or changed by the pages.
		if s := stats(t, c, q); s.Ready != 51 || s.Delayed != 2 || s.Leased != 1 || s.Dead != 1 {
			t.Errorf("after the pages: %+v", s)
		}
	})
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestMessagesEscaping puts markup in every untrusted field of pending
// messages, on every broker, and checks that every messages page shows it
// as text; ids typed into the search or a URL are escaped too.
func TestMessagesEscaping(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uimsgesc")
		o := ui.Options{}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)
		kind := `k` + imgPayload
		reason := "failed: " + scriptPayload + "\n" + imgPayload
		body := scriptPayload + imgPayload
		pages := map[string]string{
			"search payload": d.get("/queues/"+q+"/messages?"+url.Values{"id": {scriptPayload + " " + imgPayload}}.Encode(), http.StatusOK).body,
			"state payload":  d.get("/queues/"+q+"/messages?"+url.Values{"state": {scriptPayload}}.Encode(), http.StatusBadRequest).body,
		}
		if !canList(t, c, q) {
			pages["message payload"] = d.get("/queues/"+q+"/messages/"+url.PathEscape(scriptPayload), http.StatusOK).body
		} else {
			enqueue(t, c, q, fila.Message{Kind: kind, Body: []byte(body), Headers: map[string]string{`h` + imgPayload: scriptPayload}})
			ctx := context.Background()
			ds, err := c.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
			if err != nil || len(ds) != 1 {
				t.Fatalf("receive: %v, %v", ds, err)
			}
			if err := ds[0].Retry(ctx, 0, reason); err != nil {
				t.Fatal(err)
			}
			id := ds[0].ID
			mp := d.get("/queues/"+q+"/messages/"+url.PathEscape(id), http.StatusOK).body
			pages["list"] = d.get("/queues/"+q+"/messages", http.StatusOK).body
			pages["search"] = d.get("/queues/"+q+"/messages?"+url.Values{"id": {id}}.Encode(), http.StatusOK).body
			pages["message"] = mp
			pages["message 404"] = d.get("/queues/"+q+"/messages/"+url.PathEscape(scriptPayload), http.StatusNotFound).body
			pages["body 404"] = d.get("/queues/"+q+"/messages/"+url.PathEscape(imgPayload)+"/body", http.StatusNotFound).body
			if got := pre(t, mp, "last-error"); got != reason {
				t.Errorf("last error shown as %q, want %q", got, reason)
			}
			if got := pre(t, mp, "body"); got != body {
				t.Errorf("body shown as %q, want %q", got, body)
			}
			m := regexp.MustCompile(`<dd class="kind" id="message-kind">([^<]*)</dd>`).FindStringSubmatch(mp)
			if m == nil || html.UnescapeString(m[1]) != kind {
				t.Errorf("kind shown as %q, want %q", m, kind)
			}
			if !strings.Contains(mp, `<tr><th>h&#34;&gt;&lt;img src=x onerror=&#34;document.title=&#39;pwned&#39;;window.filaPwned=1&#34;&gt;</th>`) {
				t.Errorf("header key not shown escaped:\n%s", mainText(mp))
			}
		}
		pages["queue"] = d.get("/queues/"+q, http.StatusOK).body
		for name, p := range pages {
			for _, bad := range []string{"<script>document", "<img src=x", `"><img`} {
				if strings.Contains(p, bad) {
					t.Errorf("%s page holds %q unescaped:\n%s", name, bad, mainText(p))
				}
			}
		}
		// The ids searched are shown back as text, in the field and the
		// answer.
		if sp := pages["search payload"]; canList(t, c, q) && !strings.Contains(sp, `<span class="id">&lt;script&gt;document.title=&#39;pwned&#39;;window.filaPwned=1&lt;/script&gt;</span>`) {
			t.Errorf("the searched id is not shown escaped:\n%s", mainText(sp))
		}
	})
}

// TestMessagesSecurity: on the memory driver, the messages pages carry the
// security headers and no inline script; a read-only dashboard shows no
// cancel; a driver without message listing gets n/a, never an error page;
// ids with "/" and "?" round-trip through the URLs.
func TestMessagesSecurity(t *testing.T) {
	t.Parallel()
	c := open(t, "mem://"+unique("uimsgsec"))
	id := enqueue(t, c, "jobs", fila.Message{Kind: "job.run", Body: []byte("x")})[0]
	d := newDash(t, c, ui.Options{Password: "pw"})
	d.get("/queues/jobs/messages", http.StatusUnauthorized)
	d.get("/queues/jobs/messages/"+id, http.StatusUnauthorized)
	d.get("/queues/jobs/messages/"+id+"/body", http.StatusUnauthorized)
	d.header.Set("Authorization", "Basic "+basic("x", "pw"))
	for _, p := range []string{"/queues/jobs/messages", "/queues/jobs/messages?state=delayed", "/queues/jobs/messages?id=" + id, "/queues/jobs/messages/" + id} {
		r := d.get(p, http.StatusOK)
		csp := r.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || r.header.Get("Cache-Control") != "no-store" ||
			r.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, r.header)
		}
		if strings.Contains(r.body, "<script>") || strings.Contains(r.body, " style=") || regexp.MustCompile(` on[a-z]+=`).MatchString(r.body) {
			t.Errorf("page %s has inline script, style or event handler", p)
		}
		if strings.Contains(r.body, `method="post"`) {
			t.Errorf("page %s posts a form", p)
		}
	}
	if !strings.Contains(d.get("/queues/jobs/messages/"+id, http.StatusOK).body, `id="cancel"`) {
		t.Error("the message page lacks the cancel link")
	}
	// Too many ids.
	d.get("/queues/jobs/messages?id="+strings.Repeat("x ", fila.MaxReceive+1), http.StatusBadRequest)
	// An id with "/", "?" and "#" is searched and looked up as it is.
	odd := "a/b?c=d#e"
	if body := d.get("/queues/jobs/messages?"+url.Values{"id": {odd}}.Encode(), http.StatusOK).body; !strings.Contains(body, `<span class="id">a/b?c=d#e</span>`) {
		t.Errorf("odd id not echoed:\n%s", mainText(body))
	}
	if r := d.get("/queues/jobs/messages/"+url.PathEscape(odd), http.StatusNotFound); !strings.Contains(r.body, "no ready, delayed or running message a/b?c=d#e in queue jobs") {
		t.Errorf("odd id 404:\n%s", mainText(r.body))
	}

	// Read-only: no cancel, no confirmation link.
	ro := newDash(t, c, ui.Options{ReadOnly: true})
	for _, p := range []string{"/queues/jobs", "/queues/jobs/messages", "/queues/jobs/messages/" + id} {
		if body := ro.get(p, http.StatusOK).body; strings.Contains(body, "/confirm") || strings.Contains(body, `id="cancel"`) {
			t.Errorf("read-only %s shows an action", p)
		}
	}

	// A driver without message listing: n/a on every page, never 501.
	bare, err := fila.New(bareDriver{memory.Named(unique("bare")).Open()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Close() })
	bd := newDash(t, bare, ui.Options{Queues: []string{"jobs"}})
	for _, p := range []string{"/queues/jobs", "/queues/jobs/messages", "/queues/jobs/messages?state=leased", "/queues/jobs/messages?id=x", "/queues/jobs/messages/x"} {
		if body := bd.get(p, http.StatusOK).body; !strings.Contains(body, `<span class="na" id="messages-na">n/a</span> <span class="why">the bare driver cannot list a queue&#39;s messages`) {
			t.Errorf("%s without message listing:\n%s", p, mainText(body))
		}
	}
}
