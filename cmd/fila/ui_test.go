package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// uiRun is a `fila ui` running in-process until stop is called.
type uiRun struct {
	base           string // http://host:port/prefix
	stdout, stderr *syncBuffer
	stop           func() int
}

var servingRE = regexp.MustCompile(`at (http://\S+/) \(`)

// startUI runs fila ui with args and environment, and waits until it says
// where it listens.
func startUI(t *testing.T, vars map[string]string, args ...string) *uiRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &uiRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"ui", "--listen", "127.0.0.1:0"}, args...), env{
			stdout: r.stdout, stderr: r.stderr, getenv: func(k string) string { return vars[k] }})
	}()
	exited := -1
	r.stop = func() int {
		if exited < 0 {
			cancel()
			exited = <-code
		}
		return exited
	}
	t.Cleanup(func() { r.stop() })
	waitFor(t, "fila ui to listen", func() bool {
		select {
		case c := <-code:
			exited = c
			t.Fatalf("fila ui exited %d\nstdout: %s\nstderr: %s", c, r.stdout, r.stderr)
		default:
		}
		m := servingRE.FindStringSubmatch(r.stdout.String())
		if m != nil {
			r.base = m[1]
		}
		return m != nil
	})
	return r
}

func (r *uiRun) get(t *testing.T, path string, set func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.base+strings.TrimPrefix(path, "/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestUIServes(t *testing.T) {
	t.Parallel()
	raw := "mem://" + unique("cliui")
	c := client(t, raw)
	q := unique("uiq")
	if _, err := c.Enqueue(context.Background(), q, fila.Message{Kind: "k", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	r := startUI(t, nil, "--url", raw, "--prefix", "/fila", "--read-only")
	if !strings.HasSuffix(r.base, "/fila/") || !strings.Contains(r.stdout.String(), "read-only, no authentication") {
		t.Errorf("fila ui said: %s", r.stdout)
	}
	if strings.Contains(r.stderr.String(), "warning") {
		t.Errorf("warning on loopback: %s", r.stderr)
	}
	status, body := r.get(t, "/", nil)
	if status != http.StatusOK || !strings.Contains(body, `data-queue="`+q+`"`) || !strings.Contains(body, `id="read-only"`) {
		t.Errorf("GET /fila/: %d\n%s", status, body)
	}
	// A page whose own name resolves to 127.0.0.1 (DNS rebinding) is not
	// answered: on loopback only loopback names are.
	for host, want := range map[string]int{"evil.example:80": http.StatusMisdirectedRequest, "localhost": http.StatusOK, "[::1]:8080": http.StatusOK} {
		if s, _ := r.get(t, "/", func(req *http.Request) { req.Host = host }); s != want {
			t.Errorf("GET with Host %s: %d, want %d", host, s, want)
		}
	}
	if code := r.stop(); code != 0 {
		t.Errorf("fila ui exited %d after the interrupt; stderr: %s", code, r.stderr)
	}
	if !strings.Contains(r.stdout.String(), "fila ui: stopped") {
		t.Errorf("no stop line: %s", r.stdout)
	}
}

// TestUICredentials checks that the broker URL shows redacted, and that the
// dashboard's password from the environment is required and never printed.
func TestUICredentials(t *testing.T) {
	t.Parallel()
	pg := testenv.PostgresURL(t)
	// PostgreSQL trusts loopback here, so a password in the URL is ignored
	// by the server and only has to stay hidden.
	withPass := strings.Replace(withParam(pg, "fila_migrate", "true"), "postgres@", "postgres:brokerS3cret@", 1)
	if withPass == pg {
		t.Fatalf("cannot add a password to %s", fila.Redact(pg))
	}
	const uiPass = "dashP4ss"
	r := startUI(t, map[string]string{uiPasswordEnv: uiPass}, "--url", withPass, "--user", "ops", "--queue", "uicreds")
	if !strings.Contains(r.stdout.String(), "postgres:xxxxx@") || !strings.Contains(r.stdout.String(), "basic-auth password required") {
		t.Errorf("fila ui said: %s", r.stdout)
	}
	if s, _ := r.get(t, "/", nil); s != http.StatusUnauthorized {
		t.Errorf("GET without the password: %d", s)
	}
	if s, _ := r.get(t, "/", func(req *http.Request) { req.SetBasicAuth("ops", "nope") }); s != http.StatusUnauthorized {
		t.Errorf("GET with a wrong password: %d", s)
	}
	s, body := r.get(t, "/", func(req *http.Request) { req.SetBasicAuth("ops", uiPass) })
	if s != http.StatusOK || !strings.Contains(body, "postgres://postgres:xxxxx@") {
		t.Errorf("GET with the password: %d\n%s", s, body)
	}
	r.stop()
	for name, out := range map[string]string{"stdout": r.stdout.String(), "stderr": r.stderr.String(), "page": body} {
		if strings.Contains(out, "brokerS3cret") || strings.Contains(out, uiPass) {
			t.Errorf("%s shows a credential: %s", name, out)
		}
	}
}

func TestUIUsage(t *testing.T) {
	t.Parallel()
	fails(t, 2, "--user needs a password", "", "--url", "mem://", "ui", "--user", "ops")
	fails(t, 2, "--listen", "", "--url", "mem://", "ui", "--listen", "8080")
	fails(t, 2, "--allowed-hosts", "", "--url", "mem://", "ui", "--allowed-hosts", "fila.internal,,other")
	fails(t, 2, "--allowed-hosts", "", "--url", "mem://", "ui", "--allowed-hosts", "https://fila.internal/")
	fails(t, 2, "--queue", "", "--url", "mem://", "ui", "--queue", "not a queue")
	fails(t, 2, "Options.Prefix", "", "--url", "mem://", "ui", "--listen", "127.0.0.1:0", "--prefix", "fila")
	// A port in use.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fails(t, 1, "cannot listen on", "", "--url", "mem://", "ui", "--listen", ln.Addr().String())
}

func TestListenWarning(t *testing.T) {
	t.Parallel()
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	if w := listenWarning(loop, false, false, false); w != "" {
		t.Errorf("warning on loopback: %s", w)
	}
	if w := listenWarning(&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, false, false, false); w != "" {
		t.Errorf("warning on ::1: %s", w)
	}
	all := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	for _, tc := range []struct {
		auth, ro bool
		want     string
	}{
		{false, false, "replay, purge and delete"},
		{false, true, "read every message"},
		{true, false, "TLS"},
	} {
		w := listenWarning(all, tc.auth, tc.ro, false)
		if !strings.Contains(w, "not loopback") || !strings.Contains(w, tc.want) || !strings.Contains(w, "--allowed-hosts") {
			t.Errorf("listenWarning(auth %v, read-only %v) = %q, want it to mention %q", tc.auth, tc.ro, w, tc.want)
		}
	}
}

// TestUIOffLoopback: on an address that is not loopback the dashboard
// refuses to start without credentials unless told so on purpose, and
// --allowed-hosts limits the Host names it answers to.
func TestUIOffLoopback(t *testing.T) {
	t.Parallel()
	fails(t, 2, "--allow-no-auth", "", "--url", "mem://", "ui", "--listen", "0.0.0.0:0")
	fails(t, 2, "--allow-no-auth", "", "--url", "mem://", "ui", "--listen", "0.0.0.0:0", "--read-only")
	raw := "mem://" + unique("cliuihosts")
	client(t, raw)
	r := startUI(t, map[string]string{uiTokenEnv: "tok"}, "--url", raw, "--listen", "0.0.0.0:0", "--allowed-hosts", "fila.internal,Other.Example")
	if strings.Contains(r.stderr.String(), "any host name") {
		t.Errorf("warned about host names that were given: %s", r.stderr)
	}
	bearer := func(host string) func(*http.Request) {
		return func(req *http.Request) { req.Host = host; req.Header.Set("Authorization", "Bearer tok") }
	}
	for host, want := range map[string]int{"fila.internal:8080": http.StatusOK, "other.example": http.StatusOK,
		"evil.example": http.StatusMisdirectedRequest, "localhost": http.StatusMisdirectedRequest} {
		if s, _ := r.get(t, "/", bearer(host)); s != want {
			t.Errorf("GET with Host %s: %d, want %d", host, s, want)
		}
	}
	// On purpose: no credentials, any host, and a warning.
	open := startUI(t, nil, "--url", raw, "--listen", "0.0.0.0:0", "--allow-no-auth", "--read-only")
	if !strings.Contains(open.stderr.String(), "any host name") {
		t.Errorf("no warning about host names: %s", open.stderr)
	}
	if s, _ := open.get(t, "/", func(req *http.Request) { req.Host = "evil.example" }); s != http.StatusOK {
		t.Errorf("--allow-no-auth without --allowed-hosts: %d, want 200", s)
	}
}
