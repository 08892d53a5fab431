package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/skips"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/ui"
	"github.com/fila-go/fila/worker"
)

// The browser tests drive a headless Chromium (testenv.Chromium finds it)
// against dashboards on the real brokers. One browser serves the whole test
// binary, each test in a tab of its own.

var updateScreenshot = flag.Bool("update-screenshot", false,
	"TestBrowserScreenshot writes the overview, a queue page and its messages to docs/ui-overview.png, docs/ui-queue.png "+
		"and docs/ui-messages.png (the README's pictures) instead of temporary files")

// browser is the test binary's Chromium, started by the first test that
// needs it and stopped by TestMain.
var browser struct {
	once  sync.Once
	ctx   context.Context
	stop  func()
	err   error
	start time.Duration
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if browser.stop != nil {
		browser.stop()
	}
	skips.Report("github.com/fila-go/fila/ui")
	os.Exit(code)
}

// chromiumFlags are what a headless Chromium needs on a machine without a
// display, a sandbox or a network: without the network flags it keeps
// trying (and failing) to reach Google's services.
func chromiumFlags(path, dataDir string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.UserDataDir(dataDir),
		chromedp.WindowSize(1280, 900),
	}
}

// tab opens a tab of the shared browser for t, closed when t ends, with
// CSP violations and script errors of its pages collected for noErrors.
func tab(t *testing.T) *browserTab {
	t.Helper()
	path := testenv.Chromium(t)
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "fila-ui-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), chromiumFlags(path, dir)...)
		bctx, bcancel := chromedp.NewContext(actx)
		began := time.Now()
		// The first run starts the browser; it lives as long as bctx.
		if err := chromedp.Do(bctx); err != nil {
			browser.err = err
		}
		browser.start = time.Since(began)
		browser.ctx = bctx
		browser.stop = func() {
			bcancel()
			acancel()
			_ = os.RemoveAll(dir)
		}
	})
	if browser.err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, browser.err)
	}
	// A browser context of its own per test: cookies are shared across
	// ports of one host, and parallel tests setting their first CSRF
	// cookie at once would overwrite each other's.
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// Bound everything the test does in its tab.
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	bt := &browserTab{t: t, ctx: ctx}
	if _, err := chromedp.Call(ctx, log.Enable, struct{}{}); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	go func() {
		for e, err := range chromedp.Events(ctx, log.EntryAdded) {
			if err != nil {
				return
			}
			if e.Entry.Level == log.EntryLevelError || e.Entry.Source == log.EntrySourceSecurity {
				bt.report(string(e.Entry.Source) + ": " + e.Entry.Text)
			}
		}
	}()
	go func() {
		for e, err := range chromedp.Events(ctx, runtime.ExceptionThrown) {
			if err != nil {
				return
			}
			bt.report(fmt.Sprintf("uncaught exception: %s %v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception))
		}
	}()
	return bt
}

// browserTab is one tab, with the errors its pages reported.
type browserTab struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

func (bt *browserTab) report(msg string) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	bt.errors = append(bt.errors, msg)
}

// noErrors fails the test if a page logged an error, a CSP violation or an
// uncaught exception, except messages containing one of allowed.
func (bt *browserTab) noErrors(allowed ...string) {
	bt.t.Helper()
	bt.mu.Lock()
	defer bt.mu.Unlock()
next:
	for _, e := range bt.errors {
		for _, a := range allowed {
			if strings.Contains(e, a) {
				continue next
			}
		}
		bt.t.Errorf("the page reported: %s", e)
	}
}

// do runs actions, failing the test on an error.
func (bt *browserTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	bt.t.Helper()
	if err := chromedp.Do(bt.ctx, actions...); err != nil {
		bt.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to u and returns the HTTP status.
func (bt *browserTab) open(u string) int64 {
	bt.t.Helper()
	res, err := chromedp.Run(bt.ctx, chromedp.NavigateResponse(u))
	if err != nil {
		bt.t.Fatalf("opening %s: %v", u, err)
	}
	return res.Status
}

// openUntil opens u until expr holds on the freshly loaded page, for pages
// that do not reload themselves (Refresh < 0) and show what the server had
// when they were served.
func (bt *browserTab) openUntil(u, what, expr string) {
	bt.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		bt.open(u)
		ok, err := chromedp.Run(bt.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || bt.ctx.Err() != nil {
			bt.t.Fatalf("timed out waiting for %s (%s): last error %v; page:\n%s", what, expr, err, eval[string](bt, "document.body ? document.body.innerText : ''"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](bt *browserTab, expr string) T {
	bt.t.Helper()
	v, err := chromedp.Run(bt.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		bt.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true in the page.
func (bt *browserTab) waitJS(what, expr string) {
	bt.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(bt.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) || bt.ctx.Err() != nil {
			bt.t.Fatalf("timed out waiting for %s (%s): last error %v; page:\n%s", what, expr, err, eval[string](bt, "document.body ? document.body.innerText : ''"))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// text is the text of the first element sel matches, or "" when none does.
func (bt *browserTab) text(sel string) string {
	bt.t.Helper()
	return eval[string](bt, fmt.Sprintf(`(document.querySelector(%s) || {textContent: ""}).textContent`, jsString(sel)))
}

// exists is a JavaScript expression true when sel matches an element.
func exists(sel string) string {
	return fmt.Sprintf("document.querySelector(%s) !== null", jsString(sel))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// click clicks the element sel matches, then waits for the page that shows
// when done holds.
func (bt *browserTab) click(sel, what, done string) {
	bt.t.Helper()
	bt.waitJS(sel+" on the page", exists(sel))
	bt.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
	// The new page counts once it is parsed whole: done may hold on its
	// first bytes while the rest still streams in.
	bt.waitJS(what, "document.readyState !== 'loading' && ("+done+")")
}

// pageOf is a JavaScript expression true on the page at path once sel is on
// it.
func pageOf(path, sel string) string {
	return fmt.Sprintf("location.pathname === %s && %s", jsString(path), exists(sel))
}

// TestBrowser drives the dashboard in Chromium on five brokers: the
// overview's counts, a dead letter opened from the list, replayed by
// clicking through the confirmation, the counts changing; markup in every
// untrusted field shown as text and never run; read-only mode refusing an
// action.
func TestBrowser(t *testing.T) {
	for _, name := range []string{"memory", "postgres", "redis", "rabbitmq", "mysql", "mongo"} {
		b := brokerNamed(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			browse(t, b, open(t, b.url(t)))
		})
	}
}

func browse(t *testing.T, b broker, c *fila.Client) {
	bt := tab(t)
	q := newQueue(t, c, "uibrowse")
	enqueue(t, c, q, fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":1}`)})
	reason := "smtp: 550 mailbox unavailable\n\ngoroutine 7 [running]:\nmain.send()\n\t/app/send.go:42 +0x1d"
	letter := kill(t, c, q, reason, fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":2}`)})[0]
	xssKind, xssReason, xssBody := "k"+imgPayload, "failed: "+scriptPayload+"\n"+imgPayload, scriptPayload+imgPayload
	// The payload letter failed once before, with markup in that reason too:
	// its page shows it in the earlier errors' table.
	xssEarlier := "retried: " + imgPayload + "\n" + scriptPayload
	xss := retryThenKill(t, c, q, xssEarlier, xssReason, fila.Message{Kind: xssKind, Body: []byte(xssBody),
		Headers: map[string]string{"h" + imgPayload: scriptPayload}})

	o := ui.Options{Refresh: -1}
	if b.rabbit {
		o.Queues = []string{q}
	} else {
		// Ten minutes of the workers' throughput records, before the
		// dashboard starts.
		last := time.Now().Truncate(time.Minute).Add(-time.Minute)
		for i := range 10 {
			m := worker.Throughput{Start: last.Add(-time.Duration(i) * time.Minute), Acked: int64(60 + 30*i), Retried: 6, Dead: 1}
			m.AddWait(time.Duration(i+1) * 20 * time.Millisecond)
			if err := worker.ThroughputRecord(context.Background(), c, q, "w1", m); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := serve(t, c, o)

	// The overview shows the queue's counts.
	bt.open(srv.URL + "/")
	card := fmt.Sprintf(`section.card[data-queue=%s]`, jsString(q))
	bt.waitJS("the queue's card", exists(card))
	if r, d := bt.text(card+" dd.ready"), bt.text(card+" dd.dead"); r != "1" || d != "2" {
		t.Errorf("overview shows ready %q and dead %q, want 1 and 2", r, d)
	}
	if b.rabbit {
		if got := bt.text(card + " dd.oldest"); got != "n/a" {
			t.Errorf("RabbitMQ oldest ready shows %q, want n/a", got)
		}
	}

	// Queue page, dead letters, the letter.
	qpath := "/queues/" + q
	bt.click(card+" h2 a", "the queue page", pageOf(qpath, "#dead-letters"))
	// The throughput chart: drawn from the records, with five time ticks
	// that do not overlap and stay within the chart; n/a on RabbitMQ.
	tp := `[...document.querySelectorAll("figure.chart")].find(f => f.querySelector(".ct").textContent === "Jobs per second")`
	if b.rabbit {
		if !eval[bool](bt, tp+`.querySelector(".chart-na") !== null`) {
			t.Error("RabbitMQ's throughput chart is not n/a")
		}
	} else {
		if n := eval[float64](bt, tp+`.querySelectorAll("polyline").length`); n < 3 {
			t.Errorf("the throughput chart draws %v lines; want acked, retried and dead", n)
		}
		ticks := eval[[]any](bt, `(() => { const f = `+tp+`; const fb = f.getBoundingClientRect();
			return [...f.querySelectorAll(".ticks span")].map(s => { const r = s.getBoundingClientRect();
				return [r.left - fb.left, r.right - fb.left, fb.width, s.textContent]; }); })()`)
		if len(ticks) != 5 {
			t.Errorf("the throughput chart has %d time ticks, want 5", len(ticks))
		}
		prevRight := -1.0
		for _, tk := range ticks {
			r := tk.([]any)
			left, right, width := r[0].(float64), r[1].(float64), r[2].(float64)
			if left < prevRight || left < -0.5 || right > width+0.5 {
				t.Errorf("time tick %v overlaps the one before or leaves the chart (%v wide)", r[3], width)
			}
			prevRight = right
		}
		bt.click("#spans a", "the day's charts", `location.search === "?span=day" && `+exists("#spans b"))
		if got := eval[string](bt, tp+`.querySelector(".scale span").textContent`); !strings.HasPrefix(got, "last 24h") {
			t.Errorf("the day's throughput chart says %q, want last 24h", got)
		}
	}
	bt.click("#dead-letters", "the dead letter list", pageOf(qpath+"/dead", "table.letters"))
	lpath := qpath + "/dead/" + url.PathEscape(letter)
	bt.click(fmt.Sprintf(`a[href=%s]`, jsString(lpath)), "the dead letter's page", pageOf(lpath, "#reason"))
	if got := bt.text("#reason"); got != reason {
		t.Errorf("reason shows %q, want %q", got, reason)
	}

	// Replay it by clicking, through the confirmation.
	bt.click("#replay", "the confirmation", pageOf(qpath+"/confirm", "#confirm"))
	if got := bt.text("#question"); !strings.Contains(got, letter) {
		t.Errorf("confirmation asks %q, want it to name %s", got, letter)
	}
	bt.click("#confirm", "the queue page after the replay", pageOf(qpath, "#flash"))
	if got := bt.text("#flash"); !strings.Contains(got, "Replayed 1 dead letter(s)") {
		t.Errorf("after the replay the page says %q", got)
	}
	// The counts change (on RabbitMQ the broker's counts may lag a moment:
	// reload until they show).
	waitFor(t, "the counts after the replay", func() bool {
		bt.open(srv.URL + qpath)
		bt.waitJS("the queue page", pageOf(qpath, "dd.ready"))
		return bt.text("dd.ready") == "2" && bt.text("dd.dead") == "1"
	})

	// Markup in the kind, reason, body and headers shows as text and never
	// runs: on every page that shows them, with the page's CSP, and with
	// the CSP turned off so that only the escaping stands in the way.
	xpath := qpath + "/dead/" + url.PathEscape(xss)
	pages := []string{xpath, qpath + "/dead", qpath, "/", qpath + "/confirm?" + url.Values{"op": {"purge"}, "kind": {xssKind}}.Encode()}
	checkInert := func(bt *browserTab, csp string) {
		for _, p := range pages {
			bt.open(srv.URL + p)
			bt.waitJS(p+" loaded", "document.readyState === 'complete' && document.querySelector('main') !== null")
			got := eval[map[string]any](bt, `({title: document.title, pwned: typeof window.filaPwned,
				imgs: document.querySelectorAll('img').length, scripts: document.scripts.length})`)
			if got["pwned"] != "undefined" || strings.Contains(fmt.Sprint(got["title"]), "pwned") ||
				got["imgs"] != float64(0) || got["scripts"] != float64(1) {
				t.Errorf("%s, %s: the payload took effect: %v", p, csp, got)
			}
		}
		bt.open(srv.URL + xpath)
		bt.waitJS("the letter page", pageOf(xpath, "#body"))
		for sel, want := range map[string]string{"#reason": xssReason, "#body": xssBody, "#letter-kind": xssKind,
			"#headers th": "h" + imgPayload, "#headers td": scriptPayload, "#earlier-errors td.reason": xssEarlier,
			"#earlier-errors td.num": "1"} {
			if got := bt.text(sel); got != want {
				t.Errorf("%s: %s shows %q, want it literally: %q", csp, sel, got, want)
			}
		}
	}
	checkInert(bt, "with CSP")
	bare := tab(t)
	if _, err := chromedp.Call(bare.ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	checkInert(bare, "without CSP")

	// Read-only: no action on the page, and the server refuses them.
	ro := serve(t, c, ui.Options{Refresh: -1, ReadOnly: true, Queues: o.Queues})
	bt.open(ro.URL + xpath)
	bt.waitJS("the read-only letter page", pageOf(xpath, "#reason"))
	if eval[bool](bt, exists("#replay")) || eval[bool](bt, exists("form")) {
		t.Error("read-only letter page shows an action")
	}
	if st := bt.open(ro.URL + qpath + "/confirm?op=replay&all=1"); st != http.StatusForbidden || !strings.Contains(bt.text("#error"), "read-only") {
		t.Errorf("read-only confirmation page: status %d, says %q", st, bt.text("#error"))
	}
	posted, err := chromedp.Run(bt.ctx, chromedp.Evaluate[float64](fmt.Sprintf(
		`fetch(%s, {method: "POST", body: new URLSearchParams({all: "1", csrf: "x"})}).then(r => r.status)`, jsString(qpath+"/replay")),
		chromedp.EvalAwaitPromise))
	if err != nil || posted != http.StatusForbidden {
		t.Errorf("POST replay on a read-only dashboard from the page: status %v, %v", posted, err)
	}
	if s := stats(t, c, q); s.Dead != 1 {
		t.Errorf("the read-only dashboard changed the queue: %+v", s)
	}
	// The 403 of the refused confirmation is the one error expected.
	bt.noErrors("403")
	bare.noErrors("403")
}

// serve serves a dashboard over HTTP for the test.
func serve(t *testing.T, c *fila.Client, o ui.Options) *httptest.Server {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testenv.NewLogRecorder().Logger()
	}
	h, err := ui.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	return srv
}

// TestBrowserRefresh checks the page's script: the overview picks up new
// counts by itself, without reloading the page.
func TestBrowserRefresh(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	c := open(t, "mem://"+unique("uirefresh"))
	enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")})
	srv := serve(t, c, ui.Options{Refresh: 100 * time.Millisecond})
	bt.open(srv.URL + "/")
	card := `section.card[data-queue="jobs"]`
	bt.waitJS("the card", exists(card+" dd.ready"))
	if got := bt.text(card + " dd.ready"); got != "1" {
		t.Fatalf("ready shows %q, want 1", got)
	}
	// A mark that a reload would wipe out.
	eval[chromedp.Void](bt, "window.filaMark = 1")
	enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")}, fila.Message{Kind: "k", Body: []byte("x")})
	bt.waitJS("the new count", fmt.Sprintf(`document.querySelector(%s).textContent === "3"`, jsString(card+" dd.ready")))
	if !eval[bool](bt, "window.filaMark === 1") {
		t.Error("the page was reloaded instead of refreshed in place")
	}
	if got := bt.text("#refresh-status"); !strings.HasPrefix(got, "updated") {
		t.Errorf("refresh status %q", got)
	}
	// Pausing stops the refresh.
	bt.do("pausing", chromedp.Click(chromedp.CSS("#refresh-toggle")))
	bt.waitJS("the pause", `document.getElementById("refresh-status").textContent === "refresh paused"`)
	was := eval[string](bt, `document.body.getAttribute("data-refreshed")`)
	enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")})
	// Several refresh periods go by; nothing may change while paused. A
	// fetch already under way when the button was clicked may still land,
	// so the mark is read once the pause shows and again after.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := eval[string](bt, `document.body.getAttribute("data-refreshed")`); got != was {
			t.Fatalf("refreshed while paused (%s, then %s)", was, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bt.noErrors()
}

// TestBrowserScreenshot runs a small workload on the memory broker with a
// worker feeding a Recorder, and takes a screenshot of the overview once
// the charts are drawn. Then a worker with a daily schedule holds a few
// emails running while others wait, ready or delayed, and it takes one of
// the queue page (its workers, schedules, dead letters and messages) and
// one of the queue's running messages. With -update-screenshot it writes
// them to docs/ui-overview.png, docs/ui-queue.png and docs/ui-messages.png,
// the README's pictures; otherwise to temporary files, checked to be real
// images of pages that show what they should.
func TestBrowserScreenshot(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	c := open(t, "mem://"+unique("uishot"))
	rec := ui.NewRecorder()
	cfg := worker.Config{Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 4}, "reports": {Concurrency: 1}, "webhooks": {Concurrency: 2}},
		Logger: testenv.NewLogRecorder().Logger()}
	rec.Instrument(&cfg)
	w, err := worker.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	work := func(min, spread time.Duration, failEvery int) func(context.Context, *fila.Delivery) error {
		return func(ctx context.Context, d *fila.Delivery) error {
			select {
			case <-time.After(min + rand.N(spread)):
			case <-ctx.Done():
				return ctx.Err()
			}
			if failEvery > 0 && rand.IntN(failEvery) == 0 {
				return worker.Permanent(errors.New("upstream answered 422 Unprocessable Entity"))
			}
			return nil
		}
	}
	w.HandleFunc("email.welcome", work(10*time.Millisecond, 30*time.Millisecond, 0))
	w.HandleFunc("email.digest", work(60*time.Millisecond, 80*time.Millisecond, 12))
	w.HandleFunc("report.daily", work(150*time.Millisecond, 100*time.Millisecond, 0))
	w.HandleFunc("webhook.deliver", work(20*time.Millisecond, 60*time.Millisecond, 4))
	w.HandleFunc("webhook.retry", work(20*time.Millisecond, 20*time.Millisecond, 6))
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	// Producers: emails keep up, reports fall behind (their oldest ready
	// age climbs), webhooks fail now and then into the dead letters.
	go func() {
		defer wg.Done()
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			msgs := map[string][]fila.Message{
				"emails":   {{Kind: "email.welcome", Body: []byte("{}")}},
				"webhooks": {{Kind: "webhook.deliver", Body: []byte("{}")}},
			}
			if i%2 == 0 {
				msgs["emails"] = append(msgs["emails"], fila.Message{Kind: "email.digest", Body: []byte("{}")})
				msgs["webhooks"] = append(msgs["webhooks"], fila.Message{Kind: "webhook.retry", Body: []byte("{}")})
			}
			if i%4 == 0 {
				msgs["reports"] = []fila.Message{{Kind: "report.daily", Body: []byte("{}")}}
			}
			for q, ms := range msgs {
				if _, err := c.EnqueueBatch(ctx, q, ms); err != nil && ctx.Err() == nil {
					t.Errorf("enqueue: %v", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { stop(); wg.Wait() })

	// The hour before, as the workers recorded it in the broker: the
	// dashboard, started now, charts it.
	// (The minutes up to the current one: the screenshot may be taken in
	// the next.)
	last := time.Now().Truncate(time.Minute)
	for q, base := range map[string]float64{"emails": 40, "webhooks": 25, "reports": 4} {
		for i := range 62 {
			wave := 1 + 0.5*math.Sin(float64(i)/7)
			m := worker.Throughput{Start: last.Add(-time.Duration(61-i) * time.Minute),
				Acked: int64(60 * base * wave * (0.9 + 0.2*rand.Float64()))}
			if q == "webhooks" {
				m.Retried, m.Dead = m.Acked/8, int64(rand.IntN(20))
			}
			for range 50 {
				m.AddWait(time.Duration(float64(30*time.Millisecond) * wave * wave * (0.5 + rand.Float64())))
			}
			if err := worker.ThroughputRecord(context.Background(), c, q, "demo", m); err != nil {
				t.Fatal(err)
			}
		}
	}
	const span = 8 * time.Second
	srv := serve(t, c, ui.Options{SampleInterval: 100 * time.Millisecond, History: span, Refresh: -1, RunTimes: rec,
		Broker: "mem://demo"})
	// Let the workload fill the charts' span.
	began := time.Now()
	// The page does not reload itself (Refresh < 0): open it again until
	// the server has sampled every queue at least once.
	bt.openUntil(srv.URL+"/", "the overview", exists(`section.card[data-queue="webhooks"] svg`))
	if d := span - time.Since(began); d > 0 {
		select {
		case <-time.After(d):
		case <-bt.ctx.Done():
		}
	}
	stop() // freeze the numbers
	bt.open(srv.URL + "/")
	bt.waitJS("the charts", `document.querySelectorAll("section.card polyline").length >= 6`)
	bt.screenshot("ui-overview.png", chromedp.CaptureScreenshot())
	t.Logf("Chromium started in %v", browser.start)
	wg.Wait() // the worker has stopped and deleted its presence records

	// The emails queue goes on with a worker of its own: a daily digest
	// schedule, and sends that hang on a slow mail server, so that four run
	// (one on its second attempt) while others wait.
	kill(t, c, "emails", "smtp: 550 5.1.1 mailbox unavailable", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":4211}`)},
		fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":4380}`)})
	retried := retry(t, c, "emails", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":4417}`)}, "smtp: 421 4.7.0 try again later")
	slow, err := worker.New(c, worker.Config{Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 4}},
		Periodic: []worker.Periodic{{Name: "daily-digest", Queue: "emails", Cron: "0 7 * * *",
			Message: fila.Message{Kind: "email.digest", Body: []byte("{}")}}},
		Logger: testenv.NewLogRecorder().Logger()})
	if err != nil {
		t.Fatal(err)
	}
	hang := func(ctx context.Context, d *fila.Delivery) error { <-ctx.Done(); return ctx.Err() }
	slow.HandleFunc("email.welcome", hang)
	slow.HandleFunc("email.digest", hang)
	sctx, sstop := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- slow.Run(sctx) }()
	t.Cleanup(func() { sstop(); <-sdone })
	enqueue(t, c, "emails", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":4420}`)},
		fila.Message{Kind: "email.digest", Body: []byte(`{"user_id":4107}`)},
		fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":4423}`)})
	waitFor(t, "four emails running", func() bool { return stats(t, c, "emails").Leased == 4 })
	var waiting []fila.Message
	for i := range 6 {
		waiting = append(waiting, fila.Message{Kind: "email.welcome", Body: []byte(fmt.Sprintf(`{"user_id":%d}`, 4430+i))})
	}
	for i := range 3 {
		waiting = append(waiting, fila.Message{Kind: "email.digest", Body: []byte(fmt.Sprintf(`{"user_id":%d}`, 4100+i)),
			Delay: time.Duration(i+1) * 10 * time.Minute})
	}
	enqueue(t, c, "emails", waiting...)

	// The queue page: its worker, its schedule, its dead letters by kind,
	// the links to its messages, within the window's width.
	host, _ := os.Hostname()
	// (The charts catch up with the counts at the next sample.)
	bt.openUntil(srv.URL+"/queues/emails", "the worker's row, the schedule and the charts", fmt.Sprintf(
		`document.querySelector("dd.leased").textContent === "4" && document.querySelector("dd.delayed").textContent === "3" &&
		[...document.querySelectorAll("table#workers td.host")].some(td => td.textContent === %s) &&
		[...document.querySelectorAll("table#schedules td.id")].some(td => td.textContent === "daily-digest") &&
		[...document.querySelectorAll("figure.chart")].some(f => f.querySelector(".ct").textContent === "Dead letters" &&
			f.querySelector(".cv") !== null && f.querySelector(".cv").textContent === document.querySelector("dd.dead").textContent)`,
		jsString(host)))
	if n := eval[float64](bt, `document.querySelectorAll("table#workers tbody tr").length`); n != 1 {
		t.Errorf("the queue page lists %v workers, want 1", n)
	}
	if got := bt.text("table#schedules td.spec"); got == "" {
		t.Error("the schedule shows no spec")
	}
	for _, sel := range []string{"table.kinds td.kind", ".charts.wide svg", "#messages", "#messages-leased", "#find-id", "#dead-letters"} {
		if !eval[bool](bt, exists(sel)) {
			t.Errorf("the queue page has no %s", sel)
		}
	}
	if eval[bool](bt, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("the queue page is wider than the window")
	}
	// The whole page, below the fold too: the workers, schedules and
	// messages are what it is for.
	bt.screenshot("ui-queue.png", chromedp.FullScreenshot(100))

	// Its running messages, from the queue page's link.
	rows := `document.querySelectorAll("table#messages tbody tr")`
	bt.click("#messages-leased", "the running messages", pageOf("/queues/emails/messages", "#tab-leased.current")+
		" && "+rows+".length === 4")
	if n := eval[float64](bt, rows+`.length`); n != 4 {
		t.Errorf("the leased tab lists %v messages, want 4", n)
	}
	if n := eval[float64](bt, `document.querySelectorAll("table#messages td.id .badge.running").length`); n != 4 {
		t.Errorf("the leased tab marks %v messages running, want 4", n)
	}
	if got := bt.text("#tab-ready .tab-count"); got != "6" {
		t.Errorf("the ready tab counts %q, want 6", got)
	}
	if got := bt.text("#tab-delayed .tab-count"); got != "3" {
		t.Errorf("the delayed tab counts %q, want 3", got)
	}
	if !eval[bool](bt, fmt.Sprintf(`[...document.querySelectorAll("table#messages tbody tr")].some(tr =>
		tr.querySelector("td.id a").textContent === %s && tr.querySelector("td.reason").textContent.includes("421"))`, jsString(retried))) {
		t.Errorf("the leased tab does not show %s with its last error", retried)
	}
	if eval[bool](bt, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("the messages page is wider than the window")
	}
	bt.screenshot("ui-messages.png", chromedp.CaptureScreenshot())
	bt.noErrors()
}

// screenshot takes a PNG screenshot of the tab with shoot, checks it is an
// image at least the window's width, and writes it to docs/name with
// -update-screenshot, otherwise to a temporary file.
func (bt *browserTab) screenshot(name string, shoot chromedp.Action[[]byte]) {
	bt.t.Helper()
	shot, err := chromedp.Run(bt.ctx, shoot)
	if err != nil {
		bt.t.Fatalf("%s: %v", name, err)
	}
	img, err := png.DecodeConfig(bytes.NewReader(shot))
	if err != nil || img.Width < 1000 || img.Height < 600 {
		bt.t.Fatalf("screenshot %s: %v, %dx%d", name, err, img.Width, img.Height)
	}
	out := filepath.Join(bt.t.TempDir(), name)
	if *updateScreenshot {
		out = filepath.Join("..", "docs", name)
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		bt.t.Fatal(err)
	}
	bt.t.Logf("screenshot (%dx%d, %d KiB) in %s", img.Width, img.Height, len(shot)/1024, out)
}

// retry acks the ready messages of queue (the workload's backlog, sent
// at last), then enqueues msg, receives it and retries it at once with
// reason as its last error. It returns msg's id.
func retry(t *testing.T, c *fila.Client, queue string, msg fila.Message, reason string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for stats(t, c, queue).Ready > 0 {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 100, Lease: time.Minute})
		if err != nil {
			t.Fatalf("receiving the backlog: %v", err)
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := enqueue(t, c, queue, msg)[0]
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("received %v, %v; want %s", ds, err, id)
	}
	if err := ds[0].Retry(ctx, 0, reason); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBrowserPause pauses a queue by clicking through its confirmation in
// Chromium, sees the page say so, and resumes it the same way.
func TestBrowserPause(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	c := open(t, "mem://"+unique("uipause"))
	enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")})
	srv := serve(t, c, ui.Options{Refresh: -1})
	paused := func() bool {
		t.Helper()
		p, err := c.QueuePaused(context.Background(), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	bt.open(srv.URL + "/queues/jobs")
	bt.click("#pause-queue", "the pause confirmation", pageOf("/queues/jobs/confirm", "#confirm"))
	if got := bt.text("#question"); got != "Pause queue jobs?" {
		t.Errorf("the confirmation asks %q", got)
	}
	if paused() {
		t.Fatal("the confirmation page paused the queue by itself")
	}
	bt.click("#confirm", "the queue page after the pause", pageOf("/queues/jobs", "#paused-note"))
	if got := bt.text("#flash"); !strings.Contains(got, "Paused the queue") {
		t.Errorf("after the pause the page says %q", got)
	}
	if !paused() {
		t.Fatal("the queue is not paused after the click")
	}
	bt.click("#resume-queue", "the resume confirmation", pageOf("/queues/jobs/confirm", "#confirm"))
	bt.click("#confirm", "the queue page after the resume", pageOf("/queues/jobs", "#pause-queue"))
	if eval[bool](bt, exists("#paused-note")) || paused() {
		t.Error("the queue still shows or is paused after the resume")
	}
	bt.noErrors()
}

// TestBrowserSignIn: with a token, a browser is sent to the sign-in form,
// is told when the token is wrong, lands on the page it asked for once it
// signs in, and is sent back to the form after signing out.
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	c := open(t, "mem://"+unique("uisignin"))
	enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")})
	srv := serve(t, c, ui.Options{Refresh: -1, Token: "s3cret-token"})
	bt.open(srv.URL + "/queues/jobs")
	bt.waitJS("the sign-in form", pageOf("/login", "#token"))
	bt.do("typing a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "wrong"))
	bt.click("#sign-in", "the form saying the token is wrong", exists("#login-failed"))
	bt.do("typing the token", chromedp.SendKeys(chromedp.CSS("#token"), "s3cret-token"))
	bt.click("#sign-in", "the queue page asked for first", pageOf("/queues/jobs", "#sign-out"))
	bt.click("#sign-out", "the sign-in form after signing out", pageOf("/login", "#token"))
	bt.open(srv.URL + "/")
	bt.waitJS("the sign-in form again", pageOf("/login", "#token"))
	// The failed sign-in answers 401, which Chromium logs as a failed load.
	bt.noErrors("401")
}

// TestBrowserChartNotReported: a chart that is not reported (the p95 run
// times without a recorder) keeps its reason inside its box: the reason
// used to spill over the chart's title on the overview's narrow cards.
func TestBrowserChartNotReported(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	c := open(t, "mem://"+unique("uichartna"))
	enqueue(t, c, "jobs", fila.Message{Kind: "k", Body: []byte("x")})
	srv := serve(t, c, ui.Options{Refresh: -1})
	bt.open(srv.URL + "/")
	bt.waitJS("a chart that is not reported", exists(".card .chart-na"))
	bad := eval[[]string](bt, `Array.from(document.querySelectorAll(".chart-na")).flatMap(na => {
		const cap = na.parentElement.querySelector("figcaption").getBoundingClientRect();
		const box = na.getBoundingClientRect();
		const out = [];
		if (box.top < cap.bottom - 0.5) out.push("overlaps its title: " + na.textContent);
		if (na.scrollHeight > na.clientHeight + 1 || na.scrollWidth > na.clientWidth + 1) out.push("overflows its box: " + na.textContent);
		return out;
	})`)
	for _, b := range bad {
		t.Error(b)
	}
	bt.noErrors()
}

// TestBrowserWorkers: the queue page shows a running worker's row, and a
// record with a long host (anyone can write one) wraps inside the page
// instead of widening it.
func TestBrowserWorkers(t *testing.T) {
	t.Parallel()
	bt := tab(t)
	c := open(t, "mem://"+unique("uiworkers"))
	long := strings.Repeat("h", 200)
	if _, err := c.Driver().(backend.Marker).MarkSet(context.Background(), "jobs", "worker/ff?h="+long+"&p=1&c=1&t=1000", time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(c, worker.Config{Queues: map[string]worker.QueueConfig{"jobs": {Concurrency: 2}}, Presence: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := serve(t, c, ui.Options{Refresh: -1})
	host, _ := os.Hostname()
	bt.openUntil(srv.URL+"/queues/jobs", "the worker's row", fmt.Sprintf(
		`[...document.querySelectorAll("table#workers td.host")].some(td => td.textContent === %s)`, jsString(host)))
	if eval[bool](bt, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("a 200-byte host name widens the queue page past the window")
	}
	bt.noErrors()
}

// TestBrowserMessages: in Chromium, the queue page leads to its messages;
// the ready tab pages by cursor, the delayed and leased tabs list theirs,
// the search by id finds a running message, whose page shows its attempt
// and lease deadline. Where the driver cannot list messages the page says
// so.
func TestBrowserMessages(t *testing.T) {
	for _, name := range []string{"memory", "postgres", "redis", "rabbitmq", "mysql", "mongo"} {
		b := brokerNamed(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			browseMessages(t, b, open(t, b.url(t)))
		})
	}
}

func browseMessages(t *testing.T, b broker, c *fila.Client) {
	bt := tab(t)
	q := newQueue(t, c, "uibrmsg")
	o := ui.Options{Refresh: -1}
	if b.rabbit {
		o.Queues = []string{q}
	}
	srv := serve(t, c, o)
	qpath := "/queues/" + q
	mpath := qpath + "/messages"
	if !canList(t, c, q) {
		bt.open(srv.URL + qpath)
		bt.waitJS("the queue page", pageOf(qpath, "#messages-na"))
		bt.open(srv.URL + mpath)
		bt.waitJS("the messages page", pageOf(mpath, "#messages-na"))
		if got := bt.text(".why"); !strings.Contains(got, "cannot list") {
			t.Errorf("the messages page says %q", got)
		}
		bt.noErrors()
		return
	}
	p := pendingSetup(t, c, q, "boom", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":1}`)})
	rows := `document.querySelectorAll("table#messages tbody tr").length`

	bt.open(srv.URL + qpath)
	bt.click("#messages", "the ready messages", pageOf(mpath, "table#messages")+" && "+exists("#tab-ready.current"))
	if n := eval[float64](bt, rows); n != 50 {
		t.Errorf("the first ready page shows %v messages, want 50", n)
	}
	if got := bt.text("#tab-ready .tab-count"); got != "51" {
		t.Errorf("the ready tab counts %q, want 51", got)
	}
	if eval[bool](bt, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Error("the messages table widens the page past the window")
	}
	bt.click("#next-page", "the second ready page", `location.search.includes("cursor=") && `+rows+` === 1`)
	bt.click("#first-page", "the first ready page again", `!location.search.includes("cursor=") && `+rows+` === 50`)
	bt.click("#tab-delayed", "the delayed tab", `location.search.includes("state=delayed") && `+exists("#tab-delayed.current")+` && `+rows+` === 2`)
	bt.click("#tab-leased", "the leased tab", `location.search.includes("state=leased") && `+rows+` === 1`)
	if got := bt.text("table#messages td.id a"); got != p.leased {
		t.Errorf("the leased tab lists %q, want %s", got, p.leased)
	}

	// Search by id, from the ready tab: the running message is found.
	bt.click("#tab-ready", "the ready tab", exists("#tab-ready.current"))
	bt.do("typing the id", chromedp.SendKeys(chromedp.CSS("#find-id"), p.leased))
	bt.click("#find-message", "the search result", `location.search.includes("id=") && `+rows+` === 1`)
	if got := bt.text("table#messages td.state"); got != "running" {
		t.Errorf("the search result's state is %q, want running", got)
	}
	lpath := mpath + "/" + url.PathEscape(p.leased)
	bt.click("table#messages td.id a", "the message's page", pageOf(lpath, "#message-meta"))
	if got := bt.text("#message-state"); !strings.Contains(got, "running") {
		t.Errorf("the message's state shows %q", got)
	}
	if got := bt.text("#message-attempts"); got != "1" {
		t.Errorf("the message's attempts show %q, want 1", got)
	}
	if got := bt.text("#body"); got != "running" {
		t.Errorf("the message's body shows %q", got)
	}
	bt.noErrors()
}
