package relaytest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/relay"
)

// The relay against real servers: PostgreSQL to each other broker and back
// to PostgreSQL.

// relayTarget is a broker a relay from PostgreSQL moves messages to.
type relayTarget struct {
	name string
	url  func(testing.TB) string
	// n is the number of messages of the bulk test, moved batch at a time
	// (default relayBatch).
	n, batch int
	// dedup: the target enforces dedup keys, so a relay restarted after a
	// kill duplicates nothing there.
	dedup bool
	// serial: one relay loop and one subtest at a time.
	serial bool
	// idle is how long a relay from this broker waits for a message before
	// it takes the queue for empty; delay is how far ahead the delayed
	// messages' run-at lies, time enough for both hops.
	idle, delay time.Duration
}

var relayTargets = []relayTarget{
	{name: "redis", url: testenv.RedisURL, n: 10000, dedup: true, idle: time.Second, delay: 5 * time.Second},
	// FerretDB (the MongoDB-compatible server on this machine, over SQLite)
	// claims one document per findOneAndUpdate, each a scan of the queue:
	// receiving 500 of 2,000 messages was measured at 10 s, acking them at
	// 4 s. 10,000 messages would take minutes, so the FerretDB run moves 500
	// in batches of 50; a real MongoDB would take the full run. FerretDB v1
	// also has no atomic findOneAndUpdate (two concurrent claims may take the
	// same message), so the relay runs one loop against it and its subtests
	// run one after the other; a single operation takes up to seconds when
	// the machine is busy, hence the longer idle and delay.
	{name: "mongo", url: mongoRelayURL, n: 500, batch: 50, dedup: true, serial: true, idle: 5 * time.Second, delay: 10 * time.Second},
	{name: "rabbitmq", url: testenv.RabbitMQURL, n: 10000, idle: time.Second, delay: 5 * time.Second},
	{name: "mysql", url: mysqlRelayURL, n: 10000, dedup: true, idle: time.Second, delay: 5 * time.Second},
}

const (
	relayBatch       = 500
	relayConcurrency = 4
)

func TestRelayBrokers(t *testing.T) {
	for _, tg := range relayTargets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			pgURL := pgRelayURL(t)
			xURL := tg.url(t)
			t.Run("bulk_killed_and_restarted", func(t *testing.T) {
				if !tg.serial {
					t.Parallel()
				}
				testRelayBulk(t, openRelayClient(t, pgURL), openRelayClient(t, xURL), tg)
			})
			t.Run("delayed_and_dead", func(t *testing.T) {
				if !tg.serial {
					t.Parallel()
				}
				testRelayDelayedAndDead(t, openRelayClient(t, pgURL), openRelayClient(t, xURL), tg)
			})
		})
	}
}

// testRelayBulk moves tg.n messages from PostgreSQL to the target with a
// relay killed (its context cancelled) after about half of them and then
// restarted, then moves them all back to another PostgreSQL queue, and checks
// that every message arrived exactly once.
func testRelayBulk(t *testing.T, pg, x *fila.Client, tg relayTarget) {
	ctx := context.Background()
	q1, q2 := relayQueue("bulk"), relayQueue("back")
	testenv.CleanupQueue(t, pg, q1)
	testenv.CleanupQueue(t, x, q1)
	testenv.CleanupQueue(t, pg, q2)
	n := tg.n
	fillQueue(t, pg, q1, n)
	conc, batch := relayConcurrency, relayBatch
	if tg.serial {
		conc = 1
	}
	if tg.batch > 0 {
		batch = tg.batch
	}

	// Hop 1, killed at half way.
	killCtx, kill := context.WithCancel(ctx)
	defer kill()
	r := &relay.Relay{From: pg, FromQueue: q1, To: x, Batch: batch, Concurrency: conc,
		Lease: 3 * time.Second, Logger: quietLogger(),
		Progress: func(s relay.Stats) {
			if s.Total() >= int64(n/2) {
				kill()
			}
		}}
	start := time.Now()
	st1, err := r.Run(killCtx)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	if st1.Moved == 0 || st1.Moved >= int64(n) {
		t.Fatalf("first run moved %d of %d; the kill should stop it half way", st1.Moved, n)
	}
	t.Logf("postgres→%s: %d messages in %v before the kill: %.0f msg/s", tg.name, st1.Moved, elapsed.Round(time.Millisecond), float64(st1.Moved)/elapsed.Seconds())

	// Restarted until the source is empty (messages whose lease the killed
	// run still held come back after it).
	r.Progress = nil
	st2 := relayUntilEmpty(t, r, pg, q1)
	t.Logf("postgres→%s: restart moved %d, %d refused as duplicates", tg.name, st2.Moved, st2.Duplicates)

	// Hop 2, back to PostgreSQL, uninterrupted.
	var (
		mu   sync.Mutex
		last time.Time
	)
	back := &relay.Relay{From: x, FromQueue: q1, To: pg, ToQueue: q2, Batch: batch, Concurrency: conc,
		StopWhenIdle: tg.idle, Logger: quietLogger(),
		Progress: func(relay.Stats) { mu.Lock(); last = time.Now(); mu.Unlock() }}
	start = time.Now()
	st3, err := back.Run(ctx)
	if err != nil {
		t.Fatalf("relay back to postgres: %v", err)
	}
	mu.Lock()
	busy := last.Sub(start) // without the idle second that ends the run
	mu.Unlock()
	t.Logf("%s→postgres: %d messages in %v: %.0f msg/s", tg.name, st3.Moved, busy.Round(time.Millisecond), float64(st3.Moved)/busy.Seconds())

	// Every message once in the final queue, by its index; the second hop
	// ran without a kill, so its source ids are unique too.
	seen := make([]int, n)
	sources := map[string]bool{}
	extra := 0
	for _, d := range drainQueue(t, pg, q2, n) {
		src := d.Headers[relay.HeaderSourceID]
		if src == "" || sources[src] {
			t.Errorf("message %s: source id %q missing or seen twice", d.ID, src)
		}
		sources[src] = true
		i, err := strconv.Atoi(d.Headers["n"])
		if err != nil || i < 0 || i >= n || string(d.Body) != d.Headers["n"] || d.Kind != "relay.test" {
			t.Fatalf("unexpected message %s: kind %q body %q headers %v", d.ID, d.Kind, d.Body, d.Headers)
		}
		if seen[i]++; seen[i] > 1 {
			extra++
		}
	}
	for i, c := range seen {
		if c == 0 {
			t.Errorf("message %d lost", i)
		}
	}
	switch {
	case tg.dedup && extra > 0:
		t.Errorf("%d messages duplicated; %s has dedup keys, so a restarted relay should duplicate nothing", extra, tg.name)
	case !tg.dedup && extra > batch:
		// A stopped relay finishes the batches in hand (enqueue and ack),
		// so none should come twice; a relay that really crashed between
		// enqueue and ack would re-send what it had in flight.
		t.Errorf("%d messages duplicated; a stopped relay should re-send at most one batch (%d)", extra, batch)
	case !tg.dedup:
		t.Logf("%s has no dedup keys: %d duplicates after the kill", tg.name, extra)
	}
}

// testRelayDelayedAndDead moves delayed messages and dead letters from
// PostgreSQL to the target and, where the target can hand them out early,
// back to PostgreSQL, then checks that the delayed messages become ready at
// their run-at (within a second) and the dead letters keep their reasons.
func testRelayDelayedAndDead(t *testing.T, pg, x *fila.Client, tg relayTarget) {
	ctx := context.Background()
	q3, q4 := relayQueue("later"), relayQueue("laterback")
	testenv.CleanupQueue(t, pg, q3)
	testenv.CleanupQueue(t, x, q3)
	testenv.CleanupQueue(t, pg, q4)

	start := time.Now()
	runAt := start.Add(tg.delay)
	const delayed = 3
	for i := 0; i < delayed; i++ {
		if _, err := pg.Enqueue(ctx, q3, fila.Message{Kind: "later", RunAt: runAt, Headers: map[string]string{"n": strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	deadIDs := map[string]string{} // id → reason
	for i := 0; i < 2; i++ {
		id, err := pg.Enqueue(ctx, q3, fila.Message{Kind: "bad", Body: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := pg.Receive(ctx, q3, fila.ReceiveParams{})
		if err != nil || len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("receive the message to dead-letter: %v %v", ds, err)
		}
		reason := "unparseable order " + strconv.Itoa(i)
		if err := ds[0].Dead(ctx, reason); err != nil {
			t.Fatal(err)
		}
		deadIDs[id] = reason
	}

	_, importsDead := x.Driver().(backend.DeadImporter)
	if !importsDead {
		t.Logf("%s does not implement backend.DeadImporter yet: dead letters are not moved to it", tg.name)
	}
	hop := &relay.Relay{From: pg, FromQueue: q3, To: x, IncludeDelayed: true, IncludeDead: importsDead,
		StopWhenIdle: 300 * time.Millisecond, Logger: quietLogger()}
	st, err := hop.Run(ctx)
	if err != nil {
		t.Fatalf("postgres→%s: %v", tg.name, err)
	}
	if st.Delayed != delayed || importsDead && st.Dead != 2 {
		t.Errorf("postgres→%s moved %+v; want %d delayed and 2 dead", tg.name, st, delayed)
	}

	final, fq := x, q3
	_, early := x.Driver().(backend.DelayedReceiver)
	_, listsDead := x.Driver().(backend.DeadLetterer)
	if early {
		back := &relay.Relay{From: x, FromQueue: q3, To: pg, ToQueue: q4, IncludeDelayed: true, IncludeDead: importsDead && listsDead,
			StopWhenIdle: tg.idle, Logger: quietLogger()}
		st, err := back.Run(ctx)
		if err != nil {
			t.Fatalf("%s→postgres: %v", tg.name, err)
		}
		if st.Delayed != delayed {
			t.Errorf("%s→postgres moved %+v; want %d delayed", tg.name, st, delayed)
		}
		if !(importsDead && listsDead) {
			t.Logf("%s cannot list dead letters: checking them there is skipped", tg.name)
			importsDead = false
		}
		final, fq = pg, q4
	} else {
		t.Logf("%s does not implement backend.DelayedReceiver yet: the delayed messages are checked on it, not moved back", tg.name)
	}

	if importsDead {
		page, err := final.DeadList(ctx, fq, fila.DeadListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Letters) != len(deadIDs) {
			t.Errorf("%d dead letters arrived, want %d: %+v", len(page.Letters), len(deadIDs), page.Letters)
		}
		for _, l := range page.Letters {
			if want, ok := deadIDs[l.ID]; !ok || l.Reason != want || l.Kind != "bad" {
				t.Errorf("dead letter %s (%s): reason %q; want one of the moved letters with its reason", l.ID, l.Kind, l.Reason)
			}
		}
	}

	// The delayed messages become ready at their run-at, not before and not
	// much after: within a second of the later of their run-at and the
	// Receive that asks for them (on a loaded machine the hops can outlast
	// the delay, and then they are due when asked for).
	rctx, cancel := context.WithDeadline(ctx, runAt.Add(10*time.Second))
	defer cancel()
	got := 0
	for got < delayed {
		asked := time.Now()
		ds, err := final.Receive(rctx, fq, fila.ReceiveParams{Max: 10})
		at := time.Now()
		if err != nil {
			t.Fatalf("%d of %d delayed messages arrived: %v", got, delayed, err)
		}
		due := runAt
		if asked.After(due) {
			due = asked
		}
		if early := runAt.Sub(at); early > time.Second {
			t.Errorf("delayed message arrived %v before its run-at", early.Round(time.Millisecond))
		}
		if late := at.Sub(due); late > time.Second {
			t.Errorf("delayed message arrived %v after it was due (run-at %v after the start, asked for %v after it); want within a second",
				late.Round(time.Millisecond), runAt.Sub(start).Round(time.Millisecond), asked.Sub(start).Round(time.Millisecond))
		}
		for _, d := range ds {
			if d.Kind != "later" {
				t.Errorf("unexpected message %s of kind %q", d.ID, d.Kind)
			}
		}
		got += len(ds)
		if err := final.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
}

// relayUntilEmpty runs r (with StopWhenIdle) until its source queue holds
// no ready or leased message, waiting for leases a killed run left behind.
func relayUntilEmpty(t *testing.T, r *relay.Relay, from *fila.Client, q string) relay.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	r.StopWhenIdle = 500 * time.Millisecond
	var total relay.Stats
	for {
		st, err := r.Run(ctx)
		if err != nil {
			t.Fatalf("relay run: %v", err)
		}
		total.Moved += st.Moved
		total.Duplicates += st.Duplicates
		s, err := from.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if s.Ready+s.Leased == 0 {
			return total
		}
		if s.Ready == 0 {
			// Leased by the killed run: wait for them to come back.
			for s.Ready == 0 && s.Leased > 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("source still holds %+v", s)
				case <-time.After(100 * time.Millisecond):
				}
				if s, err = from.QueueStats(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// drainQueue receives and acks at least n messages of q, and then whatever
// else arrives within a second.
func drainQueue(t *testing.T, c *fila.Client, q string, n int) []*fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []*fila.Delivery
	for {
		rctx := ctx
		var rcancel context.CancelFunc = func() {}
		if len(all) >= n {
			rctx, rcancel = context.WithTimeout(ctx, time.Second)
		}
		ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 1000})
		rcancel()
		if err != nil {
			if len(all) >= n && ctx.Err() == nil {
				return all
			}
			t.Fatalf("received %d of %d messages: %v", len(all), n, err)
		}
		all = append(all, ds...)
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
}

// fillQueue enqueues n messages numbered by their body and header "n".
func fillQueue(t *testing.T, c *fila.Client, q string, n int) {
	t.Helper()
	ctx := context.Background()
	for lo := 0; lo < n; lo += 1000 {
		hi := min(lo+1000, n)
		msgs := make([]fila.Message, 0, hi-lo)
		for i := lo; i < hi; i++ {
			s := strconv.Itoa(i)
			msgs = append(msgs, fila.Message{Kind: "relay.test", Body: []byte(s), Headers: map[string]string{"n": s}})
		}
		if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
			t.Fatal(err)
		}
	}
}

// pgRelayURL is the test server's URL with the schema migrated at open.
func pgRelayURL(t *testing.T) string {
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("fila_migrate", "true")
	u.RawQuery = q.Encode()
	return u.String()
}

// mongoRelayURL is the test server's URL with a fresh database, dropped
// when the test ends. (A fresh database also keeps the test clear of
// FerretDB's habit of wedging a database's SQLite connection after an
// interrupted operation: every later write there fails with "interrupted".)
func mongoRelayURL(tb testing.TB) string {
	base := testenv.MongoURL(tb)
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	db := relayQueue("db")
	q := u.Query()
	q.Set("fila_database", db)
	u.RawQuery = q.Encode()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongodriver.Connect(options.Client().ApplyURI(base))
		if err != nil {
			return
		}
		defer c.Disconnect(ctx)
		_ = c.Database(db).Drop(ctx)
	})
	return u.String()
}

// mysqlRelayURL is the test server's URL with Fila's tables migrated at
// open.
func mysqlRelayURL(tb testing.TB) string {
	return testenv.WithParams(tb, testenv.MySQLURL(tb), "fila_migrate", "true")
}

func openRelayClient(t *testing.T, u string) *fila.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, u, fila.WithLogger(quietLogger()))
	if err != nil {
		t.Fatalf("open %s: %v", fila.Redact(u), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func relayQueue(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "relay_" + prefix + "_" + hex.EncodeToString(b)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
