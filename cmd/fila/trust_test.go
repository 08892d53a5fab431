package main

// Tests of issue #21, "CLI output to trust": what the command prints is
// what the broker knows, and every error says what to do next.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
)

// stuckDriver is a memory driver whose claims never return a message, like
// a source broker whose claims time out: its stats count ready messages
// that no receive gets.
type stuckDriver struct{ *memory.Driver }

func (stuckDriver) DriverName() string { return "stuck" }

func (stuckDriver) Receive(ctx context.Context, _ string, _ backend.ReceiveParams) ([]backend.Delivery, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func init() {
	fila.Register("clitest-stuck", func(_ context.Context, u *url.URL, _ backend.OpenOptions) (backend.Driver, error) {
		return stuckDriver{memory.Named("stuck" + u.Host).Open()}, nil
	})
}

// TestStatsUnknownIsNotZero: the counts a broker cannot know (RabbitMQ's
// delayed and leased, seen from a process that made none) show n/a in the
// table and null in the JSON, never 0; brokers that know them print
// numbers.
func TestStatsUnknownIsNotZero(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("unknown")
		testenv.CleanupQueue(t, c, q)
		ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x")

		out := ok(t, "", "--url", url, "stats", q)
		row := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])
		want := "0 0"
		if b.instanceStats {
			want = "n/a n/a"
		}
		if len(row) != 7 || row[2]+" "+row[3] != want {
			t.Errorf("stats row %q: delayed and leased want %q", row, want)
		}

		js := ok(t, "", "--url", url, "stats", "--json", q)
		wantJSON := `"ready":1,"delayed":0,"leased":0,"dead":0`
		if b.instanceStats {
			wantJSON = `"ready":1,"delayed":null,"leased":null,"dead":0`
		}
		if !strings.Contains(js, wantJSON) || strings.Contains(js, "lower_bounds") {
			t.Errorf("stats --json = %s; want %s", js, wantJSON)
		}
	})
}

// TestStatsLowerBounds: a count the driver knows only part of prints as
// "≥N" and is named in "lower_bounds" in the JSON.
func TestStatsLowerBounds(t *testing.T) {
	t.Parallel()
	three := int64(3)
	rows := []statsRow{{Queue: "q", Ready: 1, Delayed: &three, LowerBounds: []string{"delayed"}}}
	var out bytes.Buffer
	if err := writeStats(&out, rows, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(strings.Split(out.String(), "\n")[1]); f[2] != "≥3" || f[3] != "n/a" {
		t.Errorf("row %q; want delayed ≥3 and leased n/a", f)
	}
	out.Reset()
	if err := writeStats(&out, rows, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `"delayed":3,"leased":null`) || !strings.Contains(s, `"lower_bounds":["delayed"]`) {
		t.Errorf("JSON %s", s)
	}
}

// TestUnknownQueueWarns: stats of a queue that holds nothing and that the
// broker does not list, and deleting it, warn on standard error instead of
// passing it off as an empty queue that was deleted; where the broker
// cannot list queues the warning says it cannot tell.
func TestUnknownQueueWarns(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q, full := unique("nosuch"), unique("full")
		testenv.CleanupQueue(t, c, full)
		ok(t, "", "--url", url, "enqueue", "-q", full, "-k", "k", "--body", "x")

		wantWarn := fmt.Sprintf(`fila: warning: queue %q holds nothing and the broker has no such queue`, q)
		if b.noQueueList {
			wantWarn = fmt.Sprintf(`fila: warning: queue %q holds no ready message nor dead letter, and the %s driver cannot tell whether the queue exists: check the name`, q, b.name)
		}
		r := cli(t, "", "--url", url, "stats", q, full)
		if r.code != 0 || !strings.Contains(r.stderr, wantWarn) || strings.Contains(r.stderr, full) || !strings.Contains(r.stdout, q) {
			t.Errorf("stats of an unknown queue: exit %d, stdout %q, stderr %q; want exit 0 and the warning %q, none for %s", r.code, r.stdout, r.stderr, wantWarn, full)
		}
		// --json too: the warning stays on standard error.
		r = cli(t, "", "--url", url, "stats", "--json", q)
		if r.code != 0 || !strings.Contains(r.stderr, wantWarn) || !json.Valid([]byte(r.stdout)) {
			t.Errorf("stats --json of an unknown queue: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}

		r = cli(t, "", "--url", url, "queue", "delete", q, "--yes")
		if r.code != 0 || !strings.Contains(r.stderr, wantWarn) {
			t.Errorf("queue delete of an unknown queue: exit %d, stdout %q, stderr %q; want the warning %q", r.code, r.stdout, r.stderr, wantWarn)
		}
		wantOut := fmt.Sprintf("nothing to delete: queue %q holds nothing and the broker has no such queue\n", q)
		if b.noQueueList {
			wantOut = fmt.Sprintf("deleted queue %q\n", q) // it may have existed
		}
		if r.stdout != wantOut {
			t.Errorf("queue delete of an unknown queue printed %q; want %q", r.stdout, wantOut)
		}
	})
}

// TestMigrateMovedNothing: a migration that moves nothing although the
// source counts ready messages fails with the reason instead of blaming
// producers.
func TestMigrateMovedNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("paused", func(t *testing.T) {
		t.Parallel()
		from, to := "mem://"+unique("pfrom"), "mem://"+unique("pto")
		c := client(t, from)
		if _, err := c.EnqueueBatch(ctx, "orders", []fila.Message{{Kind: "a"}, {Kind: "b"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.QueuePause(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		r := fails(t, 1, "moved nothing: the source queue orders is paused", "", "migrate", "--from", from, "--to", to, "-q", "orders")
		if !strings.Contains(r.stderr, "fila queue resume orders") || strings.Contains(r.stdout, "producers") {
			t.Errorf("stdout %q, stderr %q; want the resume hint and no blame on producers", r.stdout, r.stderr)
		}
	})
	t.Run("claims time out", func(t *testing.T) {
		t.Parallel()
		from, to := "clitest-stuck://"+unique("sfrom"), "mem://"+unique("sto")
		c := client(t, from)
		if _, err := c.EnqueueBatch(ctx, "orders", []fila.Message{{Kind: "a"}, {Kind: "b"}}); err != nil {
			t.Fatal(err)
		}
		r := fails(t, 1, "moved nothing: the source (stuck) counts 2 ready messages in queue orders, but receiving from it returned none within 1s", "",
			"migrate", "--from", from, "--to", to, "-q", "orders")
		if !strings.Contains(r.stderr, "--idle") || strings.Contains(r.stdout, "producers") {
			t.Errorf("stdout %q, stderr %q; want what to do and no blame on producers", r.stdout, r.stderr)
		}
	})
	t.Run("empty source", func(t *testing.T) {
		t.Parallel()
		// Nothing to move is a success.
		out := ok(t, "", "migrate", "--from", "mem://"+unique("efrom"), "--to", "mem://"+unique("eto"), "-q", "orders")
		if !strings.Contains(out, "moved 0 messages") || !strings.Contains(out, "is empty") {
			t.Errorf("migrate of an empty queue: %q", out)
		}
	})
}

// TestUsageHelpOfTheCommand: a usage error points to the misused command's
// help; fila migrate's help leaves out the --url it does not use (and
// refuses it).
func TestUsageHelpOfTheCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		help string
		args []string
	}{
		{"fila stats --help", []string{"--url", "mem://", "stats", "--bogus", "q"}},
		{"fila stats --help", []string{"--url", "mem://", "stats"}},
		{"fila dead list --help", []string{"--url", "mem://", "dead", "list"}},
		{"fila queue delete --help", []string{"--url", "mem://", "queue", "delete"}},
		{"fila migrate --help", []string{"migrate", "--from", "mem://", "--to", "mem://x"}},
		{"fila --help", []string{"--url", "mem://", "bogus"}},
	} {
		r := fails(t, 2, "see '"+c.help+"'", "", c.args...)
		if c.help != "fila --help" && strings.Contains(r.stderr, "'fila --help'") {
			t.Errorf("fila %s: stderr %q points to the root help", strings.Join(c.args, " "), r.stderr)
		}
	}

	help := ok(t, "", "migrate", "--help")
	if strings.Contains(help, "--url") || !strings.Contains(help, "--connect-timeout") || !strings.Contains(help, "--from") {
		t.Errorf("fila migrate --help lists --url, or lacks --connect-timeout or --from:\n%s", help)
	}
	if help := ok(t, "", "stats", "--help"); !strings.Contains(help, "--url") {
		t.Errorf("fila stats --help lost --url:\n%s", help)
	}
	fails(t, 2, "fila migrate does not use --url", "", "--url", "mem://", "migrate", "--from", "mem://a", "--to", "mem://b", "-q", "q")
}

// TestDeadCursorBoundToFilter: a dead list cursor works only with the
// queue and --kind of the listing that printed it.
func TestDeadCursorBoundToFilter(t *testing.T) {
	t.Parallel()
	u := "mem://" + unique("cursor")
	c := client(t, u)
	q := "dq"
	ids := deadSetup(t, c, q) // kinds a, a, b
	cursor := func(args ...string) string {
		t.Helper()
		out := ok(t, "", append([]string{"--url", u, "dead", "list", "-q", q, "--limit", "1"}, args...)...)
		m := regexp.MustCompile(`more: --cursor (\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no cursor in\n%s", out)
		}
		return m[1]
	}
	byKind := cursor("--kind", "a")
	// Used with the same filter it pages on (with another --limit too).
	if out := ok(t, "", "--url", u, "dead", "list", "-q", q, "--kind", "a", "--limit", "5", "--cursor", byKind); !strings.Contains(out, ids[1]) || strings.Contains(out, ids[2]) {
		t.Errorf("second page of kind a:\n%s", out)
	}
	// Without --kind, with another kind, or on another queue it is refused.
	fails(t, 2, "--cursor continues a listing of another queue or --kind", "", "--url", u, "dead", "list", "-q", q, "--cursor", byKind)
	fails(t, 2, "run it with the -q and --kind of the listing that printed it", "", "--url", u, "dead", "list", "-q", q, "--kind", "b", "--cursor", byKind)
	fails(t, 2, "--cursor continues a listing of another queue", "", "--url", u, "dead", "list", "-q", "other", "--kind", "a", "--cursor", byKind)
	// A cursor of every kind used with --kind says to drop --kind.
	all := cursor()
	fails(t, 2, `--cursor continues a listing of every kind, not --kind "a": drop --kind`, "", "--url", u, "dead", "list", "-q", q, "--kind", "a", "--cursor", all)
	// A cursor that fila did not print is refused.
	fails(t, 2, "drop --cursor to start from the first page", "", "--url", u, "dead", "list", "-q", q, "--cursor", "garbage")
	// The JSON's next is bound the same way.
	var page struct{ Next string }
	if err := json.Unmarshal([]byte(ok(t, "", "--url", u, "dead", "list", "-q", q, "--kind", "a", "--limit", "1", "--json")), &page); err != nil {
		t.Fatal(err)
	}
	if page.Next != byKind {
		t.Errorf("--json next = %q; want the table's %q", page.Next, byKind)
	}
}

// TestVersion: fila version prints the module version from the build
// information ("(devel)" when none), the module and the Go version.
func TestVersion(t *testing.T) {
	t.Parallel()
	out := ok(t, "", "version")
	if !regexp.MustCompile(`^fila (\(devel\)|v\S+)\nmodule: github.com/fila-go/fila\ngo: +` + regexp.QuoteMeta(runtime.Version()) + ` `).MatchString(out) {
		t.Errorf("fila version:\n%s", out)
	}

	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/fila-go/fila", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	devel := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/fila-go/fila", Version: "(devel)"}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, c := range []struct {
		read func() (*debug.BuildInfo, bool)
		args []string
		want string
	}{
		{stamped, []string{"version"}, "fila v1.2.3\nmodule: github.com/fila-go/fila\ngo:     go1.99.1 " + runtime.GOOS + "/" + runtime.GOARCH + "\ncommit: abc123 (with uncommitted changes)\n"},
		{devel, []string{"version"}, "fila (devel)\nmodule: github.com/fila-go/fila\ngo:     go1.99.1 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{none, []string{"version"}, "fila (devel)\nmodule: github.com/fila-go/fila\ngo:     " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"},
		{stamped, []string{"--version"}, "fila v1.2.3\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, env{stdout: &stdout, stderr: &stderr, buildInfo: c.read})
		if code != 0 || stdout.String() != c.want {
			t.Errorf("fila %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(c.args, " "), code, stdout.String(), stderr.String(), c.want)
		}
	}
	fails(t, 2, "takes no arguments", "", "version", "extra")
}

// TestErrorsSayWhatToDo: errors end with the next step.
func TestErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	u := "mem://" + unique("todo")
	fails(t, 3, "Check that the broker is running", "", "--url", "redis://127.0.0.1:1/0", "--connect-timeout", "1s", "stats", "q")
	fails(t, 2, "Fix the URL", "", "--url", "mem://?bogus=1", "stats", "q")
	fails(t, 1, "fila dead list -q q shows the ids", "", "--url", u, "dead", "show", "-q", "q", "no-such-id")
	fails(t, 1, "pass --yes", "n\n", "--url", u, "dead", "purge", "-q", "q", "--all")
	ok(t, "", "--url", u, "enqueue", "-q", "q", "-k", "k", "--body", "x")
	fails(t, 1, "pass --yes", "n\n", "--url", u, "queue", "delete", "q", "--force")
	bare := "clitest-bare://" + unique("todo")
	fails(t, 4, "Name the queues instead: fila stats QUEUE", "", "--url", bare, "queue", "list")
	fails(t, 4, "Name the queues instead: fila stats QUEUE", "", "--url", bare, "stats", "--all")
}

// TestCredentialsInArgumentsNeverShown: a URL given where a queue name,
// command or id belongs is echoed by the error only redacted.
func TestCredentialsInArgumentsNeverShown(t *testing.T) {
	t.Parallel()
	for _, raw := range secretURLs {
		for _, args := range [][]string{
			{raw},
			{raw, "stats", "q"},
			{"--url", "mem://", "stats", raw},
			{"--url", "mem://", "queue", "list", raw},
			{"--url", "mem://", "queue", "delete", raw},
			{"--url", "mem://", "dead", "show", "-q", "q", raw},
			{"--url", "mem://", "dead", "list", "-q", raw},
			{"--url", "mem://", "enqueue", "-q", "q", "-k", "k", "--body", "x", raw},
		} {
			r := cli(t, "", args...)
			if r.code == 0 || strings.Contains(r.stderr, "S3cret") || strings.Contains(r.stdout, "S3cret") {
				t.Errorf("fila %s: exit %d, stdout %q, stderr %q; want a failure without the credentials", fila.Redact(strings.Join(args, " ")), r.code, r.stdout, r.stderr)
			}
		}
	}
}
