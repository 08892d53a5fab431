package ui_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/ui"
)

// broker is one broker the dashboard is tested against.
type broker struct {
	name string
	// url returns the broker's URL, or skips the test.
	url func(t *testing.T) string
	// rabbit: the driver cannot list queues, reports no oldest ready time
	// nor dead letters per kind, and counts delayed and leased messages
	// only for its own process.
	rabbit bool
}

// brokers are the brokers the handler is tested against.
var brokers = []broker{
	{name: "memory", url: func(t *testing.T) string { return "mem://" + unique("ui") }},
	{name: "postgres", url: func(t *testing.T) string { return withParam(testenv.PostgresURL(t), "fila_migrate", "true") }},
	{name: "redis", url: func(t *testing.T) string { return testenv.RedisURL(t) }},
	{name: "mongo", url: freshMongo},
	{name: "mysql", url: func(t *testing.T) string { return withParam(testenv.MySQLURL(t), "fila_migrate", "true") }},
	{name: "rabbitmq", url: func(t *testing.T) string { return testenv.RabbitMQURL(t) }, rabbit: true},
}

func brokerNamed(t *testing.T, name string) broker {
	for _, b := range brokers {
		if b.name == name {
			return b
		}
	}
	t.Fatalf("no broker %q", name)
	return broker{}
}

// forEachBroker runs f as a parallel subtest per broker.
func forEachBroker(t *testing.T, f func(t *testing.T, b broker, c *fila.Client)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b, open(t, b.url(t)))
		})
	}
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

func withParam(raw, key, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// freshMongo is a database of the test's own on the Mongo test server,
// dropped when it ends: FerretDB can wedge a database after an interrupted
// operation.
func freshMongo(t *testing.T) string {
	base := testenv.MongoURL(t)
	db := unique("ui")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongodriver.Connect(options.Client().ApplyURI(base))
		if err != nil {
			return
		}
		defer c.Disconnect(ctx)
		_ = c.Database(db).Drop(ctx)
	})
	return withParam(base, "fila_database", db)
}

// open opens a client on raw, closed when the test ends.
func open(t testing.TB, raw string) *fila.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, raw, fila.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newQueue names a queue of the test's own, deleted when it ends.
func newQueue(t testing.TB, c *fila.Client, prefix string) string {
	q := unique(prefix)
	testenv.CleanupQueue(t, c, q)
	return q
}

// enqueue enqueues msgs to queue and returns their ids.
func enqueue(t testing.TB, c *fila.Client, queue string, msgs ...fila.Message) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ids, err := c.EnqueueBatch(ctx, queue, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// kill enqueues msgs and dead-letters them with reason, returning their
// ids.
func kill(t testing.TB, c *fila.Client, queue, reason string, msgs ...fila.Message) []string {
	t.Helper()
	ids := enqueue(t, c, queue, msgs...)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(want) > 0 {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: len(want), Lease: time.Minute})
		if err != nil {
			t.Fatalf("receiving the messages to dead-letter: %v", err)
		}
		for _, d := range ds {
			if !want[d.ID] {
				if err := d.Release(ctx); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := d.Dead(ctx, reason); err != nil {
				t.Fatal(err)
			}
			delete(want, d.ID)
		}
	}
	return ids
}

// retryThenKill enqueues m into queue, retries it once with reason
// earlier and dead-letters it with reason, releasing the other messages it
// receives meanwhile; it returns m's id.
func retryThenKill(t testing.TB, c *fila.Client, queue, earlier, reason string, m fila.Message) string {
	t.Helper()
	id := enqueue(t, c, queue, m)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for retried := false; ; {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Lease: time.Minute})
		if err != nil {
			t.Fatalf("receiving the message to retry and dead-letter: %v", err)
		}
		for _, d := range ds {
			switch {
			case d.ID != id:
				err = d.Release(ctx)
			case !retried:
				err, retried = d.Retry(ctx, 0, earlier), true
			default:
				if err := d.Dead(ctx, reason); err != nil {
					t.Fatal(err)
				}
				return id
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func stats(t testing.TB, c *fila.Client, queue string) fila.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := c.QueueStats(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dash is a dashboard served over HTTP for a test, with a browser-like
// client (cookies, no redirects followed).
type dash struct {
	t      testing.TB
	h      *ui.Handler
	srv    *httptest.Server
	prefix string
	client *http.Client
	// header is added to every request (credentials).
	header http.Header
}

func newDash(t testing.TB, c *fila.Client, o ui.Options) *dash {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testenv.NewLogRecorder().Logger()
	}
	h, err := ui.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &dash{t: t, h: h, srv: srv, prefix: strings.TrimSuffix(o.Prefix, "/"), header: http.Header{},
		client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// fresh returns the same dashboard seen from another browser: no cookies,
// no credentials.
func (d *dash) fresh() *dash {
	jar, _ := cookiejar.New(nil)
	c := *d.client
	c.Jar = jar
	return &dash{t: d.t, h: d.h, srv: d.srv, prefix: d.prefix, client: &c, header: http.Header{}}
}

// response is a read response.
type response struct {
	status int
	header http.Header
	body   string
}

func (d *dash) do(method, path string, form url.Values, hdr http.Header) response {
	d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	u := path
	if !strings.HasPrefix(u, "http") {
		u = d.srv.URL + path
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		d.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range d.header {
		req.Header[k] = vs
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	res, err := d.client.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

// get fetches a page below the prefix and fails the test unless it
// answers want.
func (d *dash) get(path string, want int) response {
	d.t.Helper()
	r := d.do(http.MethodGet, d.prefix+path, nil, nil)
	if r.status != want {
		d.t.Fatalf("GET %s: status %d, want %d\n%s", path, r.status, want, mainText(r.body))
	}
	return r
}

// post posts form to a path below the prefix.
func (d *dash) post(path string, form url.Values) response {
	d.t.Helper()
	return d.do(http.MethodPost, d.prefix+path, form, nil)
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]+)"[^>]*>(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// confirm opens a confirmation page (a URL as found in a page, escaped)
// and submits its form, with extra fields; it returns the response.
func (d *dash) confirm(link string, extra url.Values) response {
	d.t.Helper()
	page := d.do(http.MethodGet, d.srv.URL+html.UnescapeString(link), nil, nil)
	if page.status != http.StatusOK {
		d.t.Fatalf("confirmation page %s: status %d\n%s", link, page.status, mainText(page.body))
	}
	m := formRE.FindStringSubmatch(page.body)
	if m == nil {
		d.t.Fatalf("no form on the confirmation page %s", link)
	}
	form := url.Values{}
	for _, f := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
		form.Add(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
	}
	for k, vs := range extra {
		form[k] = vs
	}
	return d.do(http.MethodPost, d.srv.URL+html.UnescapeString(m[1]), form, nil)
}

// link returns the href of the first <a> with the id in body.
func link(t testing.TB, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<a[^>]*id="` + regexp.QuoteMeta(id) + `"[^>]*href="([^"]+)"|<a[^>]*href="([^"]+)"[^>]*id="` + regexp.QuoteMeta(id) + `"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no link #%s in\n%s", id, mainText(body))
	}
	return m[1] + m[2]
}

// card returns the overview's card of queue.
func card(t testing.TB, body, queue string) string {
	t.Helper()
	i := strings.Index(body, `data-queue="`+queue+`"`)
	if i < 0 {
		t.Fatalf("no card for queue %s in\n%s", queue, mainText(body))
	}
	rest := body[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// cell returns the text of the <dd> of class in html.
func cell(t testing.TB, html, class string) string {
	t.Helper()
	m := regexp.MustCompile(`<dd class="` + class + `( na)?"[^>]*>([^<]*)</dd>`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no %s cell in\n%s", class, html)
	}
	return m[2]
}

// mainText is a page's <main>, for failure messages.
func mainText(body string) string {
	if i := strings.Index(body, "<main>"); i >= 0 {
		body = body[i:]
	}
	if len(body) > 4000 {
		body = body[:4000] + "…"
	}
	return body
}

// waitFor polls cond until it holds, failing the test after 20s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
