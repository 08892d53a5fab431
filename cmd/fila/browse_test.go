package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// pendingIDs are the messages pendingSetup leaves in a queue.
type pendingIDs struct {
	leased, retried, delayed string
	ready                    []string
	// level is the first ready message's level: 2 where the driver has
	// levels, else 0.
	level int
}

// The untrusted content of pendingSetup's messages: terminal escape
// sequences that must print escaped.
const (
	escKind   = "email.welcome\u009b31m"
	escHeader = "x\x1b]0;pwned\x07"
	escBody   = "hello \x1b[31mred\x1b[0m\n"
	escReason = "smtp: 550 \x1b[2J mailbox\nsecond line"
)

// pendingSetup fills q with one message of each state: a leased one (its
// first attempt running), one retried with an error and delayed by an
// hour, one delayed by an hour, and three ready ones (the first with
// headers and a body holding escape sequences, the second with a body that
// is not UTF-8).
func pendingSetup(t *testing.T, c *fila.Client, q string) pendingIDs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var p pendingIDs
	receive := func(want string) *fila.Delivery {
		t.Helper()
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
		if err != nil || len(ds) != 1 || ds[0].ID != want {
			t.Fatalf("received %v, %v; want %s", ds, err, want)
		}
		return ds[0]
	}
	enqueue := func(m fila.Message) string {
		t.Helper()
		id, err := c.Enqueue(ctx, q, m)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	p.leased = enqueue(fila.Message{Kind: "job.running", Body: []byte("running")})
	receive(p.leased)
	p.retried = enqueue(fila.Message{Kind: "job.retry", Body: []byte("retry")})
	if err := receive(p.retried).Retry(ctx, time.Hour, escReason); err != nil {
		t.Fatal(err)
	}
	p.delayed = enqueue(fila.Message{Kind: "job.later", Body: []byte("later"), Delay: time.Hour})
	if pr, ok := c.Driver().(backend.Prioritizer); ok && pr.Priorities() {
		p.level = 2
	}
	p.ready = []string{
		enqueue(fila.Message{Kind: escKind, Body: []byte(escBody), Priority: p.level,
			Headers: map[string]string{"tenant": "acme", "trace": escHeader}}),
		enqueue(fila.Message{Kind: "email.digest", Body: []byte{0xff, 0x00, 0x01}}),
		enqueue(fila.Message{Kind: "email.digest", Body: []byte("three")}),
	}
	return p
}

// rows returns the ids of a message table's rows.
func rows(out string) []string {
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 && f[0] != "more:" {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// TestMessageListAndShow lists a queue's ready, delayed and leased
// messages, pages them, shows them by id in every state, as tables, text
// and JSON, with the content's control characters escaped; on a driver
// whose MessageList is unsupported both commands exit 4.
func TestMessageListAndShow(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("msgls")
		testenv.CleanupQueue(t, c, q)
		if _, err := c.MessageList(context.Background(), q, fila.MessageListParams{State: fila.StateReady}); errors.Is(err, fila.ErrUnsupported) {
			fails(t, 4, "the "+b.name+" driver does not support message listing", "", "--url", url, "message", "list", "-q", q, "--state", "ready")
			fails(t, 4, "does not support message listing", "", "--url", url, "message", "show", "-q", q, "0190aaaa-0000-7000-8000-000000000000")
			return
		} else if err != nil {
			t.Fatal(err)
		}
		p := pendingSetup(t, c, q)

		// Ready: the three, with their kind escaped and the level.
		out := ok(t, "", "--url", url, "message", "list", "-q", q, "--state", "ready")
		if strings.ContainsAny(out, "\x1b\u009b") {
			t.Errorf("message list prints a control character:\n%q", out)
		}
		if !strings.HasPrefix(out, "ID ") || !strings.Contains(strings.Split(out, "\n")[0], "READY SINCE") {
			t.Errorf("ready table header:\n%s", out)
		}
		if got := rows(out); len(got) != 3 || !sameSet(got, p.ready) {
			t.Errorf("ready rows %v, want %v:\n%s", got, p.ready, out)
		}
		if !regexp.MustCompile(regexp.QuoteMeta(p.ready[0]+`  email.welcome\u009b31m`) + `\s+` + itoa(p.level) + `\s+0\s`).MatchString(out) {
			t.Errorf("ready row of %s lacks its escaped kind and level %d:\n%s", p.ready[0], p.level, out)
		}

		// Delayed: the retried one with its attempt and error, the delayed one.
		out = ok(t, "", "--url", url, "message", "list", "-q", q, "--state", "delayed")
		if got := rows(out); !sameSet(got, []string{p.retried, p.delayed}) || !strings.Contains(strings.Split(out, "\n")[0], "DUE") {
			t.Errorf("delayed rows %v:\n%s", got, out)
		}
		if !regexp.MustCompile(regexp.QuoteMeta(p.retried) + `\s+job\.retry\s+0\s+1\s+\S+\s+\S+\s+` + regexp.QuoteMeta(`smtp: 550 \x1b[2J mailbox …`)).MatchString(out) {
			t.Errorf("the retried row lacks attempt 1 and its escaped error:\n%s", out)
		}
		if !regexp.MustCompile(regexp.QuoteMeta(p.delayed) + `\s+job\.later\s+0\s+0\s+\S+\s+\S+\s+-`).MatchString(out) {
			t.Errorf("the delayed row:\n%s", out)
		}

		// Leased: the running one, its attempt, its lease deadline.
		out = ok(t, "", "--url", url, "message", "list", "-q", q, "--state", "leased")
		if got := rows(out); !slices.Equal(got, []string{p.leased}) || !strings.Contains(strings.Split(out, "\n")[0], "LEASE DEADLINE") {
			t.Errorf("leased rows %v:\n%s", got, out)
		}
		var leased struct {
			Messages []messageJSON `json:"messages"`
			Next     string        `json:"next"`
		}
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "message", "list", "-q", q, "--state", "leased", "--json")), &leased); err != nil {
			t.Fatal(err)
		}
		if len(leased.Messages) != 1 {
			t.Fatalf("leased --json = %+v", leased)
		}
		if m := leased.Messages[0]; m.ID != p.leased || m.State != "leased" || m.Attempts != 1 || m.Queue != q || m.Body != nil ||
			m.Due.Before(time.Now()) || m.Due.After(time.Now().Add(2*time.Minute)) || leased.Next != "" {
			t.Errorf("leased --json = %+v; want attempt 1 and a lease deadline within the minute", m)
		}

		// Paging, and a cursor bound to its queue and state.
		out = ok(t, "", "--url", url, "message", "list", "-q", q, "--state", "ready", "--limit", "2")
		m := regexp.MustCompile(`more: --cursor (\S+)`).FindStringSubmatch(out)
		first := rows(out)
		if m == nil || len(first) != 2 {
			t.Fatalf("first page of 2:\n%s", out)
		}
		out = ok(t, "", "--url", url, "message", "list", "-q", q, "--state", "ready", "--limit", "2", "--cursor", m[1])
		if second := rows(out); len(second) != 1 || !sameSet(append(first, second...), p.ready) || strings.Contains(out, "more:") {
			t.Errorf("second page %v after %v:\n%s", second, first, out)
		}
		fails(t, 2, "--cursor continues a listing of --state ready, not delayed", "", "--url", url, "message", "list", "-q", q, "--state", "delayed", "--cursor", m[1])
		fails(t, 2, "--cursor continues a listing of another queue", "", "--url", url, "message", "list", "-q", q+"x", "--state", "ready", "--cursor", m[1])
		fails(t, 2, "--cursor is not a cursor fila message list printed", "", "--url", url, "message", "list", "-q", q, "--state", "ready", "--cursor", "junk")

		// Show: every state, found by id; escaped text, hex dump, raw, JSON.
		out = ok(t, "", "--url", url, "message", "show", "-q", q, p.ready[0])
		for _, want := range []string{"id:", p.ready[0], "state:", "ready", `kind:        email.welcome\u009b31m`, "level:       " + itoa(p.level),
			"ready since:", "tenant: acme", `trace: x\x1b]0;pwned\a`, "body (19 bytes):\n" + `hello \x1b[31mred\x1b[0m` + "\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("message show lacks %q:\n%s", want, out)
			}
		}
		if strings.ContainsAny(out, "\x1b\u009b\x07") {
			t.Errorf("message show prints a control character:\n%q", out)
		}
		out = ok(t, "", "--url", url, "message", "show", "-q", q, p.leased)
		for _, want := range []string{"state:", "leased (running)", "attempts:", "lease deadline:", "body (7 bytes):\nrunning\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("message show of the leased one lacks %q:\n%s", want, out)
			}
		}
		out = ok(t, "", "--url", url, "message", "show", "-q", q, p.retried)
		for _, want := range []string{"delayed", "due:", "last error:\n  " + `smtp: 550 \x1b[2J mailbox` + "\n  second line\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("message show of the retried one lacks %q:\n%s", want, out)
			}
		}
		if out := ok(t, "", "--url", url, "message", "show", "-q", q, p.ready[1]); !strings.Contains(out, "body (3 bytes, not UTF-8; hex dump):\n00000000  ff 00 01") {
			t.Errorf("message show of a binary body:\n%s", out)
		}
		if out := ok(t, "", "--url", url, "message", "show", "-q", q, "--raw", p.ready[0]); out != escBody {
			t.Errorf("message show --raw = %q", out)
		}
		var one messageJSON
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "message", "show", "-q", q, "--json", p.retried)), &one); err != nil {
			t.Fatal(err)
		}
		if one.ID != p.retried || one.State != "delayed" || one.LastError != escReason || one.Body == nil || *one.Body != "retry" || one.Attempts != 1 {
			t.Errorf("message show --json = %+v", one)
		}
		// Nothing was claimed or changed by the listings.
		if s, err := c.QueueStats(context.Background(), q); err != nil || s.Ready != 3 || s.Delayed != 2 || s.Leased != 1 {
			t.Errorf("after the listings: %+v, %v", s, err)
		}

		// Bad input.
		fails(t, 1, "no ready, delayed or leased message 0190aaaa", "", "--url", url, "message", "show", "-q", q, "0190aaaa-0000-7000-8000-000000000000")
		fails(t, 2, `required flag(s) "state" not set`, "", "--url", url, "message", "list", "-q", q)
		fails(t, 2, `--state "running" is not ready, delayed or leased`, "", "--url", url, "message", "list", "-q", q, "--state", "running")
		fails(t, 2, "--limit 0 must be between 1 and 1000", "", "--url", url, "message", "list", "-q", q, "--state", "ready", "--limit", "0")
		fails(t, 2, "invalid argument", "", "--url", url, "message", "list", "-q", "bad queue name!", "--state", "ready")
		fails(t, 2, "name one message id", "", "--url", url, "message", "show", "-q", q)
		fails(t, 2, "must be 1 to 128 printable bytes", "", "--url", url, "message", "show", "-q", q, "bad\x1bid")
		fails(t, 2, "--json and --raw", "", "--url", url, "message", "show", "-q", q, "--json", "--raw", p.ready[0])
		fails(t, 2, `required flag(s) "queue" not set`, "", "--url", url, "message", "show", p.ready[0])
	})
}

// TestMessageListUnsupported: a driver without message listing exits 4
// naming itself.
func TestMessageListUnsupported(t *testing.T) {
	t.Parallel()
	u := "clitest-bare://" + unique("caps")
	fails(t, 4, "the bare driver does not support message listing", "", "--url", u, "message", "list", "-q", "q", "--state", "ready")
	fails(t, 4, "the bare driver does not support message listing", "", "--url", u, "message", "show", "-q", "q", "some-id")
}

func TestTermSafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in          string
		lines       bool
		want        string
		wantOneLine string
	}{
		{"plain text, ünïcode", false, "plain text, ünïcode", ""},
		{"a\x1b[31mb", false, `a\x1b[31mb`, ""},
		{"csi\u009b2J", false, `csi\u009b2J`, ""},
		{"bell\x07 del\x7f cr\r", false, `bell\a del\x7f cr\r`, ""},
		{"bidi \u202egnp.exe", false, `bidi \u202egnp.exe`, ""},
		{"bad \xff byte", false, `bad \xff byte`, ""},
		{"two\nlines\tand tab", true, "two\nlines\tand tab", `two\nlines\tand tab`},
	} {
		if got := termSafe(tc.in, tc.lines); got != tc.want {
			t.Errorf("termSafe(%q, %v) = %q, want %q", tc.in, tc.lines, got, tc.want)
		}
		if tc.wantOneLine != "" {
			if got := termSafe(tc.in, false); got != tc.wantOneLine {
				t.Errorf("termSafe(%q, false) = %q, want %q", tc.in, got, tc.wantOneLine)
			}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func itoa(n int) string { return string(rune('0' + n)) }
