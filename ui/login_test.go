package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/ui"
)

// TestTokenSignIn: with a token, a browser (which cannot send a bearer
// header) is sent to a sign-in form, which sets a session cookie that
// lets it in; a wrong token, a forged cookie and an outside "next" do not.
func TestTokenSignIn(t *testing.T) {
	t.Parallel()
	c, _ := memQueue(t)
	const token = "t0ken-value"
	d := newDash(t, c, ui.Options{Token: token, Prefix: "/fila"})
	d.header.Set("Accept", "text/html")

	r := d.get("/queues/jobs?x=1", http.StatusSeeOther)
	loc, _ := url.Parse(r.header.Get("Location"))
	if loc.Path != "/fila/login" || loc.Query().Get("next") != "/fila/queues/jobs?x=1" {
		t.Fatalf("a browser without credentials went to %q; want the sign-in form, back to the page", r.header.Get("Location"))
	}
	form := d.get("/login?next="+url.QueryEscape("/fila/queues/jobs?x=1"), http.StatusOK)
	if strings.Contains(form.body, "mem") && strings.Contains(form.body, "driver") {
		t.Error("the sign-in form names the driver to somebody not signed in")
	}
	csrf := csrfRE.FindStringSubmatch(form.body)
	if csrf == nil {
		t.Fatal("no CSRF token on the sign-in form")
	}
	// A wrong token: the form again, 401, no session.
	bad := d.post("/login", url.Values{"csrf": {csrf[1]}, "token": {token + "x"}, "next": {"/fila/queues/jobs"}})
	if bad.status != http.StatusUnauthorized || !strings.Contains(bad.body, "login-failed") {
		t.Errorf("wrong token: status %d; want 401 and the form saying so", bad.status)
	}
	// A form past the size bound is not read at all.
	if r := d.post("/login", url.Values{"csrf": {csrf[1]}, "token": {strings.Repeat("x", 1<<20)}}); r.status != http.StatusBadRequest {
		t.Errorf("a 1 MiB sign-in form: status %d, want 400", r.status)
	}
	// Without the form's CSRF token: refused.
	if r := d.post("/login", url.Values{"token": {token}}); r.status != http.StatusForbidden {
		t.Errorf("sign-in without a CSRF token: status %d, want 403", r.status)
	}
	// An outside next is not followed.
	ok := d.post("/login", url.Values{"csrf": {csrf[1]}, "token": {token}, "next": {"https://evil.example/"}})
	if ok.status != http.StatusSeeOther || ok.header.Get("Location") != "/fila/" {
		t.Fatalf("sign-in: status %d to %q; want 303 to /fila/", ok.status, ok.header.Get("Location"))
	}
	setCookie := ok.header.Get("Set-Cookie")
	for _, want := range []string{"fila_session=", "HttpOnly", "SameSite=Strict", "Path=/fila/"} {
		if !strings.Contains(setCookie, want) {
			t.Errorf("session cookie %q lacks %s", setCookie, want)
		}
	}
	if strings.Contains(setCookie, token) {
		t.Error("the session cookie holds the token")
	}
	page := d.get("/queues/jobs", http.StatusOK)
	if !strings.Contains(page.body, `id="sign-out"`) {
		t.Error("a signed-in page has no sign-out button")
	}
	// Another browser with a forged cookie is not let in.
	other := d.fresh()
	other.header.Set("Accept", "text/html")
	forged := &http.Cookie{Name: "fila_session", Value: "99999999999.AAAA"}
	if r := other.do(http.MethodGet, "/fila/", nil, http.Header{"Cookie": {forged.String()}}); r.status != http.StatusSeeOther {
		t.Errorf("a forged session cookie: status %d, want 303 to the form", r.status)
	}
	// Sign out ends the session.
	so := csrfRE.FindStringSubmatch(page.body)
	if r := d.post("/logout", url.Values{"csrf": {so[1]}}); r.status != http.StatusSeeOther {
		t.Fatalf("sign out: status %d", r.status)
	}
	d.get("/queues/jobs", http.StatusSeeOther)
	// Scripts still use the bearer header, and get 401 without it.
	script := d.fresh()
	script.get("/", http.StatusUnauthorized)
	script.header.Set("Authorization", "Bearer "+token)
	script.get("/", http.StatusOK)
}

// TestWrongCredentialsSlowDown: after five wrong credentials from one
// address every attempt waits (429 with Retry-After, the credentials not
// even checked), longer after each failure; the right ones work again
// once the wait is over, and clear the count.
func TestWrongCredentialsSlowDown(t *testing.T) {
	t.Parallel()
	c, _ := memQueue(t)
	const password = "pa55-word"
	d := newDash(t, c, ui.Options{Password: password})
	ui.SetGuardBase(d.h, 200*time.Millisecond)
	d.header.Set("Authorization", "Basic "+basic("ops", password+"x"))
	for i := range 5 {
		if r := d.do(http.MethodGet, "/", nil, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: status %d, want 401", i+1, r.status)
		}
	}
	// Waiting now: even the right password is not checked.
	d.header.Set("Authorization", "Basic "+basic("ops", password))
	r := d.do(http.MethodGet, "/", nil, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("after 5 wrong passwords: status %d, Retry-After %q; want 429 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	// Once the wait is over the right password works.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = d.do(http.MethodGet, "/", nil, nil)
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("the right password after the wait: status %d", r.status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The success cleared the count: four wrong ones are answered 401 again.
	d.header.Set("Authorization", "Basic "+basic("ops", "nope"))
	for i := range 4 {
		if r := d.do(http.MethodGet, "/", nil, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong password %d after a success: status %d, want 401", i+1, r.status)
		}
	}
}
