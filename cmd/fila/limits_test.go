package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// TestQueueLimits: fila queue limits reads a queue's limits with the
// concurrency slots held (a line and JSON), sets them with flags that keep
// the values not given, removes them with --none, refuses invalid values
// (exit 2) without changing anything; RabbitMQ, which cannot list marks,
// exits 4.
func TestQueueLimits(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		ctx := context.Background()
		q := unique("limits")
		c := client(t, url)
		if b.name == "rabbitmq" {
			fails(t, 4, "does not support queue limits", "", "--url", url, "queue", "limits", q)
			r := fails(t, 4, "bound the work in the workers instead", "", "--url", url, "queue", "limits", q, "--concurrency", "5")
			if r.stdout != "" {
				t.Errorf("stdout %q; want nothing", r.stdout)
			}
			return
		}
		testenv.CleanupQueue(t, c, q)
		t.Cleanup(func() { _ = c.QueueLimitsSet(context.Background(), q, fila.QueueLimits{}) })
		limits := func() fila.QueueLimits {
			t.Helper()
			l, err := c.QueueLimits(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		limitsCmd := func(args ...string) []string {
			return append([]string{"--url", url, "queue", "limits", q}, args...)
		}
		expect := func(want string, args ...string) {
			t.Helper()
			if out := ok(t, "", limitsCmd(args...)...); out != want+"\n" {
				t.Errorf("fila queue limits %s printed %q; want %q", strings.Join(args, " "), out, want)
			}
		}

		expect(fmt.Sprintf("queue %q: no limits", q))
		expect(fmt.Sprintf("set queue %q: concurrency 5, rate 50/1s burst 10", q), "--concurrency", "5", "--rate", "50", "--burst", "10")
		if l, want := limits(), (fila.QueueLimits{Concurrency: 5, Rate: 50, Per: time.Second, Burst: 10}); l != want {
			t.Fatalf("after the set, QueueLimits = %+v; want %+v", l, want)
		}
		expect(fmt.Sprintf("queue %q: concurrency 5 (0 held), rate 50/1s burst 10", q))

		// A message received under the limit, by a client of its own, holds
		// a slot; the client may keep the slot for reuse after the message
		// is settled, and frees it when it closes.
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
		rc := client(t, url)
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ds, err := rc.Receive(rctx, q, fila.ReceiveParams{Max: 1})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive = %v, %v", ds, err)
		}
		expect(fmt.Sprintf("queue %q: concurrency 5 (1 held), rate 50/1s burst 10", q))
		var doc struct {
			Queue       string `json:"queue"`
			Concurrency int    `json:"concurrency"`
			Held        int    `json:"held"`
			Rate        int    `json:"rate"`
			PerMS       int64  `json:"per_ms"`
			Burst       int    `json:"burst"`
		}
		if err := json.Unmarshal([]byte(ok(t, "", limitsCmd("--json")...)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Queue != q || doc.Concurrency != 5 || doc.Held != 1 || doc.Rate != 50 || doc.PerMS != 1000 || doc.Burst != 10 {
			t.Errorf("--json = %+v", doc)
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		expect(fmt.Sprintf("queue %q: concurrency 5 (0 held), rate 50/1s burst 10", q))

		// Partial updates keep what the flags do not name.
		expect(fmt.Sprintf("set queue %q: concurrency 3, rate 50/1s burst 10", q), "--concurrency", "3")
		expect(fmt.Sprintf("set queue %q: concurrency 3, rate 600/1m0s burst 10", q), "--rate", "600", "--per", "1m")
		expect(fmt.Sprintf("set queue %q: concurrency 3", q), "--rate", "0")
		expect(fmt.Sprintf("set queue %q: concurrency 3, rate 5/1s burst 1", q), "--rate", "5")
		expect(fmt.Sprintf("set queue %q: rate 5/1s burst 4", q), "--concurrency", "0", "--burst", "4")
		expect(fmt.Sprintf("queue %q: rate 5/1s burst 4", q))
		expect(fmt.Sprintf("set queue %q: concurrency 2, rate 5/1s burst 4", q), "--concurrency", "2")

		// Invalid values: exit 2, nothing changed.
		before := limits()
		for _, c := range []struct {
			want string
			args []string
		}{
			{"--concurrency -1 must be between 0 (no limit) and 10000", []string{"--concurrency", "-1"}},
			{"--concurrency 10001 must be between", []string{"--concurrency", "10001", "--rate", "1"}},
			{"--rate -5 must be between 0 (no limit) and 100000", []string{"--rate", "-5"}},
			{"--per 1µs must be whole milliseconds from 1ms to 24h", []string{"--per", "1us"}},
			{"--per 1.5ms must be whole milliseconds", []string{"--per", "1500us"}},
			{"--per 0s must be whole milliseconds", []string{"--per", "0"}},
			{"--per 48h0m0s must be whole milliseconds", []string{"--per", "48h"}},
			{"--burst 0 must be between 1 and 10000", []string{"--burst", "0"}},
			{"--rate 0 removes the rate limit: drop --per and --burst", []string{"--rate", "0", "--burst", "3"}},
			{"--none removes every limit: it cannot be combined with --concurrency", []string{"--none", "--concurrency", "1"}},
			{"--none removes every limit: it cannot be combined with --rate", []string{"--rate", "1", "--none"}},
			{`invalid argument: rate 100000 per 1ms is more than one a microsecond; nothing changed, queue "` + q + `" keeps concurrency 2, rate 5/1s burst 4`,
				[]string{"--rate", "100000", "--per", "1ms"}},
			{`invalid argument "x" for "--concurrency"`, []string{"--concurrency", "x"}},
		} {
			r := fails(t, 2, c.want, "", limitsCmd(c.args...)...)
			if r.stdout != "" {
				t.Errorf("fila queue limits %s printed %q; want nothing", strings.Join(c.args, " "), r.stdout)
			}
			if l := limits(); l != before {
				t.Fatalf("fila queue limits %s changed the limits to %+v; want %+v kept", strings.Join(c.args, " "), l, before)
			}
		}

		expect(fmt.Sprintf("set queue %q: no limits", q), "--none")
		if l := limits(); !l.IsZero() {
			t.Errorf("after --none, QueueLimits = %+v", l)
		}
		expect(fmt.Sprintf("queue %q: no limits", q))
		if out := ok(t, "", limitsCmd("--json")...); out != fmt.Sprintf(`{"queue":%q,"concurrency":0,"held":0,"rate":0,"per_ms":0,"burst":0}`+"\n", q) {
			t.Errorf("--json without limits: %s", out)
		}
		// Without a rate, --per and --burst have nothing to shape.
		fails(t, 2, "--per and --burst shape a rate limit, and the queue has none: add --rate N", "", limitsCmd("--burst", "3")...)
		expect(fmt.Sprintf("set queue %q: no limits", q), "--none") // removing no limits changes nothing
		if out := ok(t, "", limitsCmd("--json", "--concurrency", "7")...); out != fmt.Sprintf(`{"queue":%q,"concurrency":7,"held":0,"rate":0,"per_ms":0,"burst":0}`+"\n", q) {
			t.Errorf("--json of a set: %s", out)
		}

		fails(t, 2, "name one queue (fila queue limits QUEUE)", "", "--url", url, "queue", "limits")
		fails(t, 2, "invalid argument", "", "--url", url, "queue", "limits", "not a queue", "--concurrency", "1")
	})
}

// TestQueueLimitsUnsupported: drivers that cannot list marks exit 4 and
// say what to do instead.
func TestQueueLimitsUnsupported(t *testing.T) {
	t.Parallel()
	u := "clitest-nolist://" + unique("limits")
	fails(t, 4, "the nolist driver does not support queue limits", "", "--url", u, "queue", "limits", "q")
	fails(t, 4, "bound the work in the workers instead", "", "--url", u, "queue", "limits", "q", "--none")
}
