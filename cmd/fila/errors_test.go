package main

import (
	"context"
	"database/sql"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/memory"
)

// bareDriver hides every optional capability of the driver it wraps, to
// test the missing-capability errors.
type bareDriver struct{ backend.Driver }

func (bareDriver) DriverName() string { return "bare" }

// noMarksDriver has stats and queue listing but no marks: it cannot pause
// queues nor cancel messages.
type noMarksDriver struct {
	backend.Driver
	backend.StatsReader
	backend.QueueLister
}

func (noMarksDriver) DriverName() string { return "nomarks" }

// noListDriver has marks but cannot list them: it pauses queues but cannot
// cancel messages.
type noListDriver struct {
	backend.Driver
	backend.Marker
}

func (noListDriver) DriverName() string { return "nolist" }

func init() {
	fila.Register("clitest-bare", func(_ context.Context, u *url.URL, _ backend.OpenOptions) (backend.Driver, error) {
		return bareDriver{memory.Named("bare" + u.Host).Open()}, nil
	})
	fila.Register("clitest-nomarks", func(_ context.Context, u *url.URL, _ backend.OpenOptions) (backend.Driver, error) {
		d := memory.Named("nomarks" + u.Host).Open()
		return noMarksDriver{d, d, d}, nil
	})
	fila.Register("clitest-nolist", func(_ context.Context, u *url.URL, _ backend.OpenOptions) (backend.Driver, error) {
		d := memory.Named("nolist" + u.Host).Open()
		return noListDriver{d, d}, nil
	})
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	fails(t, 2, "no broker URL: pass --url or set FILA_URL", "", "stats", "q")
	fails(t, 2, "name at least one queue", "", "--url", "mem://", "stats")
	fails(t, 2, `unknown command "bogus"`, "", "--url", "mem://", "bogus")
	fails(t, 2, "unknown flag", "", "--url", "mem://", "stats", "--bogus", "q")
	fails(t, 2, "invalid argument", "", "--url", "mem://", "stats", "not a queue")
	fails(t, 2, "--json and --raw", "", "--url", "mem://", "dead", "show", "-q", "q", "--json", "--raw", "id")
	if r := cli(t, "", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Exit codes") {
		t.Errorf("--help: %+v", r)
	}
}

func TestBadURL(t *testing.T) {
	t.Parallel()
	fails(t, 2, `no driver registered for scheme "nats"`, "", "--url", "nats://localhost", "stats", "q")
	fails(t, 2, "has no scheme", "", "--url", "localhost", "stats", "q")
	fails(t, 2, "unknown URL parameter", "", "--url", "mem://?bogus=1", "stats", "q")
	fails(t, 2, "fila_bogus", "", "--url", "postgres://localhost/db?fila_bogus=1", "stats", "q")
	// schema up explains a bad URL the same way.
	fails(t, 2, `no driver registered for scheme "nats"`, "", "--url", "nats://localhost", "schema", "up")
}

func TestURLFromEnvironment(t *testing.T) {
	t.Parallel()
	q := unique("envurl")
	var out, errb syncBuffer
	code := run(context.Background(), []string{"enqueue", "-q", q, "-k", "k", "--body", "x"}, env{
		stdout: &out, stderr: &errb,
		getenv: func(k string) string {
			if k == "FILA_URL" {
				return "mem://envurl"
			}
			return ""
		},
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if s := ok(t, "", "--url", "mem://envurl", "stats", q); !strings.Contains(s, q+"  1") {
		t.Errorf("the message did not reach mem://envurl:\n%s", s)
	}
}

func TestUnreachableBroker(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"redis://127.0.0.1:1/0",
		"mysql://root@127.0.0.1:1/test?timeout=2s",
	} {
		start := time.Now()
		r := fails(t, 3, "broker at "+strings.Split(u, "?")[0], "", "--url", u, "--connect-timeout", "1s", "stats", "q")
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s: took %v", u, time.Since(start))
		}
		_ = r
	}
	// The password never shows in the error.
	r := cli(t, "", "--url", "postgres://u:s3cret@127.0.0.1:1/test?sslmode=disable", "stats", "q")
	if r.code != 3 || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("exit %d, stderr %q; want 3 without the password", r.code, r.stderr)
	}
}

// TestAccessDenied: credentials the broker refuses exit 6, on every broker
// where the test can provoke a refusal without changing the shared
// server's configuration: PostgreSQL refuses a role that does not exist
// (its loopback connections are trusted, so a wrong password would pass),
// RabbitMQ a wrong password, the test FerretDB every SCRAM login, and
// MySQL (or MariaDB) a user that does not exist.
func TestAccessDenied(t *testing.T) {
	t.Parallel()
	withUser := func(raw string, user *url.Userinfo) string {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		u.User = user
		return u.String()
	}
	for _, b := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string {
			return withUser(testenv.PostgresURL(t), url.User("no_such_role_"+unique("r")))
		}},
		{"rabbitmq", func(t *testing.T) string {
			return withUser(testenv.RabbitMQURL(t), url.UserPassword("guest", "wrong-password"))
		}},
		{"mongo", func(t *testing.T) string {
			return withUser(testenv.MongoURL(t), url.UserPassword("no_such_user", "wrong-password"))
		}},
		{"mysql", func(t *testing.T) string {
			return withUser(testenv.MySQLURL(t), url.UserPassword("no_such_user", "wrong-password"))
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			r := fails(t, 6, "refused the credentials", "", "--url", b.url(t), "stats", "q")
			if strings.Contains(r.stderr, "wrong-password") {
				t.Errorf("stderr shows the password: %s", r.stderr)
			}
		})
	}
}

func TestMissingCapability(t *testing.T) {
	t.Parallel()
	u := "clitest-bare://" + unique("caps")
	fails(t, 4, "the bare driver does not support queue stats", "", "--url", u, "stats", "q")
	fails(t, 4, "the bare driver does not support dead-letter management", "", "--url", u, "dead", "list", "-q", "q")
	fails(t, 4, "the bare driver does not support dead-letter management", "", "--url", u, "dead", "replay", "-q", "q", "--all")
	fails(t, 4, "does not support dead-letter management", "y\n", "--url", u, "dead", "purge", "-q", "q", "--all")
	fails(t, 4, "does not support", "", "--url", u, "enqueue", "-q", "q", "-k", "k", "--body", "x", "--dedup-key", "d")
	fails(t, 4, "the bare driver does not support pausing queues", "", "--url", u, "queue", "pause", "q")
	fails(t, 4, "the bare driver does not support pausing queues", "", "--url", u, "queue", "resume", "q")
	fails(t, 4, "the bare driver does not support cancelling messages", "", "--url", u, "message", "cancel", "-q", "q", "some-id")
	// What the driver can do still works.
	ok(t, "", "--url", u, "enqueue", "-q", "q", "-k", "k", "--body", "x")

	// Without marks the stats say nothing of pauses: no line, null in JSON.
	nm := "clitest-nomarks://" + unique("caps")
	ok(t, "", "--url", nm, "enqueue", "-q", "q", "-k", "k", "--body", "x")
	if out := ok(t, "", "--url", nm, "stats", "q"); strings.Contains(out, "paused") || strings.Count(out, "\n") != 2 {
		t.Errorf("stats without marks:\n%s", out)
	}
	if out := ok(t, "", "--url", nm, "stats", "--json", "q"); !strings.Contains(out, `"paused":null`) {
		t.Errorf("stats --json without marks: %s", out)
	}
	if out := ok(t, "", "--url", nm, "queue", "list", "--json"); out != `{"queues":["q"]}`+"\n" {
		t.Errorf("queue list --json without marks: %s", out)
	}
	fails(t, 4, "the nomarks driver does not support pausing queues", "", "--url", nm, "queue", "pause", "q")

	// Marks without listing: pausing works, cancelling does not.
	nl := "clitest-nolist://" + unique("caps")
	ok(t, "", "--url", nl, "queue", "pause", "q")
	fails(t, 4, "the nolist driver does not support cancelling messages", "", "--url", nl, "message", "cancel", "-q", "q", "some-id")
}

func TestSchemaUp(t *testing.T) {
	t.Parallel()
	if out := ok(t, "", "--url", "mem://", "schema", "up"); !strings.Contains(out, "mem: no schema to migrate") {
		t.Errorf("schema up on mem://: %q", out)
	}
	t.Run("postgres", func(t *testing.T) {
		base := testenv.PostgresURL(t)
		schema := unique("cli")
		u := withParam(base, "fila_schema", schema)
		ctx := context.Background()
		t.Cleanup(func() {
			conn, err := pgx.Connect(ctx, base)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
				t.Error(err)
			}
		})
		// Before: the schema is missing; commands say what to do.
		r := fails(t, 2, "is at version 0", "", "--url", u, "stats", "q")
		if !strings.Contains(r.stderr, "Run 'fila schema up'") {
			t.Errorf("no hint to run fila schema up: %q", r.stderr)
		}
		for range 2 { // the second run changes nothing
			out := ok(t, "", "--url", u, "schema", "up")
			if !regexp.MustCompile(`postgres: schema "` + schema + `" is at version [1-9]`).MatchString(out) {
				t.Errorf("schema up: %q", out)
			}
		}
		if out := ok(t, "", "--url", u, "stats", "q"); !regexp.MustCompile(`\nq\s+0\s+0`).MatchString(out) {
			t.Errorf("stats after schema up: %q", out)
		}
		fails(t, 3, "cannot reach the broker", "", "--url", "postgres://postgres@127.0.0.1:1/test?sslmode=disable", "schema", "up")
	})
	t.Run("mysql", func(t *testing.T) {
		base := testenv.MySQLURL(t)
		prefix := unique("cli") + "_"
		u := withParam(base, "fila_prefix", prefix)
		t.Cleanup(func() { dropMySQLTables(t, base, prefix) })
		// Before: the tables are missing; commands say what to do.
		r := fails(t, 2, "are at schema version 0", "", "--url", u, "stats", "q")
		if !strings.Contains(r.stderr, "Run 'fila schema up'") {
			t.Errorf("no hint to run fila schema up: %q", r.stderr)
		}
		for range 2 { // the second run changes nothing
			out := ok(t, "", "--url", u, "schema", "up")
			if !regexp.MustCompile(`mysql: tables "` + prefix + `\*" are at version [1-9]`).MatchString(out) {
				t.Errorf("schema up: %q", out)
			}
		}
		if out := ok(t, "", "--url", u, "stats", "q"); !regexp.MustCompile(`\nq\s+0\s+0`).MatchString(out) {
			t.Errorf("stats after schema up: %q", out)
		}
		fails(t, 3, "cannot reach the broker", "", "--url", "mysql://root@127.0.0.1:1/test?timeout=2s", "schema", "up")
	})
	t.Run("redis", func(t *testing.T) {
		u := testenv.RedisURL(t)
		if out := ok(t, "", "--url", u, "schema", "up"); !strings.Contains(out, "redis: no schema to migrate") {
			t.Errorf("schema up on redis: %q", out)
		}
	})
}

// dropMySQLTables drops Fila's tables of prefix in the database of the
// mysql:// URL raw.
func dropMySQLTables(t *testing.T, raw, prefix string) {
	u, err := url.Parse(raw)
	if err != nil {
		t.Error(err)
		return
	}
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Error(err)
		return
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"messages", "dead", "marks", "schema"} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+prefix+name+"`"); err != nil {
			t.Errorf("drop %s%s: %v", prefix, name, err)
		}
	}
}

// TestBinary builds the command and runs it as a process, for the exit code
// and the FILA_URL variable of a real run.
func TestBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "fila")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "stats", "--json", "jobs")
	cmd.Env = append(os.Environ(), "FILA_URL=mem://")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), `"queue":"jobs","ready":0,"delayed":0,"leased":0,"dead":0,"oldest_ready_at":null,"oldest_ready_age_seconds":0`) {
		t.Errorf("fila stats: %v\n%s", err, out)
	}
	cmd = exec.Command(bin, "--url", "nats://x", "stats", "jobs")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "fila: ") {
		t.Errorf("bad URL: %v\n%s", err, out)
	}
}

// blockingReader never returns, like a terminal nobody types into.
type blockingReader struct{ ch chan struct{} }

func (r blockingReader) Read([]byte) (int, error) { <-r.ch; return 0, io.EOF }

func TestInterruptAtPrompt(t *testing.T) {
	t.Parallel()
	u := "mem://" + unique("intr")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	in := blockingReader{make(chan struct{})}
	defer close(in.ch)
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--url", u, "dead", "purge", "-q", "q", "--all"}, env{stdin: in, stdout: &out, stderr: &errb})
	}()
	waitFor(t, "the prompt", func() bool { return strings.Contains(errb.String(), "[y/N]") })
	cancel()
	if code := <-done; code != 130 || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("interrupted purge: exit %d, stderr %q; want 130", code, errb.String())
	}
}
