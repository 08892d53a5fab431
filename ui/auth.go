package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// contentSecurityPolicy allows the page its own scripts, styles and
// images only: no inline script or style (message data cannot run even if
// it got past the escaping), no framing, forms posting only to the
// dashboard.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// setSecurityHeaders sets the headers every response carries. Pages hold
// message data, so nothing is stored by caches.
func setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
}

// authorize reports whether r may see the dashboard, answering it when
// not: always without Token and Password; else with a session cookie from
// the sign-in form, the bearer token, or the basic-auth password (and
// user). An address that sent wrong credentials too often waits (see
// guard), and a browser without credentials in token mode is sent to the
// sign-in form.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) bool {
	if h.o.Token == "" && h.o.Password == "" {
		return true
	}
	now := time.Now()
	if h.o.Token != "" && h.validSession(r, now) {
		return true
	}
	_, hasAuth := r.Header["Authorization"]
	if hasAuth {
		ok, answered := h.attempt(w, r, func() bool { return h.credentialsOK(r) })
		if ok || answered {
			return ok
		}
	}
	if !hasAuth && h.o.Token != "" && h.o.Password == "" && wantsPage(r) {
		h.toLogin(w, r)
		return false
	}
	h.unauthorized(w, r)
	return false
}

// attempt checks r's credentials with check through the guard (see
// guard): while r's address must wait it answers 429 without calling check
// (answered); otherwise it returns check's result and records it.
func (h *Handler) attempt(w http.ResponseWriter, r *http.Request, check func() bool) (ok, answered bool) {
	ip, now := clientIP(r), time.Now()
	if wait := h.guard.blocked(ip, now); wait > 0 {
		h.tooMany(w, r, wait)
		return false, true
	}
	if check() {
		h.guard.succeeded(ip)
		return true, false
	}
	h.guard.failed(ip, now)
	return false, false
}

// credentialsOK reports whether r carries the bearer token or the
// basic-auth password (and user).
func (h *Handler) credentialsOK(r *http.Request) bool {
	if h.o.Token != "" {
		if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			if equalSecret(strings.TrimSpace(tok), h.o.Token) {
				return true
			}
		}
	}
	if h.o.Password != "" {
		if user, pass, ok := r.BasicAuth(); ok {
			userOK := h.o.User == "" || equalSecret(user, h.o.User)
			if equalSecret(pass, h.o.Password) && userOK {
				return true
			}
		}
	}
	return false
}

// equalSecret compares two secrets in constant time, their lengths
// included (it compares their SHA-256 digests).
func equalSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// unauthorized answers 401, asking browsers for the basic-auth password
// when one is configured.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request) {
	if h.o.Password != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="Fila dashboard", charset="UTF-8"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="Fila dashboard"`)
	}
	// Never the credentials the request carried: only that it was refused.
	h.log.Debug("fila ui: request refused: no valid credentials", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401 Unauthorized: this Fila dashboard needs credentials\n"))
}

// CSRF protection. Every browser gets a random value in an HttpOnly,
// SameSite=Strict cookie; the forms carry an HMAC of that value under a key
// that never leaves the handler (a new one each New). A forged form from
// another site cannot send the cookie (SameSite) nor know the HMAC, and
// http.CrossOriginProtection refuses cross-origin POSTs besides.
const (
	csrfCookie = "fila_csrf"
	csrfField  = "csrf"
)

// csrfToken returns the form token of r's browser, setting its cookie first
// when it has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validCookieValue(c.Value) {
		return h.csrfMAC(c.Value)
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: v, Path: h.prefix + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return h.csrfMAC(v)
}

// validCookieValue reports whether v looks like a value csrfToken made.
func validCookieValue(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 18
}

func (h *Handler) csrfMAC(cookie string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte("fila ui csrf\x00"))
	m.Write([]byte(cookie))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// readForm reads a POST's form, at most maxFormBytes, and checks that it
// is one of the dashboard's own (checkCSRF); it answers the request and
// returns false when not.
func (h *Handler) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, &httpError{status: http.StatusBadRequest, msg: "cannot read the form"})
		return false
	}
	if !h.checkCSRF(r) {
		h.fail(w, r, &httpError{status: http.StatusForbidden,
			msg: "the form's CSRF token is missing or does not match (a form from another site, or an old page): reload the page and try again"})
		return false
	}
	return true
}

// checkCSRF reports whether a POST comes from one of the dashboard's own
// forms: same origin, and the form's token matches the cookie.
func (h *Handler) checkCSRF(r *http.Request) bool {
	if err := h.cop.Check(r); err != nil {
		return false
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validCookieValue(c.Value) {
		return false
	}
	got := r.PostFormValue(csrfField)
	return hmac.Equal([]byte(got), []byte(h.csrfMAC(c.Value)))
}
