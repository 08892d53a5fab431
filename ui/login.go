package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sessions. With a Token, a browser signs in once with a form (it cannot
// send a bearer header by itself) and gets a session cookie: its expiry and
// an HMAC of it under a key that never leaves the handler (a new one each
// New, so a restart signs everybody out). The cookie is HttpOnly,
// SameSite=Strict and Secure over TLS.
const (
	sessionCookie = "fila_session"
	// sessionLife is how long a sign-in lasts.
	sessionLife = 12 * time.Hour
)

// newSession returns a session cookie's value that expires at exp.
func (h *Handler) newSession(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + h.sessionMAC(e)
}

func (h *Handler) sessionMAC(exp string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte("fila ui session\x00"))
	m.Write([]byte(exp))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validSession reports whether r carries an unexpired session cookie made
// by this handler.
func (h *Handler) validSession(r *http.Request, now time.Time) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	e, mac, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(h.sessionMAC(e))) {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	return err == nil && now.Before(time.Unix(exp, 0))
}

// loginView is the sign-in page.
type loginView struct {
	Action string
	Next   string
	Failed bool
}

// wantsPage reports whether r is a browser asking for a page, which is
// sent to the sign-in form rather than answered 401.
func wantsPage(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// localNext returns next when it is a path of this dashboard, else the
// overview: the form must never send a browser elsewhere (an open
// redirect).
func (h *Handler) localNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, h.prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return h.prefix + "/"
	}
	return next
}

// toLogin redirects a browser to the sign-in form, to come back to where
// it was.
func (h *Handler) toLogin(w http.ResponseWriter, r *http.Request) {
	next := h.localNext(r.URL.RequestURI())
	http.Redirect(w, r, h.prefix+"/login?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
}

// login serves the sign-in form (GET) and checks it (POST). It runs
// without credentials, behind the failure guard.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.o.Token == "" {
		// Only a token is signed in with the form; a password is basic
		// authentication, which browsers ask for themselves.
		h.fail(w, r, &httpError{status: http.StatusNotFound, msg: "no such page"})
		return
	}
	v := loginView{Action: h.prefix + "/login", Next: h.localNext(r.URL.Query().Get("next"))}
	if r.Method == http.MethodPost {
		if !h.readForm(w, r) {
			return
		}
		v.Next = h.localNext(r.PostForm.Get("next"))
		ok, answered := h.attempt(w, r, func() bool { return equalSecret(r.PostForm.Get("token"), h.o.Token) })
		if answered {
			return
		}
		if ok {
			http.SetCookie(w, &http.Cookie{
				Name: sessionCookie, Value: h.newSession(time.Now().Add(sessionLife)), Path: h.prefix + "/",
				MaxAge: int(sessionLife / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
			})
			h.log.Info("fila ui: signed in with the token", "remote", r.RemoteAddr)
			http.Redirect(w, r, v.Next, http.StatusSeeOther)
			return
		}
		h.log.Debug("fila ui: sign-in refused: wrong token", "remote", r.RemoteAddr)
		v.Failed = true
		h.renderLogin(w, r, http.StatusUnauthorized, v)
		return
	}
	h.renderLogin(w, r, http.StatusOK, v)
}

func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, v loginView) {
	p := &page{Title: "Sign in", CSRF: h.csrfToken(w, r), P: v, Public: true}
	h.render(w, r, status, "login", p)
}

// logout ends the browser's session (POST, from the dashboard's own form).
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if !h.readForm(w, r) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: h.prefix + "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, h.prefix+"/login", http.StatusSeeOther)
}

// tooMany answers a client that failed too often: 429 with Retry-After,
// without looking at its credentials.
func (h *Handler) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	h.log.Warn("fila ui: credentials refused too often; slowing this client down", "remote", r.RemoteAddr, "retry_after_s", secs)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte("429 Too Many Requests: wrong credentials too many times; try again in " + strconv.Itoa(secs) + " s\n"))
}

// clientIP is the address credentials are counted against: the request's
// remote IP (behind a proxy, the proxy's: every client then shares it).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// guard slows down guessing: after guardFree wrong credentials from one
// address, each further attempt must wait, twice as long after each
// failure (from guardBase up to guardMax), and is refused with 429 until
// then without its credentials being checked. A success clears the
// address.
type guard struct {
	mu   sync.Mutex
	base time.Duration // the first wait; tests shorten it
	ips  map[string]*strikes
}

type strikes struct {
	n     int
	until time.Time // no attempt is checked before
	last  time.Time
}

const (
	guardFree = 5
	guardBase = time.Second
	guardMax  = time.Minute
	// guardForget is how long an address's failures are remembered
	// without a new one.
	guardForget = 15 * time.Minute
	// guardCap bounds the addresses remembered; the oldest go first.
	guardCap = 10000
)

// blocked returns how long ip must still wait, 0 when it may try.
func (g *guard) blocked(ip string, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.ips[ip]
	if s == nil || !now.Before(s.until) {
		return 0
	}
	return s.until.Sub(now)
}

// failed records a wrong credential from ip.
func (g *guard) failed(ip string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ips == nil {
		g.ips = map[string]*strikes{}
	}
	s := g.ips[ip]
	if s == nil || now.Sub(s.last) > guardForget {
		if len(g.ips) >= guardCap {
			g.evictLocked(now)
		}
		s = &strikes{}
		g.ips[ip] = s
	}
	s.n++
	s.last = now
	if s.n >= guardFree {
		base := g.base
		if base == 0 {
			base = guardBase
		}
		wait := base << min(s.n-guardFree, 16)
		s.until = now.Add(min(wait, guardMax))
	}
}

// succeeded clears ip's failures.
func (g *guard) succeeded(ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.ips, ip)
}

// evictLocked drops the addresses not seen for guardForget, or, if none,
// the one seen longest ago.
func (g *guard) evictLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for ip, s := range g.ips {
		if now.Sub(s.last) > guardForget {
			delete(g.ips, ip)
			continue
		}
		if oldest == "" || s.last.Before(oldestAt) {
			oldest, oldestAt = ip, s.last
		}
	}
	if len(g.ips) >= guardCap {
		delete(g.ips, oldest)
	}
}
