package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/relay"
)

// fillMigration puts ready ready messages, one delayed by an hour and one
// dead letter with reason "bad order" in queue q.
func fillMigration(t *testing.T, c *fila.Client, q string, ready int) {
	t.Helper()
	ctx := context.Background()
	// The dead letter first, so that it is the first message received.
	deadID, err := c.Enqueue(ctx, q, fila.Message{Kind: "order.bad"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].ID != deadID {
		t.Fatalf("received %s, not the message to dead-letter", ds[0].ID)
	}
	if err := ds[0].Dead(ctx, "bad order"); err != nil {
		t.Fatal(err)
	}
	msgs := make([]fila.Message, ready)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "order.created", Body: []byte(fmt.Sprint(i)), Headers: map[string]string{"n": fmt.Sprint(i)}}
	}
	if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "order.remind", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

// checkMigrated checks that queue q of c holds what fillMigration put in
// the source, and that src's queue is empty.
func checkMigrated(t *testing.T, src *fila.Client, srcQ string, dst *fila.Client, q string, ready int) {
	t.Helper()
	ctx := context.Background()
	s, err := dst.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ready != int64(ready) || s.Delayed != 1 || s.Dead != 1 {
		t.Errorf("target stats %+v; want %d ready, 1 delayed, 1 dead", s, ready)
	}
	page, err := dst.DeadList(ctx, q, fila.DeadListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Letters) != 1 || page.Letters[0].Reason != "bad order" || page.Letters[0].Kind != "order.bad" {
		t.Errorf("target dead letters %+v; want the one with reason \"bad order\"", page.Letters)
	}
	ds, err := dst.Receive(ctx, q, fila.ReceiveParams{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[0]; d.Kind != "order.created" || d.Headers[relay.HeaderSourceID] == "" || d.Headers["n"] != string(d.Body) {
		t.Errorf("moved message %+v: want kind, body and headers kept and the source id header", d)
	}
	_ = ds[0].Release(ctx)
	ss, err := src.QueueStats(ctx, srcQ)
	if err != nil {
		t.Fatal(err)
	}
	if ss.Ready+ss.Delayed+ss.Leased+ss.Dead != 0 {
		t.Errorf("source stats %+v; want empty", ss)
	}
}

func TestMigrateMemory(t *testing.T) {
	t.Parallel()
	from, to := "mem://"+unique("mfrom"), "mem://"+unique("mto")
	src, dst := client(t, from), client(t, to)
	fillMigration(t, src, "orders", 50)
	out := ok(t, "", "migrate", "--from", from, "--to", to, "-q", "orders", "--include-delayed", "--include-dead",
		"--batch", "7", "--concurrency", "3")
	for _, want := range []string{
		"moved 52 messages from queue orders (memory) to queue orders (memory)",
		"50 ready, 1 delayed, 1 dead letters; 0 of them were on the target already",
		"the source queue orders is empty",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	checkMigrated(t, src, "orders", dst, "orders", 50)
	// Again: nothing left to move.
	if out := ok(t, "", "migrate", "--from", from, "--to", to, "-q", "orders"); !strings.Contains(out, "moved 0 messages") {
		t.Errorf("second run: %s", out)
	}
}

func TestMigrateToQueueAndLeftovers(t *testing.T) {
	t.Parallel()
	u := "mem://" + unique("mq")
	src := client(t, u)
	fillMigration(t, src, "a", 10)
	// Same broker, another queue; delayed and dead stay behind.
	out := ok(t, "", "migrate", "--from", u, "--to", u, "-q", "a", "--to-queue", "b")
	for _, want := range []string{"moved 10 messages", "to queue b", "still holds 1 delayed (not yet due; --include-delayed moves them), 1 dead letters (--include-dead moves them)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if s, _ := src.QueueStats(context.Background(), "b"); s.Ready != 10 {
		t.Errorf("queue b: %+v", s)
	}
}

func TestMigrateProgress(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{true, false} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			t.Parallel()
			from, to := "mem://"+unique("pfrom"), "mem://"+unique("pto")
			fillMigration(t, client(t, from), "q", 3000) // tens of ms: several 1ms progress ticks even on a loaded machine
			client(t, to)                                // keep the target broker alive for the check
			var out, errb syncBuffer
			code := run(context.Background(),
				[]string{"migrate", "--from", from, "--to", to, "-q", "q", "--batch", "10", "--concurrency", "1", "--progress-every", "1ms"},
				env{stdout: &out, stderr: &errb, isTerminal: func(any) bool { return tty }})
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			e := errb.String()
			if !strings.Contains(e, "3000/3000 moved (ready 3000, delayed 0, dead 0, duplicates 0)") || !strings.Contains(e, "100%") {
				t.Errorf("no final progress in stderr:\n%q", e)
			}
			redrawn := strings.Count(e, "\r"+ansiClearLine)
			if tty && (redrawn < 2 || !strings.HasSuffix(e, "\n")) {
				t.Errorf("on a terminal the progress line should be redrawn in place: %q", e)
			}
			if !tty && (redrawn > 0 || strings.Count(e, "\n") < 2) {
				t.Errorf("off a terminal progress should be plain lines: %q", e)
			}
		})
	}
}

func TestMigrateDrain(t *testing.T) {
	t.Parallel()
	from, to := "mem://"+unique("dfrom"), "mem://"+unique("dto")
	src, dst := client(t, from), client(t, to)
	ctx := context.Background()
	enqueue := func(n int) {
		msgs := make([]fila.Message, n)
		for i := range msgs {
			msgs[i] = fila.Message{Kind: "k"}
		}
		if _, err := src.EnqueueBatch(ctx, "q", msgs); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(10)
	var out, errb syncBuffer
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- run(ctx, []string{"migrate", "--from", from, "--to", to, "-q", "q", "--drain", "--idle", "1s"}, env{stdout: &out, stderr: &errb})
	}()
	waitFor(t, "the first messages moved", func() bool { s, _ := dst.QueueStats(ctx, "q"); return s.Ready == 10 })
	enqueue(20) // a producer not yet pointed at the target
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "moved 30 messages") {
		t.Errorf("drain output: %s", out.String())
	}
	if time.Since(start) < time.Second {
		t.Errorf("--drain --idle 1s stopped after %v", time.Since(start))
	}
}

func TestMigrateInterrupted(t *testing.T) {
	t.Parallel()
	from, to := "mem://"+unique("ifrom"), "mem://"+unique("ito")
	src, dst := client(t, from), client(t, to)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := src.Enqueue(ctx, "q", fila.Message{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"migrate", "--from", from, "--to", to, "-q", "q", "--drain", "--idle", "1h"}, env{stdout: &out, stderr: &errb})
	}()
	waitFor(t, "the message moved", func() bool { s, _ := dst.QueueStats(context.Background(), "q"); return s.Ready == 1 })
	cancel()
	if code := <-done; code != exitInterrupted || !strings.Contains(out.String(), "moved 1 messages") || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 130 with the count so far", code, out.String(), errb.String())
	}
}

func TestMigrateErrors(t *testing.T) {
	t.Parallel()
	mem, bare := "mem://"+unique("e"), "clitest-bare://"+unique("e")
	fails(t, 4, "the bare driver (--from) does not support taking delayed messages before their run-at; drop --include-delayed", "",
		"migrate", "--from", bare, "--to", mem, "-q", "q", "--include-delayed")
	fails(t, 4, "the bare driver (--from) does not support listing dead letters; drop --include-dead", "",
		"migrate", "--from", bare, "--to", mem, "-q", "q", "--include-dead")
	fails(t, 4, "the bare driver (--to) does not support importing dead letters; drop --include-dead", "",
		"migrate", "--from", mem, "--to", bare, "-q", "q", "--include-dead")
	fails(t, 2, "same broker and queue", "", "migrate", "--from", mem, "--to", mem, "-q", "q")
	fails(t, 2, `--from: invalid argument: no driver registered for scheme "nats"`, "", "migrate", "--from", "nats://x", "--to", mem, "-q", "q")
	fails(t, 2, "--to: ", "", "migrate", "--from", mem, "--to", "localhost", "-q", "q")
	fails(t, 3, "redis://127.0.0.1:1/0", "", "--connect-timeout", "1s",
		"migrate", "--from", mem, "--to", "redis://127.0.0.1:1/0", "-q", "q")
	fails(t, 2, `required flag(s) "queue" not set`, "", "migrate", "--from", mem, "--to", bare)
	fails(t, 2, "--idle only applies with --drain", "", "migrate", "--from", mem, "--to", bare, "-q", "q", "--idle", "3s")
	fails(t, 2, "--batch 0", "", "migrate", "--from", mem, "--to", bare, "-q", "q", "--batch", "0")
	fails(t, 2, "invalid argument", "", "migrate", "--from", mem, "--to", bare, "-q", "not a queue")
}

// TestMigrateRealBrokers moves a queue between PostgreSQL and Redis,
// MongoDB and MySQL, both ways, with delayed messages and dead letters.
func TestMigrateRealBrokers(t *testing.T) {
	t.Parallel()
	pg := func(t *testing.T) string { return withParam(testenv.PostgresURL(t), "fila_migrate", "true") }
	redis := func(t *testing.T) string { return testenv.RedisURL(t) }
	my := func(t *testing.T) string { return withParam(testenv.MySQLURL(t), "fila_migrate", "true") }
	for _, c := range []struct {
		name     string
		from, to func(t *testing.T) string
		// conc is the relay's concurrency: 1 from FerretDB, whose
		// findOneAndUpdate is not atomic (concurrent claims take the same
		// message twice; the target's dedup keys then refuse the copies).
		conc string
	}{
		{"postgres_to_redis", pg, redis, "4"},
		{"redis_to_postgres", redis, pg, "4"},
		{"postgres_to_mongo", pg, freshMongo, "4"},
		{"mongo_to_postgres", freshMongo, pg, "1"},
		{"postgres_to_mysql", pg, my, "4"},
		{"mysql_to_postgres", my, pg, "4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			from, to := c.from(t), c.to(t)
			src, dst := client(t, from), client(t, to)
			q := unique("mig")
			testenv.CleanupQueue(t, src, q)
			testenv.CleanupQueue(t, dst, q)
			fillMigration(t, src, q, 100)
			out := ok(t, "", "migrate", "--from", from, "--to", to, "-q", q, "--include-delayed", "--include-dead", "--batch", "40", "--concurrency", c.conc)
			if !strings.Contains(out, "moved 102 messages") || !strings.Contains(out, "0 of them were on the target already") || !strings.Contains(out, "is empty") {
				t.Errorf("output:\n%s", out)
			}
			checkMigrated(t, src, q, dst, q, 100)
		})
	}
}

// freshMongo is the MongoDB test server's URL with a fresh database,
// dropped when the test ends.
func freshMongo(t *testing.T) string {
	base := testenv.MongoURL(t)
	db := unique("climig")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongodriver.Connect(options.Client().ApplyURI(base))
		if err != nil {
			return
		}
		defer c.Disconnect(ctx)
		_ = c.Database(db).Drop(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	qs := u.Query()
	qs.Set("fila_database", db)
	u.RawQuery = qs.Encode()
	return u.String()
}
