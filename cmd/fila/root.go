package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/mysql"
	"github.com/fila-go/fila/postgres"
)

// Exit codes; see the package documentation.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitUnsupported = 4
	exitDuplicate   = 5
	// exitAccessDenied: the broker refused the credentials or the
	// operation's permissions (fila.ErrAccessDenied).
	exitAccessDenied = 6
	// exitInterrupted is the shell's code for a command ended by SIGINT.
	exitInterrupted = 130
)

// urlEnv is the environment variable holding the broker URL when --url is
// not given.
const urlEnv = "FILA_URL"

// env is what a command run sees of the outside world, so tests run commands
// in-process with buffers instead of a terminal.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// isTerminal reports whether the writer is a terminal (for --watch).
	isTerminal func(any) bool
	// buildInfo reads the binary's build information (for fila version);
	// nil means runtime/debug.ReadBuildInfo.
	buildInfo func() (*debug.BuildInfo, bool)
}

// app holds the global flags of one run.
type app struct {
	env
	url            string
	connectTimeout time.Duration
}

// exitErr carries an exit code with an error.
type exitErr struct {
	code int
	err  error
	// usage marks a misuse of the command line, answered with a pointer to
	// --help.
	usage bool
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...), usage: true}
}

// run runs the fila command with args and returns its exit code. Errors are
// written to e.stderr prefixed with "fila: ".
func run(ctx context.Context, args []string, e env) int {
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	if e.isTerminal == nil {
		e.isTerminal = func(any) bool { return false }
	}
	if e.stdin == nil {
		e.stdin = strings.NewReader("")
	}
	if e.buildInfo == nil {
		e.buildInfo = debug.ReadBuildInfo
	}
	a := &app{env: e}
	root := newRoot(a)
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	started := false
	markStarted(root, &started)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	code := exitCode(err)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		fmt.Fprintln(e.stderr, "fila: interrupted")
		return exitInterrupted
	}
	if !started && code == exitError {
		// Cobra failed before any command ran: an unknown command, a missing
		// required flag or a wrong number of arguments.
		code = exitUsage
	}
	// An argument may be a URL with credentials given in the wrong place
	// (fila amqp://user:pass@host/ stats): errors echo arguments, so every
	// URL in them is redacted.
	fmt.Fprintf(e.stderr, "fila: %s\n", redactURLs(strings.TrimPrefix(err.Error(), "fila: ")))
	var ee *exitErr
	if !started || errors.As(err, &ee) && ee.usage {
		// The help of the command that was misused, not the root's.
		fmt.Fprintf(e.stderr, "For usage, see '%s --help'.\n", cmd.CommandPath())
	}
	return code
}

// urlLike matches what looks like a URL in a message: a scheme, "://" and
// everything up to a space or quote.
var urlLike = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`]*")

// redactURLs replaces every URL in s by its redacted form (fila.Redact):
// no password or credential parameter shows.
func redactURLs(s string) string {
	return urlLike.ReplaceAllStringFunc(s, fila.Redact)
}

// warnf writes a warning to standard error: something the user should know
// that does not make the command fail.
func (a *app) warnf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "fila: warning: %s\n", redactURLs(fmt.Sprintf(format, args...)))
}

// markStarted wraps the RunE of cmd and its subcommands to set *started,
// telling errors of the commands from cobra's own (usage) errors.
func markStarted(cmd *cobra.Command, started *bool) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			*started = true
			return run(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		markStarted(sub, started)
	}
}

// exitCode maps an error to the command's exit code.
func exitCode(err error) int {
	var ee *exitErr
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, fila.ErrUnsupported):
		return exitUnsupported
	case errors.Is(err, fila.ErrDuplicate):
		return exitDuplicate
	case errors.Is(err, fila.ErrAccessDenied):
		return exitAccessDenied
	case errors.Is(err, fila.ErrInvalid), errors.Is(err, fila.ErrTooLarge):
		return exitUsage
	default:
		return exitError
	}
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "fila",
		Short: "Operate Fila queues: stats, pause, messages, cancel, dead letters, enqueue, topics, workflows, schema, migrate, web dashboard",
		Long: `fila operates Fila queues on any supported broker: queue stats, pausing and
resuming queues, listing, showing and cancelling messages, dead-letter
inspection, replay and purge, enqueueing from scripts, topics (fan-out: subscribe queues, publish),
workflows (list, show a workflow's steps, cancel, delete), schema migrations,
moving a queue to another broker (fila migrate --from URL --to URL), and a
web dashboard (fila ui).

The broker URL comes from --url or the FILA_URL environment variable:
  postgres://user@host:5432/db   mysql://user:pass@host:3306/db   redis://host:6379/0
  amqp://user:pass@host:5672/    mongodb://host:27017/db
  mem:// (in-process; only useful in tests)

Exit codes: 0 ok, 1 operation failed, 2 usage or invalid input, 3 broker
unreachable, 4 the broker's driver lacks the capability, 5 duplicate dedup key,
6 the broker refused the credentials or permissions, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.url, "url", "", "broker URL (default $"+urlEnv+")")
	root.PersistentFlags().DurationVar(&a.connectTimeout, "connect-timeout", 5*time.Second, "how long to wait for the broker to answer")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitErr{code: exitUsage, err: err, usage: true} })
	root.Version = versionLine(a.buildInfo)
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newStatsCmd(a), newQueueCmd(a), newMessageCmd(a), newDeadCmd(a), newEnqueueCmd(a), newSchemaCmd(a), newMigrateCmd(a), newUICmd(a), newTopicCmd(a), newWorkflowCmd(a), newVersionCmd(a))
	return root
}

// brokerURL returns the broker URL from --url or FILA_URL.
func (a *app) brokerURL() (string, error) {
	u := a.url
	if u == "" {
		u = a.getenv(urlEnv)
	}
	if u == "" {
		return "", usagef("no broker URL: pass --url or set %s (for example postgres://localhost:5432/app or redis://localhost:6379)", urlEnv)
	}
	return u, nil
}

// open opens a client on the broker URL and pings the broker, within the
// connect timeout. A bad URL is a usage error; a broker that cannot be
// reached exits with exitUnreachable.
func (a *app) open(ctx context.Context) (*fila.Client, error) {
	raw, err := a.brokerURL()
	if err != nil {
		return nil, err
	}
	return a.openURL(ctx, raw)
}

func (a *app) openURL(ctx context.Context, raw string) (*fila.Client, error) {
	octx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	c, err := fila.Open(octx, raw)
	if err != nil {
		return nil, a.connectErr(ctx, octx, raw, err)
	}
	if err := c.Ping(octx); err != nil {
		_ = c.Close()
		return nil, a.connectErr(ctx, octx, raw, err)
	}
	return c, nil
}

// connectErr explains a failure to open or ping the broker.
func (a *app) connectErr(ctx, octx context.Context, raw string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, postgres.ErrNotMigrated), errors.Is(err, mysql.ErrNotMigrated):
		// The PostgreSQL schema or the MySQL tables are missing or old.
		return &exitErr{code: exitUsage, err: fmt.Errorf("%w\nRun 'fila schema up' to create or upgrade it.", err)}
	case errors.Is(err, fila.ErrInvalid):
		return &exitErr{code: exitUsage, err: fmt.Errorf("%w\nFix the URL (--url or $%s, or --from/--to of fila migrate); 'fila --help' shows the form for each broker.", err, urlEnv)}
	case errors.Is(err, fila.ErrAccessDenied):
		return &exitErr{code: exitAccessDenied, err: fmt.Errorf("the broker at %s refused the credentials or permissions: %w\nCheck the user and password in the URL and the user's grants on the broker.", fila.Redact(raw), err)}
	case octx.Err() != nil:
		return &exitErr{code: exitUnreachable, err: fmt.Errorf("broker at %s did not answer within %v (--connect-timeout): %w\nCheck that the broker is running and that the URL's host and port are right; a busy or distant broker may need a longer --connect-timeout.", fila.Redact(raw), a.connectTimeout, err)}
	default:
		return &exitErr{code: exitUnreachable, err: fmt.Errorf("cannot reach the broker at %s: %w\nCheck that the broker is running and that the URL's host and port are right.", fila.Redact(raw), err)}
	}
}

// withClient opens a client, runs f and closes the client.
func (a *app) withClient(cmd *cobra.Command, f func(ctx context.Context, c *fila.Client) error) error {
	ctx := cmd.Context()
	c, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(ctx, c)
}
