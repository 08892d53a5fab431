package ui_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
)

// TestPauseResumeCancel pauses and resumes a queue and cancels messages by
// id through the dashboard's pages and confirmations, on every broker
// whose driver can; on the others it skips, saying so, once the pages are
// checked to offer nothing.
func TestPauseResumeCancel(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		q := newQueue(t, c, "uictl")
		// A message acked already: cancelling it finds nothing.
		acked := enqueue(t, c, q, fila.Message{Kind: "z"})[0]
		{
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 1})
			cancel()
			if err != nil || len(ds) != 1 {
				t.Fatalf("receive: %v, %v", ds, err)
			}
			if err := ds[0].Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ids := enqueue(t, c, q, fila.Message{Kind: "a", Body: []byte("one")}, fila.Message{Kind: "b", Body: []byte("two")},
			fila.Message{Kind: "c", Body: []byte("three")})
		o := ui.Options{Prefix: "/ops"}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)
		qp := d.get("/queues/"+q, http.StatusOK)
		if _, err := c.QueuePaused(ctx, q); errors.Is(err, fila.ErrUnsupported) {
			for _, id := range []string{`id="pause-queue"`, `id="resume-queue"`, `id="cancel-form"`} {
				if strings.Contains(qp.body, id) {
					t.Errorf("the queue page offers %s on a driver that cannot pause queues", id)
				}
			}
			t.Skipf("the %s driver cannot pause queues yet: %v", b.name, err)
		}
		if strings.Contains(qp.body, `id="paused-note"`) {
			t.Fatalf("a new queue shows as paused:\n%s", mainText(qp.body))
		}

		// Pause, through the confirmation.
		pause := link(t, qp.body, "pause-queue")
		cp := d.get(strings.TrimPrefix(html.UnescapeString(pause), "/ops"), http.StatusOK)
		if !strings.Contains(cp.body, "Pause queue "+q+"?") {
			t.Errorf("pause confirmation:\n%s", mainText(cp.body))
		}
		res := d.confirm(pause, nil)
		if res.status != http.StatusSeeOther || res.header.Get("Location") != "/ops/queues/"+q+"?done=pause" {
			t.Fatalf("pause: status %d, location %q\n%s", res.status, res.header.Get("Location"), mainText(res.body))
		}
		if p, err := c.QueuePaused(ctx, q); err != nil || !p {
			t.Fatalf("after the pause QueuePaused = %v, %v", p, err)
		}
		after := d.get(strings.TrimPrefix(res.header.Get("Location"), "/ops"), http.StatusOK)
		if !strings.Contains(after.body, "Paused the queue") || !strings.Contains(after.body, `id="paused-note"`) ||
			strings.Contains(after.body, `id="pause-queue"`) {
			t.Errorf("the queue page after the pause:\n%s", mainText(after.body))
		}
		if cd := card(t, d.get("/", http.StatusOK).body, q); !strings.Contains(cd, `class="badge paused"`) {
			t.Errorf("the overview does not mark the paused queue:\n%s", cd)
		}

		// Resume.
		res = d.confirm(link(t, after.body, "resume-queue"), nil)
		if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "done=resume") {
			t.Fatalf("resume: status %d, location %q\n%s", res.status, res.header.Get("Location"), mainText(res.body))
		}
		if p, err := c.QueuePaused(ctx, q); err != nil || p {
			t.Fatalf("after the resume QueuePaused = %v, %v", p, err)
		}
		after = d.get("/queues/"+q, http.StatusOK)
		if strings.Contains(after.body, `id="paused-note"`) || strings.Contains(card(t, d.get("/", http.StatusOK).body, q), "paused") {
			t.Errorf("the queue still shows as paused after the resume:\n%s", mainText(after.body))
		}

		// Cancel two messages and one acked already, pasted into the one
		// field.
		if !strings.Contains(after.body, `id="cancel-form"`) {
			if err := c.MessageCancel(ctx, q, ids[0]); errors.Is(err, fila.ErrUnsupported) {
				t.Skipf("the %s driver cannot cancel messages yet: %v", b.name, err)
			}
			t.Fatalf("no cancel form, but the client can cancel messages:\n%s", mainText(after.body))
		}
		confirm := "/ops/queues/" + q + "/confirm?" + url.Values{"op": {"cancel"}, "id": {" " + ids[0] + "  " + ids[2] + " " + acked}}.Encode()
		cp = d.get(strings.TrimPrefix(confirm, "/ops"), http.StatusOK)
		if !strings.Contains(cp.body, "Cancel 3 messages by id of queue "+q+"?") {
			t.Errorf("cancel confirmation:\n%s", mainText(cp.body))
		}
		res = d.confirm(html.EscapeString(confirm), nil)
		if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "done=cancel&n=3") {
			t.Fatalf("cancel: status %d, location %q\n%s", res.status, res.header.Get("Location"), mainText(res.body))
		}
		after = d.get(strings.TrimPrefix(res.header.Get("Location"), "/ops"), http.StatusOK)
		// Issue 35: a cancel says what it found, not "Cancelled 3".
		if want := "Cancelled: 2 waiting message(s) will be dead-lettered with reason &#34;cancelled&#34; instead of run; 1 id(s) are not pending in this queue"; !strings.Contains(after.body, want) {
			t.Errorf("the page after the cancel does not say what was found (%q):\n%s", want, mainText(after.body))
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 3})
		if err != nil || len(ds) != 1 || ds[0].ID != ids[1] {
			t.Fatalf("receive after the cancel: %v, %v; want only %s", ds, err, ids[1])
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
		page, err := c.DeadList(ctx, q, fila.DeadListParams{})
		if err != nil {
			t.Fatal(err)
		}
		reasons := map[string]string{}
		for _, l := range page.Letters {
			reasons[l.ID] = l.Reason
		}
		if len(reasons) != 2 || reasons[ids[0]] != fila.ReasonCancelled || reasons[ids[2]] != fila.ReasonCancelled {
			t.Errorf("dead letters after the cancel: %v", reasons)
		}
	})
}

// TestControlRefused checks that pause, resume and cancel are refused like
// every other action: in read-only mode (hidden, and 403 on the server),
// without a valid CSRF token or from another origin (403), and without
// ids (400); a refused request changes nothing.
func TestControlRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := open(t, "mem://"+unique("uictlref"))
	id := enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")})[0]
	rw := newDash(t, c, ui.Options{})
	token := html.UnescapeString(csrfRE.FindStringSubmatch(rw.get("/queues/jobs/confirm?op=pause", http.StatusOK).body)[1])
	paused := func() bool {
		t.Helper()
		p, err := c.QueuePaused(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Read-only: nothing offered, everything refused, even with a valid
	// token of a writable dashboard; the paused state still shows.
	ro := newDash(t, c, ui.Options{ReadOnly: true})
	ro.client.Jar = rw.client.Jar
	if err := c.QueuePause(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/queues/jobs"} {
		body := ro.get(p, http.StatusOK).body
		for _, action := range []string{"/confirm", `id="pause-queue"`, `id="resume-queue"`, `id="cancel-form"`, "Pause queue<", "Resume queue<"} {
			if strings.Contains(body, action) {
				t.Errorf("read-only page %s shows an action (%s)", p, action)
			}
		}
		if !strings.Contains(body, `class="badge paused"`) {
			t.Errorf("read-only page %s does not show the pause", p)
		}
	}
	for _, p := range []string{"/queues/jobs/confirm?op=pause", "/queues/jobs/confirm?op=resume", "/queues/jobs/confirm?op=cancel&id=" + id} {
		ro.get(p, http.StatusForbidden)
	}
	for _, op := range []string{"resume", "pause", "cancel"} {
		r := ro.post("/queues/jobs/"+op, url.Values{"csrf": {token}, "id": {id}})
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "this dashboard is read-only") {
			t.Errorf("read-only %s: status %d\n%s", op, r.status, mainText(r.body))
		}
	}
	if !paused() {
		t.Fatal("a read-only dashboard resumed the queue")
	}

	// CSRF: refused without the token, with a wrong one, from another
	// browser, cross-site.
	refused := func(name string, r response) {
		t.Helper()
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "CSRF") {
			t.Errorf("%s: status %d, want 403 for the CSRF token\n%s", name, r.status, mainText(r.body))
		}
	}
	for _, op := range []string{"resume", "cancel"} {
		form := func(tok string) url.Values { return url.Values{"csrf": {tok}, "id": {id}} }
		refused(op+" without a token", rw.post("/queues/jobs/"+op, url.Values{"id": {id}}))
		refused(op+" with a wrong token", rw.post("/queues/jobs/"+op, form("x"+token)))
		refused(op+" from another browser", rw.fresh().post("/queues/jobs/"+op, form(token)))
		refused(op+" cross-site", rw.do(http.MethodPost, rw.srv.URL+"/queues/jobs/"+op, form(token), http.Header{"Sec-Fetch-Site": {"cross-site"}}))
		// GET never acts.
		rw.get("/queues/jobs/"+op+"?"+form(token).Encode(), http.StatusNotFound)
	}
	if !paused() {
		t.Fatal("a refused resume resumed the queue")
	}
	if err := c.QueueResume(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	refused("pause without a token", rw.post("/queues/jobs/pause", url.Values{}))
	if paused() {
		t.Fatal("a refused pause paused the queue")
	}

	// Cancel needs ids, and only ids.
	for name, f := range map[string]url.Values{
		"nothing":  {},
		"blank id": {"id": {"  "}},
		"a kind":   {"id": {id}, "kind": {"k"}},
		"all":      {"id": {id}, "all": {"1"}},
		"a bad id": {"id": {"bad\x01id"}},
		"too long": {"id": {strings.Repeat("x", 200)}},
		"too many": {"id": {strings.Repeat("x ", fila.MaxReceive+1)}},
	} {
		if name != "a bad id" && name != "too long" {
			rw.get("/queues/jobs/confirm?op=cancel&"+f.Encode(), http.StatusBadRequest)
		}
		f.Set("csrf", token)
		if r := rw.post("/queues/jobs/cancel", f); r.status != http.StatusBadRequest {
			t.Errorf("cancel with %s: status %d, want 400\n%s", name, r.status, mainText(r.body))
		}
	}

	// The message was never cancelled; with the token, pause works.
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ds, err := c.Receive(rctx, "jobs", fila.ReceiveParams{})
	if err != nil || ds[0].ID != id {
		t.Fatalf("receive after the refused cancels: %v, %v", ds, err)
	}
	if err := ds[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := rw.post("/queues/jobs/pause", url.Values{"csrf": {token}}); r.status != http.StatusSeeOther || !paused() {
		t.Fatalf("pause with the token: status %d, paused %v\n%s", r.status, paused(), mainText(r.body))
	}
}
