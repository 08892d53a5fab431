package ui_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/ui"
)

// startDiamond starts a diamond workflow (testenv.StartDiamond) whose
// bodies are markup, on queues deleted when the test ends, or skips the
// test when the driver cannot run workflows.
func startDiamond(t *testing.T, c *fila.Client, b broker) testenv.Diamond {
	t.Helper()
	return testenv.StartDiamond(t, c, b.name, unique("wf"), newQueue(t, c, "wfq1"), newQueue(t, c, "wfq2"),
		func(step string) []byte { return []byte("<script>alert('" + step + "')</script>") })
}

// stepCell is what a workflow page shows of a step.
type stepCell struct {
	status, attempt, after, message, note string
}

var (
	stepRowRE = regexp.MustCompile(`(?s)<tr data-step="([^"]+)">(.*?)</tr>`)
	statusRE  = regexp.MustCompile(`<span class="badge step-[a-z]+">([^<]*)</span>`)
	attemptRE = regexp.MustCompile(`<td class="num attempt">([^<]*)</td>`)
	afterRE   = regexp.MustCompile(`<td class="id after"[^>]*>([^<]*)</td>`)
	noteRE    = regexp.MustCompile(`(?s)<td class="reason note-cell">(.*?)</td>`)
	tagRE     = regexp.MustCompile(`<[^>]+>`)
)

// stepCells parses the steps table of a workflow page, by step name; the
// note is the cell's HTML (escaped text, with its markup).
func stepCells(t *testing.T, body string) map[string]stepCell {
	t.Helper()
	cells := map[string]stepCell{}
	for _, m := range stepRowRE.FindAllStringSubmatch(body, -1) {
		var c stepCell
		if s := statusRE.FindStringSubmatch(m[2]); s != nil {
			c.status = s[1]
		}
		if s := attemptRE.FindStringSubmatch(m[2]); s != nil {
			c.attempt = s[1]
		}
		if s := afterRE.FindStringSubmatch(m[2]); s != nil {
			c.after = s[1]
		}
		if s := noteRE.FindStringSubmatch(m[2]); s != nil {
			c.note = s[1]
		}
		c.message = m[2]
		cells[m[1]] = c
	}
	if len(cells) == 0 {
		t.Fatalf("no steps table in\n%s", mainText(body))
	}
	return cells
}

// TestWorkflowPages shows a diamond workflow in progress on every broker:
// the list, each step's status, a dead step's reason escaped and the step
// it blocks, the cancel through its confirmation dead-lettering the
// pending step, and the 404 of an unknown id.
func TestWorkflowPages(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		w := startDiamond(t, c, b)
		ready, running := "ready", "running"
		if b.rabbit { // it cannot list messages to tell them apart
			ready, running = "queued", "queued"
		}
		d := newDash(t, c, ui.Options{Prefix: "/ops"})

		// The navigation links the list, which links the workflow (where
		// the broker lists queues; elsewhere it says so).
		ov := d.get("/", http.StatusOK)
		if got := link(t, ov.body, "nav-workflows"); got != "/ops/workflows" {
			t.Errorf("navigation links the workflows at %q", got)
		}
		list := d.get("/workflows", http.StatusOK)
		wfURL := "/ops/workflows/" + w.ID
		if b.rabbit {
			if !strings.Contains(list.body, `id="workflows-note"`) || !strings.Contains(list.body, "cannot list its queues") {
				t.Errorf("the workflows page on RabbitMQ does not say it cannot list them:\n%s", mainText(list.body))
			}
		} else if !strings.Contains(list.body, `<a href="`+wfURL+`">`+w.ID+`</a>`) {
			t.Errorf("the workflows page does not link %s:\n%s", w.ID, mainText(list.body))
		}
		// The find form opens it by id, on every broker.
		if r := d.get("/workflows?id="+w.ID, http.StatusSeeOther); r.header.Get("Location") != wfURL {
			t.Errorf("find by id redirects to %q, want %q", r.header.Get("Location"), wfURL)
		}

		// A acked: B and C released; B running, C waiting, D pending.
		if err := testenv.ReceiveStep(t, c, w.Q1, w.Msg["A"]).Ack(ctx); err != nil {
			t.Fatal(err)
		}
		dB := testenv.ReceiveStep(t, c, w.Q1, w.Msg["B"])
		page := d.get("/workflows/"+w.ID, http.StatusOK)
		cells := stepCells(t, page.body)
		for name, want := range map[string]string{"A": "done", "B": running, "C": ready, "D": "pending"} {
			if cells[name].status != want {
				t.Errorf("step %s shows %q, want %q (A acked, B received)", name, cells[name].status, want)
			}
		}
		if cells["D"].after != "B, C" || cells["A"].after != "-" {
			t.Errorf("after cells: A %q, D %q", cells["A"].after, cells["D"].after)
		}
		if !b.rabbit {
			if cells["B"].attempt != "1" {
				t.Errorf("running step B shows attempt %q, want 1", cells["B"].attempt)
			}
			if want := `<a href="/ops/queues/` + w.Q1 + `/messages/` + w.Msg["B"] + `">`; !strings.Contains(cells["B"].message, want) {
				t.Errorf("running step B does not link its message (%s):\n%s", want, cells["B"].message)
			}
		}
		if !strings.Contains(page.body, `id="cancel-workflow"`) || !strings.Contains(page.body, `<dd id="workflow-cancelled">no</dd>`) {
			t.Errorf("the page of a running workflow:\n%s", mainText(page.body))
		}

		// C dies with markup in its reason: shown as text, and D blocked
		// by it.
		if err := testenv.ReceiveStep(t, c, w.Q2, w.Msg["C"]).Dead(ctx, "<script>x</script>"); err != nil {
			t.Fatal(err)
		}
		page = d.get("/workflows/"+w.ID, http.StatusOK)
		if strings.Contains(page.body, "<script>x") || !strings.Contains(page.body, "&lt;script&gt;x&lt;/script&gt;") {
			t.Errorf("the dead reason is not escaped:\n%s", mainText(page.body))
		}
		cells = stepCells(t, page.body)
		if c := cells["C"]; c.status != "dead" || c.attempt != "1" || html.UnescapeString(tagRE.ReplaceAllString(c.note, "")) != "<script>x</script>" ||
			!strings.Contains(c.message, `<a href="/ops/queues/`+w.Q2+`/dead/`+w.Msg["C"]+`">`) {
			t.Errorf("dead step C: %+v", c)
		}
		if c := cells["D"]; c.status != "pending" || tagRE.ReplaceAllString(c.note, "") != "blocked by C" {
			t.Errorf("step D after C died: %+v", c)
		}
		if !strings.Contains(page.body, `id="blocked-note"`) {
			t.Errorf("the page does not say how to unblock the workflow:\n%s", mainText(page.body))
		}

		// Cancel, through the confirmation: D is dead-lettered with the
		// cancel's reason, B at its ack.
		confirm := d.get(strings.TrimPrefix(html.UnescapeString(link(t, page.body, "cancel-workflow")), "/ops"), http.StatusOK)
		if want := "Cancel workflow " + w.ID + " (4 steps: 1 done, 1 " + running + ", 1 pending, 1 dead)?"; !strings.Contains(confirm.body, want) {
			t.Errorf("the confirmation does not ask %q:\n%s", want, mainText(confirm.body))
		}
		if st, err := c.WorkflowShow(ctx, w.ID); err != nil || st.Cancelled {
			t.Fatalf("the confirmation page cancelled the workflow: %v, %v", st.Cancelled, err)
		}
		res := d.confirm(link(t, page.body, "cancel-workflow"), nil)
		loc := res.header.Get("Location")
		if res.status != http.StatusSeeOther || !strings.HasPrefix(loc, wfURL+"?") || !strings.Contains(loc, "done=cancel") {
			t.Fatalf("cancel: status %d, location %q\n%s", res.status, loc, mainText(res.body))
		}
		after := d.get(strings.TrimPrefix(loc, "/ops"), http.StatusOK)
		if want := "Cancelled the workflow: 1 pending step(s) dead-lettered with reason &#34;workflow cancelled&#34;; 1 step(s) in their queues "; !strings.Contains(after.body, want) {
			t.Errorf("the page after the cancel does not say what it found (%q):\n%s", want, mainText(after.body))
		}
		pg, err := c.DeadList(ctx, w.Q2, fila.DeadListParams{IDs: []string{w.Msg["D"]}, Limit: 1})
		if err != nil || len(pg.Letters) != 1 || pg.Letters[0].Reason != fila.ReasonWorkflowCancelled {
			t.Errorf("dead letters of %s after the cancel: %+v, %v; want step D with reason %q", w.Q2, pg.Letters, err, fila.ReasonWorkflowCancelled)
		}
		if err := dB.Ack(ctx); !errors.Is(err, fila.ErrCancelled) {
			t.Errorf("ack of running step B after the cancel: %v, want ErrCancelled", err)
		}
		page = d.get("/workflows/"+w.ID, http.StatusOK)
		cells = stepCells(t, page.body)
		if strings.Contains(page.body, `id="cancel-workflow"`) || strings.Contains(page.body, `id="blocked-note"`) ||
			!strings.Contains(page.body, `<span class="badge step-dead">cancelled</span>`) ||
			cells["D"].status != "dead" || tagRE.ReplaceAllString(cells["D"].note, "") != fila.ReasonWorkflowCancelled || cells["B"].status != "dead" {
			t.Errorf("the page of the cancelled workflow:\n%s", mainText(page.body))
		}
		// A second cancel (an old confirmation page) changes nothing and
		// says so.
		res = d.confirm(html.EscapeString(wfURL+"/confirm?op=cancel"), nil)
		if loc := res.header.Get("Location"); res.status != http.StatusSeeOther ||
			!strings.Contains(d.get(strings.TrimPrefix(loc, "/ops"), http.StatusOK).body, "The workflow was cancelled already: nothing changed.") {
			t.Errorf("second cancel: status %d, location %q", res.status, loc)
		}

		// Unknown and invalid ids: 404, saying where the ids are.
		missing := unique("nowf")
		nf := d.get("/workflows/"+missing, http.StatusNotFound)
		if !strings.Contains(nf.body, "no workflow "+missing+": never started, deleted, or mistyped") {
			t.Errorf("unknown workflow page:\n%s", mainText(nf.body))
		}
		d.get("/workflows/"+missing+"/confirm?op=cancel", http.StatusNotFound)
		d.get("/workflows/bad%20id", http.StatusNotFound)
		d.get("/workflows?id=bad%2Fid", http.StatusBadRequest)
	})
}

// TestWorkflowActionsRefused: the workflow cancel is refused like every
// other action: read-only (hidden, and 403 on the server), without a valid
// CSRF token or from another origin (403), an unknown action (400), a GET
// (404); credentials are needed for the pages. A refused request changes
// nothing.
func TestWorkflowActionsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := open(t, "mem://"+unique("uiwfref"))
	w := startDiamond(t, c, brokerNamed(t, "memory"))
	cancelled := func() bool {
		t.Helper()
		st, err := c.WorkflowShow(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		return st.Cancelled
	}
	rw := newDash(t, c, ui.Options{})
	path := "/workflows/" + w.ID
	token := html.UnescapeString(csrfRE.FindStringSubmatch(rw.get(path+"/confirm?op=cancel", http.StatusOK).body)[1])
	rw.get(path+"/confirm?op=explode", http.StatusBadRequest)

	// Read-only: nothing offered, everything refused, even with a valid
	// token of a writable dashboard.
	ro := newDash(t, c, ui.Options{ReadOnly: true})
	ro.client.Jar = rw.client.Jar
	body := ro.get(path, http.StatusOK).body
	for _, action := range []string{"/confirm", `id="cancel-workflow"`, `method="post"`} {
		if strings.Contains(body, action) {
			t.Errorf("read-only workflow page shows an action (%s)", action)
		}
	}
	ro.get(path+"/confirm?op=cancel", http.StatusForbidden)
	if r := ro.post(path+"/cancel", url.Values{"csrf": {token}}); r.status != http.StatusForbidden || !strings.Contains(r.body, "this dashboard is read-only") {
		t.Errorf("read-only cancel: status %d\n%s", r.status, mainText(r.body))
	}

	// CSRF.
	refused := func(name string, r response) {
		t.Helper()
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "CSRF") {
			t.Errorf("%s: status %d, want 403 for the CSRF token\n%s", name, r.status, mainText(r.body))
		}
	}
	form := func(tok string) url.Values { return url.Values{"csrf": {tok}} }
	refused("without a token", rw.post(path+"/cancel", url.Values{}))
	refused("with a wrong token", rw.post(path+"/cancel", form("x"+token)))
	refused("from another browser", rw.fresh().post(path+"/cancel", form(token)))
	refused("cross-site", rw.do(http.MethodPost, rw.srv.URL+path+"/cancel", form(token), http.Header{"Sec-Fetch-Site": {"cross-site"}}))
	refused("cross origin", rw.do(http.MethodPost, rw.srv.URL+path+"/cancel", form(token), http.Header{"Origin": {"https://evil.example"}}))
	rw.get(path+"/cancel?"+form(token).Encode(), http.StatusNotFound)
	if cancelled() {
		t.Fatal("a refused cancel cancelled the workflow")
	}

	// Credentials: the pages need them as every other.
	const tok = "t0ken-value"
	auth := newDash(t, c, ui.Options{Token: tok})
	for _, p := range []string{"/workflows", path, path + "/confirm?op=cancel"} {
		auth.get(p, http.StatusUnauthorized)
	}
	if r := auth.post(path+"/cancel", form(token)); r.status != http.StatusUnauthorized {
		t.Errorf("cancel without credentials: status %d", r.status)
	}
	auth.header.Set("Authorization", "Bearer "+tok)
	auth.get(path, http.StatusOK)
	// A bearer script still needs the form's token: no CSRF exemption.
	if r := auth.post(path+"/cancel", url.Values{}); r.status != http.StatusForbidden {
		t.Errorf("bearer cancel without a CSRF token: status %d", r.status)
	}
	if cancelled() {
		t.Fatal("a refused cancel cancelled the workflow")
	}
	// The pages carry no inline script, and the security headers.
	for _, p := range []string{"/workflows", path, path + "/confirm?op=cancel"} {
		r := rw.get(p, http.StatusOK)
		if strings.Contains(r.body, "<script>") || r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("page %s: inline script or missing headers %v", p, r.header)
		}
	}

	// With the token, the cancel works.
	if r := rw.post(path+"/cancel", form(token)); r.status != http.StatusSeeOther || !cancelled() {
		t.Fatalf("cancel with the token: status %d, cancelled %v\n%s", r.status, cancelled(), mainText(r.body))
	}
}

// TestWorkflowsPaging: the list pages by id, 50 at a time.
func TestWorkflowsPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := open(t, "mem://"+unique("uiwfpage"))
	for i := range 51 {
		if _, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: "w" + string(rune('a'+i/26)) + string(rune('a'+i%26)),
			Steps: []fila.WorkflowStep{{Name: "s", Queue: "jobs", Message: fila.Message{Kind: "k"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	d := newDash(t, c, ui.Options{})
	first := d.get("/workflows", http.StatusOK)
	if n := strings.Count(first.body, `<a href="/workflows/w`); n != 50 || !strings.Contains(first.body, ">waa<") || strings.Contains(first.body, ">wby<") {
		t.Fatalf("first page lists %d workflows:\n%s", n, mainText(first.body))
	}
	next := d.get(html.UnescapeString(link(t, first.body, "next-page")), http.StatusOK)
	if n := strings.Count(next.body, `<a href="/workflows/w`); n != 1 || !strings.Contains(next.body, ">wby<") || strings.Contains(next.body, `id="next-page"`) {
		t.Errorf("second page:\n%s", mainText(next.body))
	}
	empty := d.get("/workflows?after=zzz", http.StatusOK)
	if !strings.Contains(empty.body, `id="no-workflows"`) {
		t.Errorf("a page past the end:\n%s", mainText(empty.body))
	}
}

// TestBrowserWorkflow follows a workflow in Chromium: from the navigation
// to the list to the workflow, a dead step's reason holding markup shown
// as text and never run, and the cancel clicked through its confirmation.
func TestBrowserWorkflow(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	ctx := context.Background()
	c := open(t, "mem://"+unique("uiwfbrowser"))
	w := startDiamond(t, c, brokerNamed(t, "memory"))
	if err := testenv.ReceiveStep(t, c, w.Q1, w.Msg["A"]).Ack(ctx); err != nil {
		t.Fatal(err)
	}
	const reason = `<script>window.pwned=1</script><img src=x onerror="window.pwned=1">`
	if err := testenv.ReceiveStep(t, c, w.Q2, w.Msg["C"]).Dead(ctx, reason); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, c, ui.Options{Refresh: -1})
	path := "/workflows/" + w.ID
	bt.open(srv.URL + "/")
	bt.click("#nav-workflows", "the workflows page", pageOf("/workflows", "#workflows"))
	bt.click("#workflows a", "the workflow's page", pageOf(path, "#steps"))
	if got := bt.text(`tr[data-step="C"] .step-reason`); got != reason {
		t.Errorf("step C's reason shows as %q, want the markup as text", got)
	}
	if got := bt.text(`tr[data-step="D"] .blocked`); got != "blocked by C" {
		t.Errorf("step D's note shows as %q", got)
	}
	if eval[bool](bt, "window.pwned === 1") {
		t.Fatal("markup in a dead reason ran")
	}
	bt.click("#cancel-workflow", "the cancel confirmation", pageOf(path+"/confirm", "#confirm"))
	if got := bt.text("#question"); !strings.HasPrefix(got, "Cancel workflow "+w.ID+" (4 steps:") {
		t.Errorf("the confirmation asks %q", got)
	}
	bt.click("#confirm", "the workflow page after the cancel", pageOf(path, "#flash"))
	if got := bt.text("#flash"); !strings.HasPrefix(got, "Cancelled the workflow: 1 pending step(s) dead-lettered") {
		t.Errorf("after the cancel the page says %q", got)
	}
	if got := bt.text(`tr[data-step="D"] .step-reason`); got != fila.ReasonWorkflowCancelled {
		t.Errorf("step D after the cancel: reason %q", got)
	}
	if eval[bool](bt, exists("#cancel-workflow")) {
		t.Error("the cancelled workflow still offers a cancel")
	}
	bt.noErrors()
}
