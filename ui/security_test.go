package ui_test

import (
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/ui"
	"github.com/fila-go/fila/worker"
)

// memQueue opens a memory broker of the test's own with one dead letter in
// queue "jobs" and returns the client and the dead letter's id.
func memQueue(t *testing.T) (*fila.Client, string) {
	t.Helper()
	c := open(t, "mem://"+unique("uisec"))
	ids := kill(t, c, "jobs", "boom", fila.Message{Kind: "job.run", Body: []byte("x")})
	return c, ids[0]
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

func TestCSRF(t *testing.T) {
	t.Parallel()
	c, id := memQueue(t)
	d := newDash(t, c, ui.Options{})
	confirm := d.get("/queues/jobs/confirm?"+url.Values{"op": {"replay"}, "id": {id}}.Encode(), http.StatusOK)
	m := csrfRE.FindStringSubmatch(confirm.body)
	if m == nil {
		t.Fatalf("no CSRF token on the confirmation page:\n%s", mainText(confirm.body))
	}
	token := html.UnescapeString(m[1])
	form := func(tok string) url.Values { return url.Values{"csrf": {tok}, "id": {id}} }

	refused := func(name string, r response) {
		t.Helper()
		if r.status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403\n%s", name, r.status, mainText(r.body))
		}
		if s := stats(t, c, "jobs"); s.Dead != 1 {
			t.Fatalf("%s changed the queue: %+v", name, s)
		}
	}
	refused("no token", d.post("/queues/jobs/replay", url.Values{"id": {id}}))
	refused("wrong token", d.post("/queues/jobs/replay", form("x"+token)))
	// Another browser (no cookie) with a token copied from this one.
	refused("token without its cookie", d.fresh().post("/queues/jobs/replay", form(token)))
	// A token another handler made for this browser's cookie: each handler
	// has its own key.
	d2 := newDash(t, c, ui.Options{})
	d2.client.Jar = d.client.Jar // cookies are per host, not port: d's cookie goes to d2
	foreign := csrfRE.FindStringSubmatch(d2.get("/queues/jobs/confirm?op=purge&all=1", http.StatusOK).body)[1]
	refused("token of another handler", d.post("/queues/jobs/replay", form(html.UnescapeString(foreign))))
	// A cross-site POST, even with the right token (browsers send
	// Sec-Fetch-Site and Origin; SameSite would withhold the cookie anyway).
	refused("cross-site", d.do(http.MethodPost, d.srv.URL+"/queues/jobs/replay", form(token), http.Header{"Sec-Fetch-Site": {"cross-site"}}))
	refused("cross origin", d.do(http.MethodPost, d.srv.URL+"/queues/jobs/replay", form(token), http.Header{"Origin": {"https://evil.example"}}))
	// GET never acts.
	d.get("/queues/jobs/replay?"+form(token).Encode(), http.StatusNotFound)
	if s := stats(t, c, "jobs"); s.Dead != 1 {
		t.Fatalf("GET on an action changed the queue: %+v", s)
	}

	// The right token from the same browser works.
	if r := d.post("/queues/jobs/replay", form(token)); r.status != http.StatusSeeOther {
		t.Fatalf("replay with the token: status %d\n%s", r.status, mainText(r.body))
	}
	if s := stats(t, c, "jobs"); s.Dead != 0 || s.Ready != 1 {
		t.Fatalf("after the replay: %+v", s)
	}
	// The cookie is HttpOnly, SameSite=Strict and scoped to the dashboard.
	pd := newDash(t, c, ui.Options{Prefix: "/fila"})
	r := pd.get("/queues/jobs/confirm?op=purge&all=1", http.StatusOK)
	ck := r.header.Get("Set-Cookie")
	for _, want := range []string{"fila_csrf=", "Path=/fila/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(ck, want) {
			t.Errorf("CSRF cookie %q lacks %s", ck, want)
		}
	}
}

func TestSelectionRequired(t *testing.T) {
	t.Parallel()
	c, id := memQueue(t)
	d := newDash(t, c, ui.Options{})
	token := csrfRE.FindStringSubmatch(d.get("/queues/jobs/confirm?op=purge&all=1", http.StatusOK).body)[1]
	for name, f := range map[string]url.Values{
		"nothing":    {},
		"all and id": {"all": {"1"}, "id": {id}},
		"empty id":   {"id": {""}},
	} {
		f.Set("csrf", token)
		if r := d.post("/queues/jobs/purge", f); r.status != http.StatusBadRequest {
			t.Errorf("purge with %s: status %d, want 400", name, r.status)
		}
		if r := d.get("/queues/jobs/confirm?op=purge&"+f.Encode(), http.StatusBadRequest); r.status != 400 {
			t.Errorf("confirm purge with %s: status %d", name, r.status)
		}
	}
	if s := stats(t, c, "jobs"); s.Dead != 1 {
		t.Fatalf("a refused purge changed the queue: %+v", s)
	}
	d.get("/queues/jobs/confirm?op=explode", http.StatusBadRequest)
	d.get("/queues/not%20a%20queue", http.StatusNotFound)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	c, _ := memQueue(t)
	const token, password = "t0ken-value", "pa55-word"
	logs := testenv.NewLogRecorder()
	opts := ui.Options{Token: token, Password: password, User: "ops", Logger: logs.Logger()}
	d := newDash(t, c, opts)
	type try struct {
		name string
		set  func(*http.Request)
		ok   bool
	}
	for _, tc := range []try{
		{"nothing", func(*http.Request) {}, false},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, true},
		{"bearer lower case", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+token) }, true},
		{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token+"x") }, false},
		{"basic", func(r *http.Request) { r.SetBasicAuth("ops", password) }, true},
		{"basic wrong user", func(r *http.Request) { r.SetBasicAuth("root", password) }, false},
		{"basic wrong password", func(r *http.Request) { r.SetBasicAuth("ops", password+"x") }, false},
		{"token as password", func(r *http.Request) { r.SetBasicAuth("ops", token) }, false},
	} {
		// A dashboard per case: five wrong credentials from one address
		// make it wait (TestWrongCredentialsSlowDown).
		d := newDash(t, c, opts)
		for _, p := range []string{"/", "/queues/jobs", "/queues/jobs/confirm?op=purge&all=1", "/nope"} {
			req, _ := http.NewRequest(http.MethodGet, d.srv.URL+p, nil)
			tc.set(req)
			res, err := d.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if got := res.StatusCode != http.StatusUnauthorized; got != tc.ok {
				t.Errorf("%s, GET %s: status %d", tc.name, p, res.StatusCode)
			}
			if !tc.ok && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: WWW-Authenticate %q, want a basic-auth challenge", tc.name, res.Header.Get("WWW-Authenticate"))
			}
		}
	}
	// The static files hold no data: the sign-in form needs them.
	d.fresh().get("/static/app.js", http.StatusOK)
	// Bearer only: the challenge names Bearer.
	bd := newDash(t, c, ui.Options{Token: token})
	if r := bd.get("/", http.StatusUnauthorized); !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("token-only challenge %q", r.header.Get("WWW-Authenticate"))
	}
	// Basic auth without User takes any user name.
	ad := newDash(t, c, ui.Options{Password: password})
	ad.header.Set("Authorization", "Basic "+basic("anyone", password))
	ad.get("/", http.StatusOK)

	// The credentials never show in pages or logs.
	d.header.Set("Authorization", "Basic "+basic("ops", password))
	token2 := csrfRE.FindStringSubmatch(d.get("/queues/jobs/confirm?op=purge&all=1", http.StatusOK).body)[1]
	d.post("/queues/jobs/purge", url.Values{"csrf": {token2}, "all": {"1"}})
	for _, p := range []string{"/", "/queues/jobs", "/queues/jobs/dead", "/nope"} {
		body := d.do(http.MethodGet, d.srv.URL+p, nil, nil).body
		if strings.Contains(body, password) || strings.Contains(body, token) {
			t.Errorf("page %s shows a credential", p)
		}
	}
	if logs.Count(slog.LevelInfo) == 0 {
		t.Error("the purge was not logged")
	}
	for _, rec := range logs.Records() {
		line := rec.Message
		rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		if strings.Contains(line, password) || strings.Contains(line, token) || strings.Contains(line, basic("ops", password)) {
			t.Errorf("a log line shows a credential: %s", line)
		}
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	c, id := memQueue(t)
	rw := newDash(t, c, ui.Options{})
	// A valid token of a writable dashboard proves nothing to a read-only one.
	token := csrfRE.FindStringSubmatch(rw.get("/queues/jobs/confirm?op=purge&all=1", http.StatusOK).body)[1]

	d := newDash(t, c, ui.Options{ReadOnly: true})
	d.client.Jar = rw.client.Jar
	for _, p := range []string{"/", "/queues/jobs", "/queues/jobs/dead", "/queues/jobs/dead/" + id} {
		body := d.get(p, http.StatusOK).body
		for _, action := range []string{"/confirm", `method="post"`, ">Replay", ">Purge", "Delete queue<"} {
			if strings.Contains(body, action) {
				t.Errorf("read-only page %s shows an action (%s)", p, action)
			}
		}
	}
	if !strings.Contains(d.get("/", http.StatusOK).body, `id="read-only"`) {
		t.Error("read-only dashboard does not say so")
	}
	d.get("/queues/jobs/confirm?op=purge&all=1", http.StatusForbidden)
	for _, op := range []string{"replay", "purge", "delete"} {
		r := d.post("/queues/jobs/"+op, url.Values{"csrf": {token}, "all": {"1"}, "force": {"1"}})
		// Refused as read-only, before the CSRF token is even looked at.
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "this dashboard is read-only") {
			t.Errorf("read-only %s: status %d\n%s", op, r.status, mainText(r.body))
		}
	}
	if s := stats(t, c, "jobs"); s.Dead != 1 {
		t.Fatalf("a read-only dashboard changed the queue: %+v", s)
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	c, id := memQueue(t)
	d := newDash(t, c, ui.Options{Password: "pw"})
	check := func(name string, r response) {
		t.Helper()
		h := r.header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", name, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline script or style", name, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" && !strings.HasPrefix(name, "static") {
			t.Errorf("%s: headers %v", name, h)
		}
	}
	check("401", d.get("/", http.StatusUnauthorized))
	d.header.Set("Authorization", "Basic "+basic("x", "pw"))
	for _, p := range []string{"/", "/queues/jobs", "/queues/jobs/dead", "/queues/jobs/dead/" + id, "/queues/jobs/confirm?op=purge&all=1"} {
		r := d.get(p, http.StatusOK)
		check(p, r)
		if strings.Contains(r.body, "<script>") || strings.Contains(r.body, " style=") || strings.Contains(r.body, " on") && regexp.MustCompile(` on[a-z]+=`).MatchString(r.body) {
			t.Errorf("page %s has inline script, style or event handler", p)
		}
	}
	check("404", d.get("/nope", http.StatusNotFound))
	js := d.get("/static/app.js", http.StatusOK)
	check("static js", js)
	if !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js served as %q", js.header.Get("Content-Type"))
	}
	d.get("/static/nope.js", http.StatusNotFound)
	body := d.get("/queues/jobs/dead/"+id+"/body", http.StatusOK)
	if !strings.Contains(body.header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("body download CSP %q", body.header.Get("Content-Security-Policy"))
	}
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	c, _ := memQueue(t)
	d := newDash(t, c, ui.Options{Prefix: "/ops/fila/"})
	r := d.do(http.MethodGet, d.srv.URL+"/ops/fila", nil, nil)
	if r.status != http.StatusMovedPermanently || r.header.Get("Location") != "/ops/fila/" {
		t.Errorf("GET /ops/fila: %d to %q", r.status, r.header.Get("Location"))
	}
	body := d.get("/", http.StatusOK).body
	for _, href := range regexp.MustCompile(`(?:href|src|action)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(href[1], "/ops/fila/") {
			t.Errorf("link %q is not below the prefix", href[1])
		}
	}
	for _, p := range []string{"/", "/ops", "/ops/filax/", "/ops/fila/queues//jobs", "/ops/fila/queues/../x"} {
		if r := d.do(http.MethodGet, d.srv.URL+p, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, r.status)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	c := open(t, "mem://"+unique("uiopt"))
	for name, o := range map[string]ui.Options{
		"prefix without slash": {Prefix: "fila"},
		"prefix with a quote":  {Prefix: `/fi"la`},
		"prefix with dot-dot":  {Prefix: "/a/../b"},
		"prefix with //":       {Prefix: "/a//b"},
		"bad queue":            {Queues: []string{"no spaces"}},
		"user, no password":    {User: "ops"},
		"tiny interval":        {SampleInterval: time.Millisecond},
		"short history":        {SampleInterval: time.Minute, History: time.Minute},
	} {
		if _, err := ui.New(c, o); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("%s: New returned %v, want fila.ErrInvalid", name, err)
		}
	}
	if _, err := ui.New(nil, ui.Options{}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	h, err := ui.New(c, ui.Options{Prefix: "/", Broker: "postgres://app:s3cret@db/app?sslpassword=k3y"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d := newDash(t, c, ui.Options{Broker: "postgres://app:s3cret@db/app?sslpassword=k3y"})
	body := d.get("/", http.StatusOK).body
	if strings.Contains(body, "s3cret") || strings.Contains(body, "k3y") || !strings.Contains(body, "postgres://app:xxxxx@db/app") {
		t.Errorf("the broker URL is not redacted:\n%s", body[:min(len(body), 1500)])
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// bareDriver hides every optional capability of the driver it wraps: no
// stats, no listing, no dead-letter management.
type bareDriver struct{ backend.Driver }

func (bareDriver) DriverName() string { return "bare" }

// TestNotReported checks that what a driver cannot report is n/a, never 0.
func TestNotReported(t *testing.T) {
	t.Parallel()
	c, err := fila.New(bareDriver{memory.Named(unique("bare")).Open()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	d := newDash(t, c, ui.Options{Queues: []string{"jobs"}, SampleInterval: 20 * time.Millisecond, History: time.Second})
	ov := d.get("/", http.StatusOK).body
	cd := card(t, ov, "jobs")
	for _, class := range []string{"ready", "delayed", "leased", "dead", "oldest"} {
		if got := cell(t, cd, class); got != "n/a" {
			t.Errorf("%s = %q without stats, want n/a", class, got)
		}
	}
	if !strings.Contains(ov, "cannot list its queues") {
		t.Error("overview does not say the driver cannot list queues")
	}
	if strings.Count(cd, `class="na">n/a`) < 1 {
		t.Errorf("run time chart is not n/a without a source:\n%s", cd)
	}
	qp := d.get("/queues/jobs", http.StatusOK).body
	if !strings.Contains(qp, `id="kinds-na"`) {
		t.Errorf("dead letters per kind not n/a:\n%s", mainText(qp))
	}
	// Dead letters: the driver has none to manage.
	if r := d.get("/queues/jobs/dead", http.StatusNotImplemented); !strings.Contains(r.body, "does not support") && !strings.Contains(r.body, "dead-letter management") {
		t.Errorf("dead list without the capability:\n%s", mainText(r.body))
	}
}

// TestCharts checks the sampler's charts: the oldest ready age and dead
// letters drawn from the stats, the p95 run time from a Recorder, and
// n/a or "no job" where nothing is reported.
func TestCharts(t *testing.T) {
	t.Parallel()
	c := open(t, "mem://"+unique("uichart"))
	enqueue(t, c, "jobs", fila.Message{Kind: "a", Body: []byte("x")})
	kill(t, c, "jobs", "boom", fila.Message{Kind: "b", Body: []byte("x")}, fila.Message{Kind: "c", Body: []byte("x")})
	rec := ui.NewRecorder()
	d := newDash(t, c, ui.Options{SampleInterval: 20 * time.Millisecond, History: 10 * time.Second, RunTimes: rec})
	waitFor(t, "the oldest ready age and dead letters charts", func() bool {
		cd := card(t, d.get("/", http.StatusOK).body, "jobs")
		return strings.Count(cd, "<polyline") >= 3 // the age, and dead letters of kinds b and c
	})
	cd := card(t, d.get("/", http.StatusOK).body, "jobs")
	if !strings.Contains(cd, "no job ended in the last 10s") {
		t.Errorf("run time chart without jobs:\n%s", cd)
	}
	for _, want := range []string{`<span class="kind">b</span> <b>1</b>`, `<span class="kind">c</span> <b>1</b>`, "last 10s"} {
		if !strings.Contains(cd, want) {
			t.Errorf("dead letters chart lacks %s:\n%s", want, cd)
		}
	}
	// Run times: 1..100ms of kind a, so p95 is 95ms. Each point looks at
	// the last four intervals only, so the runs are recorded again at each
	// try.
	rec.Record("other", "a", time.Now(), time.Hour)
	waitFor(t, "the p95 chart", func() bool {
		now := time.Now()
		for i := 1; i <= 100; i++ {
			rec.Record("jobs", "a", now, time.Duration(i)*time.Millisecond)
		}
		return strings.Contains(card(t, d.get("/", http.StatusOK).body, "jobs"), `p95 run time</span> <span class="cv">95ms</span>`)
	})
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	r := ui.NewRecorder()
	t0 := time.Now()
	for i := 1; i <= 20; i++ {
		r.Record("q", "k", t0.Add(time.Duration(i)*time.Second), time.Duration(i)*time.Millisecond)
	}
	r.Record("q", "fast", t0.Add(time.Second), time.Microsecond)
	got := r.RunTimeP95("q", t0, t0.Add(time.Minute))
	if got["k"] != 19*time.Millisecond || got["fast"] != time.Microsecond || len(got) != 2 {
		t.Errorf("p95 = %v, want k=19ms fast=1µs", got)
	}
	// The window is [from, to).
	got = r.RunTimeP95("q", t0.Add(11*time.Second), t0.Add(20*time.Second))
	if got["k"] != 19*time.Millisecond || len(got) != 1 {
		t.Errorf("p95 in window = %v, want k=19ms (11..19)", got)
	}
	if got := r.RunTimeP95("none", t0, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("p95 of an unknown queue = %v", got)
	}
	// Instrument chains after an existing hook.
	var cfg worker.Config
	prev := 0
	cfg.OnJobEnd = func(worker.JobEvent) { prev++ }
	r.Instrument(&cfg)
	cfg.OnJobEnd(worker.JobEvent{Queue: "w", Kind: "k", Started: t0, Duration: 7 * time.Millisecond})
	if prev != 1 || r.RunTimeP95("w", t0, t0.Add(time.Second))["k"] != 7*time.Millisecond {
		t.Errorf("Instrument did not chain: prev %d, p95 %v", prev, r.RunTimeP95("w", t0, t0.Add(time.Second)))
	}
	// RunTimeFunc adapts a function.
	var src ui.RunTimeSource = ui.RunTimeFunc(func(q string, from, to time.Time) map[string]time.Duration {
		return map[string]time.Duration{q: to.Sub(from)}
	})
	if got := src.RunTimeP95("x", t0, t0.Add(time.Second)); got["x"] != time.Second {
		t.Errorf("RunTimeFunc: %v", got)
	}
}

// TestConcurrentUse reads every page from many goroutines while the
// sampler runs and a worker-like loop records run times (run with -race).
// It looks for data races, not speed: the requests have no deadline of their
// own (a 10 s one for all 640 of them once ran out in CI beside the other
// packages' suites), and go test's -timeout catches a hang.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c, id := memQueue(t)
	rec := ui.NewRecorder()
	d := newDash(t, c, ui.Options{SampleInterval: 10 * time.Millisecond, History: time.Second, RunTimes: rec})
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				rec.Record("jobs", "job.run", time.Now(), time.Duration(g*i)*time.Millisecond)
				for _, p := range []string{"/", "/queues/jobs", "/queues/jobs/dead", "/queues/jobs/dead/" + id} {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.srv.URL+p, nil)
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						t.Errorf("GET %s: %d", p, res.StatusCode)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestPagingAndSelections pages through dead letters (50 a page, a kind
// filter kept across pages) and applies each selection: purge one, purge a
// kind, replay all.
func TestPagingAndSelections(t *testing.T) {
	t.Parallel()
	c := open(t, "mem://"+unique("uipage"))
	msgs := make([]fila.Message, 60)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "a", Body: []byte("x")}
	}
	as := kill(t, c, "jobs", "boom", msgs...)
	bs := kill(t, c, "jobs", "boom", fila.Message{Kind: "b", Body: []byte("x")}, fila.Message{Kind: "b", Body: []byte("x")})
	d := newDash(t, c, ui.Options{})

	first := d.get("/queues/jobs/dead?kind=a", http.StatusOK).body
	if n := strings.Count(first, `<td class="id">`); n != 50 {
		t.Fatalf("first page holds %d letters, want 50", n)
	}
	if strings.Contains(first, `id="first-page"`) {
		t.Error("the first page links to the first page")
	}
	next := html.UnescapeString(link(t, first, "next-page"))
	if !strings.Contains(next, "kind=a") {
		t.Errorf("next page %q drops the kind", next)
	}
	second := d.do(http.MethodGet, d.srv.URL+next, nil, nil).body
	if n := strings.Count(second, `<td class="id">`); n != 10 || strings.Contains(second, `id="next-page"`) {
		t.Errorf("second page holds %d letters (want 10) or links a third", n)
	}
	link(t, second, "first-page")
	seen := strings.Count(first+second, ">"+as[59]+"</a>") + strings.Count(first+second, ">"+as[0]+"</a>")
	if seen != 2 || strings.Contains(first+second, ">"+bs[0]+"</a>") {
		t.Errorf("the pages of kind a do not hold exactly the letters of kind a")
	}

	res := d.confirm(link(t, d.get("/queues/jobs/dead/"+as[0], http.StatusOK).body, "purge"), nil)
	if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "done=purge&n=1") {
		t.Fatalf("purge one: %d %q", res.status, res.header.Get("Location"))
	}
	res = d.confirm("/queues/jobs/confirm?op=purge&kind=b", nil)
	if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "n=2") {
		t.Fatalf("purge kind b: %d %q", res.status, res.header.Get("Location"))
	}
	page := d.get("/queues/jobs/confirm?op=replay&all=1", http.StatusOK).body
	if !strings.Contains(page, "Replay all dead letters (59 now) of queue jobs?") {
		t.Errorf("replay all asks:\n%s", mainText(page))
	}
	res = d.confirm("/queues/jobs/confirm?op=replay&all=1", nil)
	if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "n=59") {
		t.Fatalf("replay all: %d %q", res.status, res.header.Get("Location"))
	}
	if s := stats(t, c, "jobs"); s.Ready != 59 || s.Dead != 0 {
		t.Errorf("after the actions: %+v", s)
	}
}

// TestSamplerOutageLog checks that a sampler failing at every tick logs a
// bounded number of lines: one Warn, then Debug.
func TestSamplerOutageLog(t *testing.T) {
	t.Parallel()
	c := open(t, "mem://"+unique("uiout"))
	logs := testenv.NewLogRecorder()
	c.Close() // every stats read now fails with fila.ErrClosed
	newDash(t, c, ui.Options{Queues: []string{"jobs"}, SampleInterval: 10 * time.Millisecond, History: time.Second, Logger: logs.Logger()})
	waitFor(t, "several failed samples", func() bool { return logs.Count(slog.LevelDebug) >= 5 })
	if n := logs.Count(slog.LevelWarn); n != 1 {
		t.Errorf("%d lines at Warn or above for a short outage, want 1", n)
	}
}
