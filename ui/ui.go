package ui

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// Defaults of Options.
const (
	// DefaultSampleInterval is how often the sampler reads the queues'
	// stats for the charts.
	DefaultSampleInterval = 15 * time.Second
	// DefaultHistory is how far back the charts go.
	DefaultHistory = time.Hour
	// DefaultRefresh is how often an open overview or queue page reloads
	// its numbers.
	DefaultRefresh = 10 * time.Second
)

// Options configure a dashboard Handler. The zero value serves every queue
// at the root path with every action and no authentication: fine on
// loopback, not on a shared network (see the package documentation).
type Options struct {
	// Prefix is the path the handler is mounted under, such as "/fila"
	// (mux.Handle("/fila/", h)); empty for the root. The handler expects
	// the full request path, prefix included, and builds its links with
	// it. It must start with "/" and hold only letters, digits and
	// "/-._~".
	Prefix string

	// ReadOnly hides every action (replay, purge, delete, pause, resume,
	// cancel, limits) and refuses them with 403 Forbidden, whatever the
	// request.
	ReadOnly bool

	// Token, when set, lets in requests carrying "Authorization: Bearer
	// TOKEN" (for scripts, and proxies that add the header), and browsers
	// that signed in with it on the sign-in form (PREFIX/login, where a
	// browser without credentials is sent), which sets a session cookie.
	Token string
	// Password, when set, lets in requests carrying HTTP basic
	// authentication with this password (browsers ask for it), and the
	// user name User (any user name when User is empty). With neither
	// Token nor Password every request is let in. Both are compared in
	// constant time and never logged or shown.
	Password string
	// User is the basic-auth user name; see Password.
	User string

	// Queues are queues to show besides the ones Client.QueueList names:
	// on a broker that cannot list its queues (RabbitMQ), the only ones
	// shown. Each must be a valid queue name.
	Queues []string

	// RunTimes reports the jobs' run times for the p95 charts: a *Recorder
	// installed in the worker's config, or any RunTimeSource. Each point is
	// the p95 of the jobs that ended in the four sampling intervals before
	// it (a minute by default). Nil: the charts say the run times are not
	// reported.
	RunTimes RunTimeSource

	// SampleInterval is how often the sampler reads every queue's stats
	// for the charts; default DefaultSampleInterval (15s), at least 10ms.
	SampleInterval time.Duration
	// History is how far back the charts go and how long the sampler
	// keeps its points in memory; default DefaultHistory (1h). It must
	// hold at least two sampling intervals.
	History time.Duration
	// Refresh is how often the overview and queue pages reload their
	// numbers in the browser; default DefaultRefresh (10s), negative for
	// never.
	Refresh time.Duration

	// Broker names the broker in the page header, for example the URL the
	// client was opened with: it is shown through fila.Redact, so a
	// password in it never shows. Empty: the driver's name.
	Broker string

	// Logger receives the handler's records: actions taken (Info), failed
	// broker calls (Warn) and refused requests (Debug). Default
	// slog.Default().
	Logger *slog.Logger
}

// Handler serves the dashboard. Make one with New; it is an http.Handler.
// Close stops its sampler.
type Handler struct {
	c      *fila.Client
	o      Options
	log    *slog.Logger
	driver string
	broker string
	// canCancel: the driver can list marks, which cancelling by id needs
	// (fila.Client.MessageCancel); without it the queue page shows no
	// cancel form.
	canCancel bool
	// canList: the driver can list pending messages
	// (fila.Client.MessageList); without it the messages pages say so.
	canList  bool
	prefix   string
	mux      *http.ServeMux
	pages    map[string]*template.Template
	static   fs.FS
	csrfKey  []byte
	cop      *http.CrossOriginProtection
	guard    guard // wrong credentials per address
	hist     *history
	tp       throughputCache
	interval time.Duration
	history  time.Duration
	refresh  time.Duration

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

//go:embed assets
var assets embed.FS

// New returns a dashboard for the queues of c and starts its sampler, which
// reads every queue's stats each Options.SampleInterval for the charts
// until Close. Invalid options return an error matching fila.ErrInvalid.
// The handler does not close c.
func New(c *fila.Client, o Options) (*Handler, error) {
	if c == nil {
		return nil, invalidf("New needs a client")
	}
	prefix, err := cleanPrefix(o.Prefix)
	if err != nil {
		return nil, err
	}
	for _, q := range o.Queues {
		if err := fila.ValidateQueueName(q); err != nil {
			return nil, fmt.Errorf("ui: Options.Queues: %w", err)
		}
	}
	if o.User != "" && o.Password == "" {
		return nil, invalidf("Options.User is set without a Password")
	}
	h := &Handler{c: c, o: o, prefix: prefix, log: o.Logger,
		interval: o.SampleInterval, history: o.History, refresh: o.Refresh}
	if h.log == nil {
		h.log = slog.Default()
	}
	switch {
	case h.interval == 0:
		h.interval = DefaultSampleInterval
	case h.interval < 10*time.Millisecond:
		return nil, invalidf("Options.SampleInterval %v is below 10ms", h.interval)
	}
	if h.history == 0 {
		h.history = DefaultHistory
	}
	if h.history < 2*h.interval {
		return nil, invalidf("Options.History %v holds fewer than two sampling intervals of %v", h.history, h.interval)
	}
	if h.refresh == 0 {
		h.refresh = DefaultRefresh
	}
	h.driver = c.DriverName()
	_, h.canCancel = c.Driver().(backend.MarkLister)
	_, h.canList = c.Driver().(backend.MessageLister)
	h.broker = h.driver
	if o.Broker != "" {
		h.broker = fila.Redact(o.Broker)
	}
	h.o.Queues = slices.Clone(o.Queues)
	h.csrfKey = make([]byte, 32)
	if _, err := rand.Read(h.csrfKey); err != nil {
		return nil, fmt.Errorf("ui: reading random bytes for the CSRF key: %w", err)
	}
	h.cop = http.NewCrossOriginProtection()
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if h.static, err = fs.Sub(assets, "assets/static"); err != nil {
		return nil, err
	}
	h.routes()
	h.hist = newHistory()
	ctx, stop := context.WithCancel(context.Background())
	h.stop, h.done = stop, make(chan struct{})
	go h.runSampler(ctx)
	return h, nil
}

// Close stops the sampler and waits for it. It does not close the client,
// and the handler goes on serving pages (with charts that no longer move).
func (h *Handler) Close() error {
	h.closeOnce.Do(func() {
		h.stop()
		<-h.done
	})
	return nil
}

// ServeHTTP serves the dashboard: authentication, security headers, then
// the page or action the path names below Options.Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	rest, ok := strings.CutPrefix(r.URL.Path, h.prefix)
	// The sign-in form, sign-out and the static files (no data) are served
	// without credentials.
	public := ok && (rest == "/login" || rest == "/logout" || strings.HasPrefix(rest, "/static/"))
	if !public && !h.authorize(w, r) {
		return
	}
	switch {
	case !ok:
		h.fail(w, r, &httpError{status: http.StatusNotFound, msg: "no such page"})
		return
	case rest == "":
		http.Redirect(w, r, h.prefix+"/", http.StatusMovedPermanently)
		return
	case !strings.HasPrefix(rest, "/") || path.Clean(rest) != rest && path.Clean(rest)+"/" != rest:
		// Not below the prefix, or not a clean path: ServeMux would
		// redirect to the clean path without the prefix.
		h.fail(w, r, &httpError{status: http.StatusNotFound, msg: "no such page"})
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = rest
	// The prefix holds no character that needs escaping, so it starts the
	// escaped path too; keeping it escaped keeps a "/" escaped in an id.
	r2.URL.RawPath, _ = strings.CutPrefix(r.URL.RawPath, h.prefix)
	h.mux.ServeHTTP(w, r2)
}

// routes registers the pages and actions, below the prefix.
func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.overview)
	m.HandleFunc("GET /queues/{queue}", h.queuePage)
	m.HandleFunc("GET /queues/{queue}/dead", h.deadList)
	m.HandleFunc("GET /queues/{queue}/dead/{id}", h.deadLetter)
	m.HandleFunc("GET /queues/{queue}/dead/{id}/body", h.deadBody)
	m.HandleFunc("GET /queues/{queue}/messages", h.messageList)
	m.HandleFunc("GET /queues/{queue}/messages/{id}", h.messagePage)
	m.HandleFunc("GET /queues/{queue}/messages/{id}/body", h.messageBody)
	m.HandleFunc("GET /queues/{queue}/confirm", h.confirm)
	m.HandleFunc("POST /queues/{queue}/replay", h.action(opReplay))
	m.HandleFunc("POST /queues/{queue}/purge", h.action(opPurge))
	m.HandleFunc("POST /queues/{queue}/delete", h.action(opDelete))
	m.HandleFunc("POST /queues/{queue}/pause", h.action(opPause))
	m.HandleFunc("POST /queues/{queue}/resume", h.action(opResume))
	m.HandleFunc("POST /queues/{queue}/cancel", h.action(opCancel))
	m.HandleFunc("POST /queues/{queue}/limits", h.action(opLimits))
	m.HandleFunc("GET /workflows", h.workflowsPage)
	m.HandleFunc("GET /workflows/{id}", h.workflowPage)
	m.HandleFunc("GET /workflows/{id}/confirm", h.workflowConfirm)
	m.HandleFunc("POST /workflows/{id}/cancel", h.workflowCancel)
	m.HandleFunc("GET /static/{file}", h.staticFile)
	m.HandleFunc("GET /login", h.login)
	m.HandleFunc("POST /login", h.login)
	m.HandleFunc("POST /logout", h.logout)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, &httpError{status: http.StatusNotFound, msg: "no such page"})
	})
	h.mux = m
}

// cleanPrefix checks and normalises Options.Prefix: "" or "/" is the root
// (returned as ""), otherwise it starts with "/" and has no trailing "/".
func cleanPrefix(p string) (string, error) {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", invalidf("Options.Prefix %q must start with /", p)
	}
	for _, r := range p {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("/-._~", r)) {
			return "", invalidf("Options.Prefix %q may hold only letters, digits and /-._~", p)
		}
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", invalidf("Options.Prefix %q has an empty, . or .. segment", p)
		}
	}
	return p, nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("ui: %s: %w", fmt.Sprintf(format, args...), fila.ErrInvalid)
}

// httpError is a failure answered with its status and message.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// errStatus maps an error of a fila call to an HTTP status.
func errStatus(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, fila.ErrInvalid), errors.Is(err, fila.ErrTooLarge):
		return http.StatusBadRequest
	case errors.Is(err, fila.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, fila.ErrQueueNotEmpty):
		return http.StatusConflict
	case errors.Is(err, fila.ErrUnavailable), errors.Is(err, fila.ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, fila.ErrAccessDenied):
		return http.StatusBadGateway
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}
