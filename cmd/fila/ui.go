package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
)

// Environment variables holding the dashboard's credentials, so they stay
// out of the process list.
const (
	uiTokenEnv    = "FILA_UI_TOKEN"
	uiPasswordEnv = "FILA_UI_PASSWORD"
)

type uiFlags struct {
	listen   string
	prefix   string
	readOnly bool
	queues   []string
	token    string
	password string
	user     string
	sample   time.Duration
	refresh  time.Duration
	// allowNoAuth serves a non-loopback address without credentials.
	allowNoAuth bool
	// allowedHosts are the Host names answered besides loopback's.
	allowedHosts []string
}

func newUICmd(a *app) *cobra.Command {
	var f uiFlags
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard: queues, charts, messages, dead letters, replay, purge, pause and cancel",
		Long: `Serve the web dashboard (package github.com/fila-go/fila/ui) for the broker:
every queue with its ready, delayed, leased and dead counts and oldest ready
age, charts of the last hour, the ready, delayed and running messages of a
queue (paged, found by id; not on RabbitMQ), dead letters in full,
workflows with the state of each step, and replay, purge,
queue delete, queue pause and resume, cancelling a message by id and
cancelling a workflow, each behind a confirmation step.

It listens on loopback (127.0.0.1:8080) unless --listen says otherwise; on
loopback it answers only to the host names localhost, 127.0.0.1 and [::1]
(against DNS rebinding), and to those --allowed-hosts adds. Another address
needs credentials: it refuses to start without them unless --allow-no-auth
says so on purpose, and answers only to --allowed-hosts when given (name
them: the Host check is what stops DNS rebinding there too).
--read-only hides and refuses every action. A bearer token (--token or
$FILA_UI_TOKEN) or a basic-auth password (--password or $FILA_UI_PASSWORD,
with --user) makes the dashboard ask for credentials: browsers sign in with
the token on a form, which sets a session cookie; scripts send it as
"Authorization: Bearer". Prefer the environment variables, which other
users of the machine cannot read in the process list. Neither is ever
printed or logged. After five wrong credentials from one address, each
further attempt waits, longer each time (429 Too Many Requests).

RabbitMQ lists its queues only through its management API (fila_management_url
in its URL): otherwise name them with --queue (repeatable). The
p95 run time charts need the workers' run times, which only a dashboard
mounted in the worker's own process has (see package ui).

Stop with Ctrl-C.`,
		Example: `  fila ui
  fila ui --listen 127.0.0.1:9000 --read-only
  FILA_UI_PASSWORD=s3cret fila ui --listen :8080 --user ops --allowed-hosts fila.internal
  fila ui --url amqp://guest:guest@localhost:5672/ --queue emails --queue reports`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.token == "" {
				f.token = a.getenv(uiTokenEnv)
			}
			if f.password == "" {
				f.password = a.getenv(uiPasswordEnv)
			}
			if f.user != "" && f.password == "" {
				return usagef("--user needs a password (--password or $%s)", uiPasswordEnv)
			}
			for _, q := range f.queues {
				if err := fila.ValidateQueueName(q); err != nil {
					return &exitErr{code: exitUsage, err: fmt.Errorf("--queue: %w", err)}
				}
			}
			for _, h := range f.allowedHosts {
				if h = strings.TrimSpace(h); h == "" || strings.ContainsAny(h, "/:@ ") && !strings.HasPrefix(h, "[") {
					return usagef("--allowed-hosts %q: want host names or addresses without port, such as fila.internal or 10.0.0.5", h)
				}
			}
			if _, _, err := net.SplitHostPort(f.listen); err != nil {
				return usagef("--listen %q: want HOST:PORT, such as 127.0.0.1:8080 (%v)", f.listen, err)
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				raw, _ := a.brokerURL()
				return a.serveUI(ctx, c, raw, f)
			})
		},
	}
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on (HOST:PORT); not loopback means anyone who reaches it")
	cmd.Flags().StringVar(&f.prefix, "prefix", "", "path prefix to serve under, such as /fila (behind a proxy)")
	cmd.Flags().BoolVar(&f.readOnly, "read-only", false, "hide and refuse every action (replay, purge, delete, pause, resume, cancel)")
	cmd.Flags().StringArrayVar(&f.queues, "queue", nil, "queue to show besides those the broker lists (repeatable; needed on RabbitMQ)")
	cmd.Flags().StringVar(&f.token, "token", "", "require this bearer token (default $"+uiTokenEnv+")")
	cmd.Flags().StringVar(&f.password, "password", "", "require this basic-auth password (default $"+uiPasswordEnv+")")
	cmd.Flags().StringVar(&f.user, "user", "", "basic-auth user name (default: any)")
	cmd.Flags().BoolVar(&f.allowNoAuth, "allow-no-auth", false, "serve an address that is not loopback without a token or password (anyone who reaches it reads every message)")
	cmd.Flags().StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "host names to answer besides loopback's (comma-separated or repeated); off loopback, only these when given")
	cmd.Flags().DurationVar(&f.sample, "sample-interval", ui.DefaultSampleInterval, "how often to read the queues' stats for the charts")
	cmd.Flags().DurationVar(&f.refresh, "refresh", ui.DefaultRefresh, "how often open pages reload their numbers (negative: never)")
	return cmd
}

// serveUI serves the dashboard on f.listen until ctx ends.
func (a *app) serveUI(ctx context.Context, c *fila.Client, rawURL string, f uiFlags) error {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := ui.New(c, ui.Options{
		Prefix: f.prefix, ReadOnly: f.readOnly, Token: f.token, Password: f.password, User: f.user,
		Queues: f.queues, SampleInterval: f.sample, Refresh: f.refresh, Broker: rawURL, Logger: log,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return &exitErr{code: exitError, err: fmt.Errorf("cannot listen on %s: %w", f.listen, err)}
	}
	auth := f.token != "" || f.password != ""
	if !isLoopback(ln.Addr()) && !auth && !f.allowNoAuth {
		_ = ln.Close()
		return usagef("refusing to serve %s without credentials: whoever reaches it could read every message and dead letter. "+
			"Set $%s or $%s, listen on 127.0.0.1, or pass --allow-no-auth on purpose", ln.Addr(), uiTokenEnv, uiPasswordEnv)
	}
	var handler http.Handler = h
	if isLoopback(ln.Addr()) || len(f.allowedHosts) > 0 {
		handler = allowedHosts(h, isLoopback(ln.Addr()), f.allowedHosts)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	prefix := strings.TrimSuffix(f.prefix, "/")
	fmt.Fprintf(a.stdout, "fila ui: serving %s at http://%s%s/ (%s)\n", fila.Redact(rawURL), ln.Addr(), prefix, uiMode(f))
	if w := listenWarning(ln.Addr(), auth, f.readOnly, len(f.allowedHosts) > 0); w != "" {
		fmt.Fprintf(a.stderr, "fila ui: warning: %s\n", w)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(a.stdout, "fila ui: stopped")
	return nil
}

// uiMode describes the dashboard's access rules, without the credentials.
func uiMode(f uiFlags) string {
	var parts []string
	if f.readOnly {
		parts = append(parts, "read-only")
	} else {
		parts = append(parts, "actions enabled")
	}
	switch {
	case f.token != "" && f.password != "":
		parts = append(parts, "bearer token or basic-auth password required")
	case f.token != "":
		parts = append(parts, "bearer token required")
	case f.password != "":
		parts = append(parts, "basic-auth password required")
	default:
		parts = append(parts, "no authentication")
	}
	return strings.Join(parts, ", ")
}

func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// allowedHosts refuses requests whose Host is not one of names or, with
// loopback, a loopback name or address. A dashboard on loopback is
// reachable from the browser of the same machine only, unless a web page's
// own name is made to resolve to 127.0.0.1 (DNS rebinding): then that page
// is same-origin with the dashboard and could read it and post its forms.
// Such requests carry the page's name as Host, so they are refused; the
// same holds for a dashboard on a network address with its names listed.
func allowedHosts(next http.Handler, loopback bool, names []string) http.Handler {
	allowed := make(map[string]bool, len(names))
	for _, n := range names {
		allowed[strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(n), "["), "]"))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
		ip := net.ParseIP(host)
		ok := allowed[host] || loopback && (host == "localhost" || ip != nil && ip.IsLoopback())
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			if loopback {
				_, _ = fmt.Fprintln(w, "421 Misdirected Request: this dashboard listens on loopback and answers only to localhost, 127.0.0.1, [::1] and the names --allowed-hosts gives")
			} else {
				_, _ = fmt.Fprintln(w, "421 Misdirected Request: this dashboard answers only to the names --allowed-hosts gives")
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// listenWarning is the warning for a dashboard listening on addr, empty on
// loopback.
func listenWarning(addr net.Addr, auth, readOnly, hostsNamed bool) string {
	if isLoopback(addr) {
		return ""
	}
	w := fmt.Sprintf("listening on %s, which is not loopback: whoever can reach this address can open the dashboard", addr)
	switch {
	case !auth && !readOnly:
		w += ", read every message and dead letter, and replay, purge and delete queues, pause them and cancel messages (--allow-no-auth); set a password ($" + uiPasswordEnv + ") or --read-only"
	case !auth:
		w += " and read every message and dead letter (--allow-no-auth); set a password ($" + uiPasswordEnv + ")"
	default:
		w += " and try the credentials; the connection is plain HTTP, so put a TLS proxy in front"
	}
	if !hostsNamed {
		w += "; it answers to any host name: name yours with --allowed-hosts (against DNS rebinding)"
	}
	return w
}
