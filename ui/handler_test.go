package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
)

// TestPagesAndActions walks every page and action on every broker: the
// overview and queue counts, dead letters listed, filtered and shown in
// full, the body download, replay of one and of a kind, purge of all, and
// queue delete refused without and done with force.
func TestPagesAndActions(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uipages")
		enqueue(t, c, q, fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":1}`)},
			fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":2}`)})
		reason := "smtp: 550 mailbox unavailable\npanic: boom\n\ngoroutine 7 [running]:\nmain.send()\n\t/app/send.go:42 +0x1d"
		welcome := kill(t, c, q, reason,
			fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":3}`), Headers: map[string]string{"trace": "abc-123"}},
			fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":4}`)})
		binary := kill(t, c, q, "bad bytes", fila.Message{Kind: "report.daily", Body: []byte{0x00, 0x01, 0x02, 0xff, 0xfe, 'A'}})

		o := ui.Options{Prefix: "/ops/fila"}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)

		// Overview: the queue's counts; n/a for what the broker does not report.
		ov := d.get("/", http.StatusOK)
		cd := card(t, ov.body, q)
		if got := cell(t, cd, "ready"); got != "2" {
			t.Errorf("overview ready = %q, want 2", got)
		}
		if got := cell(t, cd, "dead"); got != "3" {
			t.Errorf("overview dead = %q, want 3", got)
		}
		oldest := cell(t, cd, "oldest")
		if b.rabbit {
			for _, class := range []string{"oldest", "delayed", "leased"} {
				if got := cell(t, cd, class); got != "n/a" {
					t.Errorf("RabbitMQ %s = %q, want n/a", class, got)
				}
			}
			if !strings.Contains(ov.body, `id="list-note"`) {
				t.Error("RabbitMQ overview does not say the broker cannot list its queues")
			}
		} else {
			if oldest == "n/a" || oldest == "-" || oldest == "" {
				t.Errorf("overview oldest ready = %q, want an age", oldest)
			}
			if got := cell(t, cd, "delayed"); got != "0" {
				t.Errorf("overview delayed = %q, want 0", got)
			}
		}
		if !strings.Contains(cd, `href="/ops/fila/queues/`+q+`"`) {
			t.Errorf("overview card does not link the queue page under the prefix:\n%s", cd)
		}

		// Queue page: dead letters per kind, or n/a.
		qp := d.get("/queues/"+q, http.StatusOK)
		if b.rabbit {
			if !strings.Contains(qp.body, `id="kinds-na"`) {
				t.Errorf("RabbitMQ queue page does not show dead letters per kind as n/a:\n%s", mainText(qp.body))
			}
		} else {
			for _, want := range []string{`<td class="kind">email.welcome</td><td class="num">2</td>`, `<td class="kind">report.daily</td><td class="num">1</td>`} {
				if !strings.Contains(qp.body, want) {
					t.Errorf("queue page lacks %s:\n%s", want, mainText(qp.body))
				}
			}
		}
		for _, id := range []string{"replay-all", "purge-all", "delete-queue", "dead-letters"} {
			link(t, qp.body, id)
		}

		// Dead letters: all, then one kind.
		dl := d.get("/queues/"+q+"/dead", http.StatusOK)
		for _, id := range append(welcome, binary...) {
			if !strings.Contains(dl.body, ">"+id+"</a>") {
				t.Errorf("dead letter list lacks %s", id)
			}
		}
		if !strings.Contains(dl.body, "smtp: 550 mailbox unavailable …") {
			t.Errorf("dead letter list does not show the reason's first line:\n%s", mainText(dl.body))
		}
		dk := d.get("/queues/"+q+"/dead?kind=report.daily", http.StatusOK)
		if !strings.Contains(dk.body, ">"+binary[0]+"</a>") || strings.Contains(dk.body, ">"+welcome[0]+"</a>") {
			t.Errorf("dead letters of kind report.daily: want only %s:\n%s", binary[0], mainText(dk.body))
		}

		// One letter in full: the whole reason, headers, body as text.
		lp := d.get("/queues/"+q+"/dead/"+url.PathEscape(welcome[0]), http.StatusOK)
		if got := pre(t, lp.body, "reason"); got != reason {
			t.Errorf("reason shown %q, want %q", got, reason)
		}
		if got := pre(t, lp.body, "body"); got != `{"user_id":3}` {
			t.Errorf("body shown %q", got)
		}
		if !strings.Contains(lp.body, "<tr><th>trace</th><td>abc-123</td></tr>") {
			t.Errorf("letter page lacks its header:\n%s", mainText(lp.body))
		}
		// A body that is not UTF-8: a hex dump, and the bytes as a download.
		bp := d.get("/queues/"+q+"/dead/"+url.PathEscape(binary[0]), http.StatusOK)
		if got := pre(t, bp.body, "body"); !strings.HasPrefix(got, "00000000  00 01 02 ff fe 41") {
			t.Errorf("binary body shown as %q, want a hex dump", got)
		}
		raw := d.get("/queues/"+q+"/dead/"+url.PathEscape(binary[0])+"/body", http.StatusOK)
		if raw.body != "\x00\x01\x02\xff\xfeA" || !strings.HasPrefix(raw.header.Get("Content-Disposition"), "attachment") ||
			raw.header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("body download: %q, headers %v", raw.body, raw.header)
		}
		d.get("/queues/"+q+"/dead/no-such-id", http.StatusNotFound)

		// Replay one from its page, through the confirmation.
		res := d.confirm(link(t, lp.body, "replay"), nil)
		if res.status != http.StatusSeeOther {
			t.Fatalf("replay one: status %d\n%s", res.status, mainText(res.body))
		}
		loc := res.header.Get("Location")
		if !strings.HasPrefix(loc, "/ops/fila/queues/"+q+"?") {
			t.Errorf("replay redirected to %q", loc)
		}
		after := d.get(strings.TrimPrefix(loc, "/ops/fila"), http.StatusOK)
		if !strings.Contains(after.body, "Replayed 1 dead letter(s)") {
			t.Errorf("no message after the replay:\n%s", mainText(after.body))
		}
		// The same letter again (an old tab): nothing was there to replay.
		again := d.confirm(link(t, lp.body, "replay"), nil)
		if again.status != http.StatusSeeOther {
			t.Fatalf("replay again: status %d\n%s", again.status, mainText(again.body))
		}
		if ag := d.get(strings.TrimPrefix(again.header.Get("Location"), "/ops/fila"), http.StatusOK); !strings.Contains(ag.body, "Nothing was replayed") ||
			strings.Contains(ag.body, "ready again") {
			t.Errorf("replaying a letter replayed already says:\n%s", mainText(ag.body))
		}
		waitFor(t, "the replayed letter to be ready", func() bool {
			s := stats(t, c, q)
			return s.Ready == 3 && s.Dead == 2
		})

		// Replay a kind, from the dead letter list filtered by it.
		res = d.confirm(link(t, dk.body, "replay-selection"), nil)
		if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "n=1") {
			t.Fatalf("replay kind: status %d, location %q\n%s", res.status, res.header.Get("Location"), mainText(res.body))
		}
		// Purge all.
		res = d.confirm(link(t, qp.body, "purge-all"), nil)
		if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "done=purge&n=1") {
			t.Fatalf("purge all: status %d, location %q\n%s", res.status, res.header.Get("Location"), mainText(res.body))
		}
		waitFor(t, "the dead letters to be gone", func() bool {
			s := stats(t, c, q)
			return s.Ready == 4 && s.Dead == 0
		})

		// Delete: refused while the queue holds messages, done with force.
		res = d.confirm(link(t, qp.body, "delete-queue"), nil)
		if res.status != http.StatusConflict || !strings.Contains(res.body, "tick the box") {
			t.Fatalf("delete without force: status %d\n%s", res.status, mainText(res.body))
		}
		if s := stats(t, c, q); s.Ready != 4 {
			t.Fatalf("a refused delete changed the queue: %+v", s)
		}
		res = d.confirm(link(t, qp.body, "delete-queue"), url.Values{"force": {"1"}})
		if res.status != http.StatusSeeOther {
			t.Fatalf("delete with force: status %d\n%s", res.status, mainText(res.body))
		}
		gone := d.get(strings.TrimPrefix(res.header.Get("Location"), "/ops/fila"), http.StatusOK)
		if !strings.Contains(gone.body, "Deleted queue "+q+".") {
			t.Errorf("no message after the delete:\n%s", mainText(gone.body))
		}
		if s := stats(t, c, q); s.Ready+s.Dead+s.Delayed+s.Leased != 0 {
			t.Errorf("the deleted queue still holds %+v", s)
		}
	})
}

// pre returns the text of the <pre> with the id, unescaped.
func pre(t testing.TB, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<pre[^>]*id="` + id + `"[^>]*>(.*?)</pre>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no <pre id=%s> in\n%s", id, mainText(body))
	}
	return html.UnescapeString(m[1])
}

// The payloads of the escaping tests: each would run if a page put it in
// the HTML as it is.
const (
	scriptPayload = `<script>document.title='pwned';window.filaPwned=1</script>`
	imgPayload    = `"><img src=x onerror="document.title='pwned';window.filaPwned=1">`
)

// TestEscaping puts markup in every untrusted field, on every broker, and
// checks that every page shows it as text: nothing of it reaches the HTML
// as markup.
func TestEscaping(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uiesc")
		kind := `k` + imgPayload
		reason := "failed: " + scriptPayload + "\n" + imgPayload
		body := scriptPayload + imgPayload
		ids := kill(t, c, q, reason, fila.Message{Kind: kind, Body: []byte(body),
			Headers: map[string]string{`h` + imgPayload: scriptPayload}})
		o := ui.Options{}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)
		lp := d.get("/queues/"+q+"/dead/"+url.PathEscape(ids[0]), http.StatusOK)
		pages := map[string]string{
			"overview":        d.get("/", http.StatusOK).body,
			"queue":           d.get("/queues/"+q, http.StatusOK).body,
			"dead list":       d.get("/queues/"+q+"/dead", http.StatusOK).body,
			"dead kind":       d.get("/queues/"+q+"/dead?"+url.Values{"kind": {kind}}.Encode(), http.StatusOK).body,
			"letter":          lp.body,
			"confirm":         d.get(html.UnescapeString(link(t, lp.body, "replay")), http.StatusOK).body,
			"confirm by kind": d.get("/queues/"+q+"/confirm?"+url.Values{"op": {"purge"}, "kind": {kind}}.Encode(), http.StatusOK).body,
			"404":             d.get("/queues/"+q+"/dead/"+url.PathEscape(scriptPayload), http.StatusNotFound).body,
			"confirm cancel":  d.get("/queues/"+q+"/confirm?"+url.Values{"op": {"cancel"}, "id": {scriptPayload}}.Encode(), http.StatusOK).body,
			"confirm cancels": d.get("/queues/"+q+"/confirm?"+url.Values{"op": {"cancel"}, "id": {imgPayload, scriptPayload}}.Encode(), http.StatusOK).body,
		}
		for name, p := range pages {
			for _, bad := range []string{"<script>document", "<img src=x", `"><img`} {
				if strings.Contains(p, bad) {
					t.Errorf("%s page holds %q unescaped:\n%s", name, bad, mainText(p))
				}
			}
		}
		if got := pre(t, lp.body, "reason"); got != reason {
			t.Errorf("reason shown as %q, want %q", got, reason)
		}
		if got := pre(t, lp.body, "body"); got != body {
			t.Errorf("body shown as %q, want %q", got, body)
		}
		m := regexp.MustCompile(`<dd class="kind" id="letter-kind">([^<]*)</dd>`).FindStringSubmatch(lp.body)
		if m == nil || html.UnescapeString(m[1]) != kind {
			t.Errorf("kind shown as %q, want %q", m, kind)
		}
	})
}
