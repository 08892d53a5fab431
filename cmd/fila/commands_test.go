package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

func TestEnqueueAndStats(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("stats")
		testenv.CleanupQueue(t, c, q)

		id1 := strings.TrimSpace(ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "email.welcome", "--body", `{"user_id":1}`))
		id2 := strings.TrimSpace(ok(t, "from stdin\n", "--url", url, "enqueue", "--queue", q, "--kind", "email.welcome",
			"--header", "tenant=acme", "--header", "trace=a=b"))
		if !b.instanceStats { // its delayed messages are invisible to other instances' stats and cleanup
			ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "later", "--body", "x", "--delay", "2s")
		}
		if id1 == "" || id1 == id2 {
			t.Fatalf("enqueue printed ids %q and %q", id1, id2)
		}
		out := ok(t, "", "--url", url, "stats", q)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "QUEUE") {
			t.Fatalf("stats table:\n%s", out)
		}
		fields := strings.Fields(lines[1])
		// QUEUE READY DELAYED LEASED DEAD OLDEST-READY DEAD-BY-KIND
		want := []string{q, "2", "1", "0", "0", "age", "-"}
		if b.instanceStats {
			// Only ready and dead are known to another instance: the rest
			// is n/a, never 0.
			want = []string{q, "2", "n/a", "n/a", "0", "n/a", "-"}
		}
		if len(fields) != 7 || fields[5] == "-" || fields[5] == "n/a" && want[5] != "n/a" {
			t.Fatalf("stats row = %q; want %q", lines[1], want)
		}
		if want[5] == "age" {
			want[5] = fields[5]
		}
		if strings.Join(fields, " ") != strings.Join(want, " ") {
			t.Errorf("stats row = %q; want %q", lines[1], want)
		}

		// The messages arrive as given.
		ctx := context.Background()
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 2})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*fila.Delivery{}
		for _, d := range ds {
			got[d.ID] = d
		}
		for len(got) < 2 {
			more, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range more {
				got[d.ID] = d
			}
		}
		if d := got[id1]; d == nil || string(d.Body) != `{"user_id":1}` || d.Kind != "email.welcome" {
			t.Errorf("first message = %+v", d)
		}
		if d := got[id2]; d == nil || string(d.Body) != "from stdin\n" || d.Headers["tenant"] != "acme" || d.Headers["trace"] != "a=b" {
			t.Errorf("second message = %+v", d)
		}
		if b.instanceStats {
			if err := c.AckBatch(ctx, ds); err != nil {
				t.Fatal(err)
			}
			return
		}
		// Give one back so the queue has one ready, one leased, one delayed.
		if err := got[id2].Release(ctx); err != nil {
			t.Fatal(err)
		}

		var js struct {
			Queues []statsRow `json:"queues"`
		}
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "stats", "--json", q)), &js); err != nil {
			t.Fatal(err)
		}
		r := js.Queues[0]
		if len(js.Queues) != 1 || r.Queue != q || r.Ready != 1 || r.Delayed == nil || *r.Delayed != 1 || r.Leased == nil || *r.Leased != 1 || r.Dead != 0 || r.OldestReadyAt == nil || r.OldestReadyAgeSeconds == nil || *r.OldestReadyAgeSeconds < 0 {
			t.Errorf("stats --json = %+v", js)
		}
		if err := got[id1].Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// deadSetup enqueues three messages (kinds a, a, b) and dead-letters them
// with reasons, returning their ids in that order.
func deadSetup(t *testing.T, c *fila.Client, q string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i, m := range []fila.Message{
		{Kind: "a", Body: []byte("body one"), Headers: map[string]string{"tenant": "acme"}},
		{Kind: "a", Body: []byte{0xff, 0x00, 0x01}},
		{Kind: "b", Body: []byte("body three")},
	} {
		id, err := c.Enqueue(ctx, q, m)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].ID != id {
			t.Fatalf("received %s, want %s", ds[0].ID, id)
		}
		if err := ds[0].Dead(ctx, "reason "+string(rune('1'+i))+"\nsecond line"); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func TestDeadListAndShow(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("deadls")
		testenv.CleanupQueue(t, c, q)
		ids := deadSetup(t, c, q)

		out := ok(t, "", "--url", url, "dead", "list", "-q", q)
		for i, id := range ids {
			if !regexp.MustCompile(regexp.QuoteMeta(id) + `\s+[ab]\s+1\s+\S+\s+\S+\s+reason ` + string(rune('1'+i)) + ` …`).MatchString(out) {
				t.Errorf("dead list has no row for %s with attempts 1 and reason %d:\n%s", id, i+1, out)
			}
		}
		if strings.Contains(out, "more:") {
			t.Errorf("one page expected:\n%s", out)
		}

		// Stats count them, per kind where the driver can.
		out = ok(t, "", "--url", url, "stats", q)
		wantKinds := `\s3\s+-\s+a=2 b=1\s*$`
		if b.instanceStats {
			wantKinds = `\s3\s+-\s+n/a\s*$`
		}
		if !regexp.MustCompile(wantKinds).MatchString(strings.Split(strings.TrimSpace(out), "\n")[1]) {
			t.Errorf("stats with dead letters: want %s in\n%s", wantKinds, out)
		}

		// Filter by kind.
		out = ok(t, "", "--url", url, "dead", "list", "-q", q, "--kind", "b")
		if !strings.Contains(out, ids[2]) || strings.Contains(out, ids[0]) || strings.Contains(out, ids[1]) {
			t.Errorf("dead list --kind b:\n%s", out)
		}

		// Paging.
		out = ok(t, "", "--url", url, "dead", "list", "-q", q, "--limit", "2")
		m := regexp.MustCompile(`more: --cursor (\S+)`).FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) || strings.Contains(out, ids[2]) {
			t.Fatalf("first page of 2:\n%s", out)
		}
		out = ok(t, "", "--url", url, "dead", "list", "-q", q, "--limit", "2", "--cursor", m[1])
		if !strings.Contains(out, ids[2]) || strings.Contains(out, ids[0]) || strings.Contains(out, "more:") {
			t.Errorf("second page:\n%s", out)
		}

		// JSON.
		var page struct {
			Letters []deadJSON `json:"letters"`
			Next    string     `json:"next"`
		}
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "dead", "list", "-q", q, "--json", "--kind", "a")), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Letters) != 2 || page.Letters[0].ID != ids[0] || page.Letters[0].Reason != "reason 1\nsecond line" ||
			page.Letters[0].Attempts != 1 || page.Letters[0].DeadAt.IsZero() || page.Letters[0].Body != nil || page.Next != "" {
			t.Errorf("dead list --json = %+v", page)
		}

		// Show with a text body, a binary body, raw and JSON.
		out = ok(t, "", "--url", url, "dead", "show", "-q", q, ids[0])
		for _, want := range []string{"id:", ids[0], "kind:", "attempts:", "tenant: acme", "reason:\n  reason 1\n  second line", "body (8 bytes):\nbody one\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("dead show lacks %q:\n%s", want, out)
			}
		}
		out = ok(t, "", "--url", url, "dead", "show", "-q", q, ids[1])
		if !strings.Contains(out, "body (3 bytes, not UTF-8; hex dump):\n00000000  ff 00 01") {
			t.Errorf("dead show of a binary body:\n%s", out)
		}
		if out := ok(t, "", "--url", url, "dead", "show", "-q", q, "--raw", ids[1]); out != "\xff\x00\x01" {
			t.Errorf("dead show --raw = %q", out)
		}
		var one deadJSON
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "dead", "show", "-q", q, "--json", ids[2])), &one); err != nil {
			t.Fatal(err)
		}
		if one.ID != ids[2] || one.Kind != "b" || one.Body == nil || *one.Body != "body three" || one.Queue != q {
			t.Errorf("dead show --json = %+v", one)
		}

		// Bad input.
		fails(t, 1, "no dead letter 0190", "", "--url", url, "dead", "show", "-q", q, "0190aaaa-0000-7000-8000-000000000000")
		fails(t, 2, "name one dead letter id", "", "--url", url, "dead", "show", "-q", q)
		fails(t, 2, `required flag(s) "queue" not set`, "", "--url", url, "dead", "list")
		fails(t, 2, "--limit 0 must be between 1 and 1000", "", "--url", url, "dead", "list", "-q", q, "--limit", "0")
		fails(t, 2, "invalid argument", "", "--url", url, "dead", "list", "-q", "bad queue name!")
	})
}

func TestDeadReplayAndPurge(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("deadrp")
		testenv.CleanupQueue(t, c, q)
		ids := deadSetup(t, c, q)
		ctx := context.Background()
		stats := func() fila.Stats {
			t.Helper()
			s, err := c.QueueStats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		// Refusals: no selection, --all with a filter.
		fails(t, 2, "say what to replay: --id ID (repeatable), --kind KIND or --all", "", "--url", url, "dead", "replay", "-q", q)
		fails(t, 2, "say what to purge", "", "--url", url, "dead", "purge", "-q", q, "--yes")
		fails(t, 2, "--all cannot be combined", "", "--url", url, "dead", "replay", "-q", q, "--all", "--kind", "a")
		if s := stats(); s.Dead != 3 || s.Ready != 0 {
			t.Fatalf("after refusals: %+v", s)
		}

		// Replay one by id.
		out := ok(t, "", "--url", url, "dead", "replay", "-q", q, "--id", ids[0])
		if !strings.Contains(out, "replayed 1 dead letter(s)") {
			t.Errorf("replay --id: %q", out)
		}
		if s := stats(); s.Dead != 2 || s.Ready != 1 {
			t.Errorf("after replaying one: %+v", s)
		}
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].ID != ids[0] || ds[0].Attempt != 1 || string(ds[0].Body) != "body one" {
			t.Errorf("replayed delivery = %+v; want the first message with attempts reset", ds[0])
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}

		// Purge kind b: answering no keeps it, yes deletes it.
		r := fails(t, 1, "aborted; nothing purged", "n\n", "--url", url, "dead", "purge", "-q", q, "--kind", "b")
		if !strings.Contains(r.stderr, `Delete the dead letters of kind "b"`) || !strings.Contains(r.stderr, "[y/N]") {
			t.Errorf("purge prompt: %q", r.stderr)
		}
		fails(t, 1, "aborted", "", "--url", url, "dead", "purge", "-q", q, "--kind", "b") // end of input is no
		if s := stats(); s.Dead != 2 {
			t.Fatalf("after declined purges: %+v", s)
		}
		out = ok(t, "y\n", "--url", url, "dead", "purge", "-q", q, "--kind", "b")
		if !strings.Contains(out, "purged 1 dead letter(s)") {
			t.Errorf("purge --kind b: %q", out)
		}

		// Replay --all moves what is left (the second message, kind a).
		out = ok(t, "", "--url", url, "dead", "replay", "-q", q, "--all")
		if !strings.Contains(out, "replayed 1 dead letter(s)") {
			t.Errorf("replay --all: %q", out)
		}
		ds, err = c.Receive(ctx, q, fila.ReceiveParams{})
		if err != nil {
			t.Fatal(err)
		}
		if err := ds[0].Dead(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		out = ok(t, "", "--url", url, "dead", "purge", "-q", q, "--all", "--yes")
		if !strings.Contains(out, "purged 1 dead letter(s)") {
			t.Errorf("purge --all --yes: %q", out)
		}
		if s := stats(); s.Dead != 0 || s.Ready != 0 {
			t.Errorf("at the end: %+v", s)
		}
		// Replaying nothing is not an error.
		if out := ok(t, "", "--url", url, "dead", "replay", "-q", q, "--kind", "a"); !strings.Contains(out, "replayed 0") {
			t.Errorf("replay of nothing: %q", out)
		}
	})
}

// TestEnqueuePriority: fila enqueue --priority stores the level, which the
// next receive shows by handing that message out first; a driver without
// priorities exits 4.
func TestEnqueuePriority(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("enqprio")
		testenv.CleanupQueue(t, c, q)
		fails(t, 2, "--priority 4 must be between 0 (lowest) and 3 (highest)", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--priority", "4")
		if p, ok := c.Driver().(backend.Prioritizer); !ok || !p.Priorities() {
			fails(t, 4, "priorities", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--priority", "1")
			return
		}
		for range 3 {
			ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "low", "--body", "x")
		}
		id := strings.TrimSpace(ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "urgent", "--body", "x", "--priority", "3"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1})
		if err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].Priority != 3 {
			t.Fatalf("the next receive after --priority 3 = %v, %v; want %s at level 3", ds, err, id)
		}
	})
}

func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		q := unique("enqbad")
		testenv.CleanupQueue(t, c, q)
		fails(t, 2, `required flag(s) "kind" not set`, "", "--url", url, "enqueue", "-q", q, "--body", "x")
		fails(t, 2, `--header "novalue" must be KEY=VALUE`, "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--header", "novalue")
		fails(t, 2, "--run-at", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--run-at", "tomorrow")
		fails(t, 2, "invalid argument", "", "--url", url, "enqueue", "-q", "no spaces allowed", "-k", "k", "--body", "x")
		fails(t, 2, "invalid argument", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--delay", "-1s")
		fails(t, 2, "too large", strings.Repeat("x", fila.DefaultMaxBodyBytes+1), "--url", url, "enqueue", "-q", q, "-k", "k")
		fails(t, 2, "takes no arguments", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "extra")
		fails(t, 2, "unknown flag: --bogus", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--bogus")

		if b.noDedup {
			fails(t, 4, "the "+b.name+" driver does not support dedup keys", "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--dedup-key", "once")
			return
		}
		// A taken dedup key exits 5 and prints the holder's id.
		id := strings.TrimSpace(ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x", "--dedup-key", "once"))
		r := fails(t, 5, `dedup key "once" is held by pending message`, "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "y", "--dedup-key", "once")
		if strings.TrimSpace(r.stdout) != id {
			t.Errorf("duplicate enqueue printed %q; want the holder %s", r.stdout, id)
		}
		if s, err := c.QueueStats(context.Background(), q); err != nil || s.Ready != 1 {
			t.Errorf("after the duplicate: %+v, %v", s, err)
		}
	})
}

func TestStatsWatch(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		q := unique("watch")
		for _, terminal := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			var out syncBuffer
			done := make(chan int)
			go func() {
				done <- run(ctx, []string{"--url", url, "stats", "--watch=20ms", q}, env{
					stdout: &out, stderr: &out,
					isTerminal: func(any) bool { return terminal },
				})
			}()
			waitFor(t, "three refreshes", func() bool { return strings.Count(out.String(), "QUEUE") >= 3 })
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("watch exited %d: %s", code, out.String())
			}
			s := out.String()
			if terminal != strings.Contains(s, "\x1b[2K") || terminal != strings.Contains(s, "\x1b[3A\r") {
				t.Errorf("terminal=%v: ANSI redraw codes present=%v in %q", terminal, strings.Contains(s, "\x1b["), s)
			}
			if !strings.Contains(s, q+"  0") || !strings.Contains(s, "every 20ms") {
				t.Errorf("watch output: %q", s)
			}
		}

		// --json --watch prints one JSON document per refresh.
		// (Standard error, which warns that the queue holds nothing, stays
		// out of the JSON stream.)
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb syncBuffer
		done := make(chan int)
		go func() {
			done <- run(ctx, []string{"--url", url, "stats", "--json", "--watch=20ms", q}, env{stdout: &out, stderr: &errb})
		}()
		waitFor(t, "two JSON refreshes", func() bool { return strings.Count(out.String(), "\n") >= 2 })
		cancel()
		<-done
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var v struct {
				At     time.Time  `json:"at"`
				Queues []statsRow `json:"queues"`
			}
			if err := json.Unmarshal([]byte(line), &v); err != nil || len(v.Queues) != 1 || v.At.IsZero() {
				t.Errorf("watch --json line %q: %v", line, err)
			}
		}
	})
}

func TestQueueListAndDelete(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		ctx := context.Background()
		q, other := unique("qdel"), unique("qkeep")
		testenv.CleanupQueue(t, c, other)
		for _, name := range []string{q, other} {
			if _, err := c.Enqueue(ctx, name, fila.Message{Kind: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "later", Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}

		if b.noQueueList {
			fails(t, 4, "queue listing", "", "--url", url, "queue", "list")
			fails(t, 4, "queue listing", "", "--url", url, "stats", "--all")
		} else {
			out := ok(t, "", "--url", url, "queue", "list")
			if !strings.Contains(out, q+"\n") || !strings.Contains(out, other+"\n") {
				t.Errorf("queue list lacks %s or %s:\n%s", q, other, out)
			}
			out = ok(t, "", "--url", url, "queue", "list", "--json")
			if !strings.HasPrefix(out, `{"queues":[`) || !strings.Contains(out, `"`+q+`"`) {
				t.Errorf("queue list --json: %s", out)
			}
			if out := ok(t, "", "--url", url, "stats", "--all"); !strings.Contains(out, q) || !strings.Contains(out, other) {
				t.Errorf("stats --all lacks a queue:\n%s", out)
			}
		}
		fails(t, 2, "--all cannot be combined", "", "--url", url, "stats", "--all", q)
		fails(t, 2, "name one queue", "", "--url", url, "queue", "delete")

		// Without --force a queue holding messages is refused; a declined
		// prompt deletes nothing.
		fails(t, 1, "add --force", "", "--url", url, "queue", "delete", q, "--yes")
		fails(t, 1, "aborted; nothing deleted", "n\n", "--url", url, "queue", "delete", q, "--force")
		if s, err := c.QueueStats(ctx, q); err != nil || s.Ready != 1 || s.Delayed != 1 {
			t.Fatalf("after refusals: %+v, %v", s, err)
		}
		out := ok(t, "y\n", "--url", url, "queue", "delete", q, "--force")
		if !strings.Contains(out, fmt.Sprintf("deleted queue %q", q)) {
			t.Errorf("queue delete: %q", out)
		}
		// (RabbitMQ's delayed count is this instance's own bookkeeping, which
		// another instance's delete does not reach)
		if s, err := c.QueueStats(ctx, q); err != nil || s.Ready+s.Leased+s.Dead != 0 || !b.instanceStats && s.Delayed != 0 {
			t.Errorf("after delete: %+v, %v", s, err)
		}
		if s, err := c.QueueStats(ctx, other); err != nil || s.Ready != 1 {
			t.Errorf("the other queue: %+v, %v; want its message kept", s, err)
		}
		// An empty queue needs no --force.
		ok(t, "", "--url", url, "queue", "delete", q, "--yes")
	})
}

// skipUnsupported skips a test of job control on a driver that cannot do it
// yet: when the command exited 4 and the client, asked the same, returns
// fila.ErrUnsupported. The tests start running once the driver has marks.
func skipUnsupported(t *testing.T, r result, b broker, clientErr func() error) {
	t.Helper()
	if r.code != exitUnsupported {
		return
	}
	if err := clientErr(); errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the %s driver cannot do this yet: %v", b.name, err)
	} else {
		t.Fatalf("the command exited 4 (%s) but the client returns %v", strings.TrimSpace(r.stderr), err)
	}
}

func TestQueuePauseAndResume(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		ctx := context.Background()
		q, other := unique("pause"), unique("nopause")
		testenv.CleanupQueue(t, c, q)
		testenv.CleanupQueue(t, c, other)
		id := strings.TrimSpace(ok(t, "", "--url", url, "enqueue", "-q", q, "-k", "k", "--body", "x"))
		ok(t, "", "--url", url, "enqueue", "-q", other, "-k", "k", "--body", "x")

		r := cli(t, "", "--url", url, "queue", "pause", q)
		skipUnsupported(t, r, b, func() error { _, err := c.QueuePaused(ctx, q); return err })
		if r.code != 0 || r.stdout != fmt.Sprintf("paused queue %q\n", q) {
			t.Fatalf("queue pause: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if p, err := c.QueuePaused(ctx, q); err != nil || !p {
			t.Fatalf("after queue pause, QueuePaused = %v, %v", p, err)
		}
		if p, err := c.QueuePaused(ctx, other); err != nil || p {
			t.Fatalf("the other queue: QueuePaused = %v, %v", p, err)
		}
		ok(t, "", "--url", url, "queue", "pause", q) // pausing a paused queue changes nothing

		// Stats: the table names the paused queue on a line of its own, the
		// JSON has paused per queue.
		out := ok(t, "", "--url", url, "stats", q, other)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || lines[3] != "paused (nothing is received until fila queue resume): "+q {
			t.Errorf("stats with a paused queue:\n%s", out)
		}
		if !strings.HasPrefix(lines[1], q+" ") || len(strings.Fields(lines[1])) != 7 {
			t.Errorf("the paused queue's row changed its columns: %q", lines[1])
		}
		var js struct {
			Queues []statsRow `json:"queues"`
		}
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "stats", "--json", q, other)), &js); err != nil {
			t.Fatal(err)
		}
		if len(js.Queues) != 2 || js.Queues[0].Paused == nil || !*js.Queues[0].Paused || js.Queues[1].Paused == nil || *js.Queues[1].Paused {
			t.Errorf("stats --json paused = %+v", js.Queues)
		}
		if !b.noQueueList {
			var list struct {
				Queues []string  `json:"queues"`
				Paused *[]string `json:"paused"`
			}
			if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "queue", "list", "--json")), &list); err != nil {
				t.Fatal(err)
			}
			if list.Paused == nil || !slices.Contains(*list.Paused, q) || slices.Contains(*list.Paused, other) {
				t.Errorf("queue list --json paused = %v; want %s in it, not %s", list.Paused, q, other)
			}
			if out := ok(t, "", "--url", url, "queue", "list"); strings.Contains(out, "paused") {
				t.Errorf("queue list (names only, for scripts) mentions the pause:\n%s", out)
			}
		}

		// Resume: the message is received again.
		out = ok(t, "", "--url", url, "queue", "resume", q)
		if out != fmt.Sprintf("resumed queue %q\n", q) {
			t.Errorf("queue resume: %q", out)
		}
		if p, err := c.QueuePaused(ctx, q); err != nil || p {
			t.Fatalf("after queue resume, QueuePaused = %v, %v", p, err)
		}
		if out := ok(t, "", "--url", url, "stats", q); strings.Contains(out, "paused") {
			t.Errorf("stats after the resume:\n%s", out)
		}
		ok(t, "", "--url", url, "queue", "resume", q) // resuming a running queue changes nothing
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ds, err := c.Receive(rctx, q, fila.ReceiveParams{})
		if err != nil || ds[0].ID != id {
			t.Fatalf("receive after the resume: %v, %v", ds, err)
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}

		// Usage errors.
		fails(t, 2, "name one queue (fila queue pause QUEUE)", "", "--url", url, "queue", "pause")
		fails(t, 2, "name one queue (fila queue resume QUEUE)", "", "--url", url, "queue", "resume", q, other)
		fails(t, 2, "invalid argument", "", "--url", url, "queue", "pause", "not a queue")
	})
}

func TestMessageCancel(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		ctx := context.Background()
		q := unique("cancel")
		testenv.CleanupQueue(t, c, q)
		ids, err := c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "a", Body: []byte("one")}, {Kind: "b", Body: []byte("two")},
			{Kind: "c", Body: []byte("three")}})
		if err != nil {
			t.Fatal(err)
		}

		r := cli(t, "", "--url", url, "message", "cancel", "-q", q, ids[0], ids[2])
		skipUnsupported(t, r, b, func() error { return c.MessageCancel(ctx, q, ids[0]) })
		if r.code != 0 || r.stdout != fmt.Sprintf("cancelled 2 waiting and 0 running message(s) of queue %q\n", q) {
			t.Fatalf("message cancel: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// An unknown id is not an error, and the output says it was not there.
		unknown := "0190aaaa-0000-7000-8000-000000000000"
		r = cli(t, "", "--url", url, "message", "cancel", "--queue", q, unknown)
		if r.code != 0 || r.stdout != fmt.Sprintf("cancelled 0 waiting and 0 running message(s) of queue %q\nnot pending (acked, dead-lettered already, or mistyped; the cancel is kept 90 days in case it arrives): %s\n", q, unknown) {
			t.Errorf("cancelling an unknown id: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}

		// Receiving dead-letters the cancelled ones and hands out the other.
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 3})
		if err != nil || len(ds) != 1 || ds[0].ID != ids[1] {
			t.Fatalf("receive after the cancel: %v, %v; want only %s", ds, err, ids[1])
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
		page, err := c.DeadList(ctx, q, fila.DeadListParams{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, l := range page.Letters {
			got[l.ID] = l.Reason
		}
		if len(got) != 2 || got[ids[0]] != fila.ReasonCancelled || got[ids[2]] != fila.ReasonCancelled {
			t.Errorf("dead letters after the cancel = %v; want %s and %s with reason %q", got, ids[0], ids[2], fila.ReasonCancelled)
		}

		// Usage errors.
		fails(t, 2, "name at least one message id", "", "--url", url, "message", "cancel", "-q", q)
		fails(t, 2, `required flag(s) "queue" not set`, "", "--url", url, "message", "cancel", ids[1])
		fails(t, 2, "a message id is empty", "", "--url", url, "message", "cancel", "-q", q, "")
		fails(t, 2, "invalid argument", "", "--url", url, "message", "cancel", "-q", q, "bad\x01id")
		fails(t, 2, "invalid argument", "", "--url", url, "message", "cancel", "-q", "not a queue", ids[1])
	})
}

// TestDeadShowEscapesControl: a dead letter's header, dedup key, reason and
// body come from whoever enqueued or failed it; dead list and dead show
// print their control characters escaped, so a terminal runs none of
// them, and --raw still writes the body's bytes.
func TestDeadShowEscapesControl(t *testing.T) {
	url := "mem://dead-escape-" + unique("x")
	c := client(t, url)
	ctx := context.Background()
	q := unique("deadesc")
	id, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", Body: []byte("\x1b[2Jbody\n"), DedupKey: "key\x1b[0m",
		Headers: map[string]string{"h": "\x1b[31mred"}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %d", err, len(ds))
	}
	if err := ds[0].Dead(ctx, "failed \x1b]0;pwned\x07"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"dead", "list", "-q", q}, {"dead", "show", "-q", q, id}} {
		out := ok(t, "", append([]string{"--url", url}, args...)...)
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("fila %s printed a control character:\n%q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `failed \x1b]0;pwned\a`) {
			t.Errorf("fila %s does not show the reason escaped:\n%s", strings.Join(args, " "), out)
		}
	}
	out := ok(t, "", "--url", url, "dead", "show", "-q", q, id)
	for _, want := range []string{`h: \x1b[31mred`, `key\x1b[0m`, `\x1b[2Jbody`} {
		if !strings.Contains(out, want) {
			t.Errorf("dead show lacks %q:\n%s", want, out)
		}
	}
	if raw := ok(t, "", "--url", url, "dead", "show", "-q", q, "--raw", id); raw != "\x1b[2Jbody\n" {
		t.Errorf("dead show --raw = %q; want the body's bytes", raw)
	}
}
