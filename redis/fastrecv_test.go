package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/redis"
)

// fastEnv returns an env whose drivers use the fast receive path, and a
// client whose first Receive on q has run (the first Receive of a queue
// takes the script path: the driver knows nothing of its leases yet).
func fastEnv(t *testing.T, q string) (*env, *redis.Driver, *fila.Client) {
	t.Helper()
	e := newEnv(t)
	e.fast = true
	d := e.driver(t, redis.Options{})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, c, q, fila.Message{Kind: "warm-up"})
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if err := ds[0].Ack(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return e, d, c
}

// assertLeasedTo checks that the delivery with receipt r is pending for
// its Receive call's lease consumer, which has a deadline.
func assertLeasedTo(t *testing.T, e *env, q, receipt string) {
	t.Helper()
	ctx := testCtx(t)
	sid, tok, _ := strings.Cut(receipt, "/")
	k := redis.QueueKeys(e.prefix, q)
	p, err := e.raw.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: k[redis.KeyStream], Group: "fila", Start: sid, End: sid, Count: 1}).Result()
	if err != nil || len(p) != 1 {
		t.Fatalf("pending entry of %s: %v, %v", sid, p, err)
	}
	if p[0].Consumer != "l"+tok {
		t.Errorf("%s is pending for %q, want the lease consumer %q", sid, p[0].Consumer, "l"+tok)
	}
	if err := e.raw.ZScore(ctx, k[redis.KeyDeadlines], "l"+tok).Err(); err != nil {
		t.Errorf("deadline of lease consumer l%s: %v", tok, err)
	}
}

// assertNoLeases checks that a queue whose deliveries were all settled keeps
// no lease consumer and no deadline.
func assertNoLeases(t *testing.T, e *env, q string) {
	t.Helper()
	ctx := testCtx(t)
	k := redis.QueueKeys(e.prefix, q)
	cs, err := e.raw.XInfoConsumers(ctx, k[redis.KeyStream], "fila").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Errorf("%d consumers left in the group: %+v", len(cs), cs)
	}
	if n, _ := e.raw.ZCount(ctx, k[redis.KeyDeadlines], "-inf", "(+inf").Result(); n != 0 {
		t.Errorf("%d deadlines left", n)
	}
}

// The fast path's deliveries free their dedup keys when acked, and a settled
// batch leaves no lease behind.
func TestFastPathFreesDedupKeys(t *testing.T) {
	const q = "fast-dedup"
	e, _, c := fastEnv(t, q)
	ctx := testCtx(t)
	for _, k := range []string{"d1", "d2", ""} {
		enqueue(t, c, q, fila.Message{Kind: "x", DedupKey: k})
	}
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if len(ds) != 3 {
		t.Fatalf("received %d, want 3", len(ds))
	}
	for _, d := range ds {
		if d.Attempt != 1 {
			t.Errorf("attempt %d", d.Attempt)
		}
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.raw.HLen(ctx, redis.QueueKeys(e.prefix, q)[redis.KeyDedup]).Result(); n != 0 {
		t.Errorf("%d dedup keys left after acking their messages", n)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "x", DedupKey: "d1"}); err != nil {
		t.Errorf("enqueue with a freed dedup key: %v", err)
	}
	if n, _ := e.raw.HLen(ctx, redis.QueueKeys(e.prefix, q)[redis.KeyDedupIDs]).Result(); n != 1 {
		t.Errorf("dedup index holds %d entries, want 1 (the new message)", n)
	}
	assertNoLeases(t, e, q)
}

// Deliveries of the fast path are leased by their call's consumer and carry
// the right attempts (carried ones plus the pending entry's delivery count)
// through Retry, Dead and the takeover of an expired lease.
func TestFastPathAttempts(t *testing.T) {
	const q = "fast-lazy"
	e, d, c := fastEnv(t, q)
	ctx := testCtx(t)
	var ms []backend.Message
	for _, k := range []string{"retry", "dead", "expire"} {
		m := msg(t, k)
		m.Attempts = 2
		ms = append(ms, m)
	}
	if _, err := d.Enqueue(ctx, q, ms); err != nil {
		t.Fatal(err)
	}
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Second})
	if len(ds) != 3 {
		t.Fatalf("received %d, want 3", len(ds))
	}
	by := map[string]*fila.Delivery{}
	for _, x := range ds {
		by[x.Kind] = x
		if x.Attempt != 3 {
			t.Errorf("%s: attempt %d, want 3", x.Kind, x.Attempt)
		}
		assertLeasedTo(t, e, q, x.Receipt())
	}
	if err := by["retry"].Retry(ctx, 0, "again"); err != nil {
		t.Fatal(err)
	}
	if err := by["dead"].Dead(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	// The retried one comes back at once; the expired one after its lease.
	seen := map[string]int{}
	for len(seen) < 2 {
		got := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
		for _, x := range got {
			seen[x.Kind] = x.Attempt
			if x.Kind == "retry" && x.LastError != "again" {
				t.Errorf("retried delivery's last error %q", x.LastError)
			}
			if err := x.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if seen["retry"] != 4 || seen["expire"] != 4 {
		t.Errorf("attempts after retry and expiry: %v, want 4 each", seen)
	}
	page, err := c.DeadList(ctx, q, fila.DeadListParams{})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].Attempts != 3 || page.Letters[0].ID != by["dead"].ID {
		t.Fatalf("dead letters %+v, %v", page.Letters, err)
	}
	if err := by["expire"].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("stale Ack after the takeover: %v, want ErrLeaseLost", err)
	}
}

// The largest batches fit the scripts' argument lists: a fast Receive of
// MaxReceive, a ReceiveDelayed of as many, and a DeadImport over several
// script calls.
func TestLargestBatches(t *testing.T) {
	const q = "fast-large"
	_, d, c := fastEnv(t, q)
	ctx := testCtx(t)
	now, later := make([]fila.Message, fila.MaxReceive), make([]fila.Message, fila.MaxReceive)
	for i := range now {
		now[i] = fila.Message{Kind: "now"}
		later[i] = fila.Message{Kind: "later", Delay: time.Hour}
	}
	for _, b := range [][]fila.Message{now, later} {
		if _, err := c.EnqueueBatch(ctx, q, b); err != nil {
			t.Fatal(err)
		}
	}
	ds := receive(t, c, q, fila.ReceiveParams{Max: fila.MaxReceive, Lease: time.Minute})
	if len(ds) != fila.MaxReceive {
		t.Fatalf("fast Receive of %d returned %d", fila.MaxReceive, len(ds))
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
	early := receiveDelayed(t, d, q, fila.MaxReceive, time.Minute)
	if len(early) != fila.MaxReceive {
		t.Fatalf("ReceiveDelayed of %d returned %d", fila.MaxReceive, len(early))
	}
	refs := make([]backend.Ref, len(early))
	letters := make([]backend.DeadLetter, len(early))
	for i, x := range early {
		refs[i] = ref(q, x)
		letters[i] = backend.DeadLetter{Message: x.Message, Attempts: x.Attempt, Reason: "moved"}
	}
	errs, err := d.Ack(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		if e != nil {
			t.Fatalf("Ack of an early delivery: %v", e)
		}
	}
	for round := 0; round < 2; round++ {
		if err := d.DeadImport(ctx, q, letters); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil || st.Dead != int64(len(letters)) || st.Delayed != 0 || st.Leased != 0 || st.Ready != 0 {
		t.Errorf("stats %+v, %v; want %d dead and nothing else", st, err, len(letters))
	}
}
