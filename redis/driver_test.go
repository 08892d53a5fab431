package redis_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/redis"
)

func enqueue(t *testing.T, c *fila.Client, queue string, m fila.Message) string {
	t.Helper()
	id, err := c.Enqueue(testCtx(t), queue, m)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return id
}

func receive(t *testing.T, c *fila.Client, queue string, p fila.ReceiveParams) []*fila.Delivery {
	t.Helper()
	ds, err := c.Receive(testCtx(t), queue, p)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return ds
}

// receiveNone asserts that nothing is receivable during d.
func receiveNone(t *testing.T, c *fila.Client, queue string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 10, Lease: time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive on a queue that should look empty = %d deliveries, %v", len(ds), err)
	}
}

// A consumer that crashes holding a 1 s lease loses only that message: a
// message another consumer leased for 30 s is not taken over.
func TestCrashWithShortLeaseOnlyTakesOverThatMessage(t *testing.T) {
	bothPaths(t, testCrashWithShortLeaseOnlyTakesOverThatMessage)
}

func testCrashWithShortLeaseOnlyTakesOverThatMessage(t *testing.T, e *env) {
	const q = "crash"
	prod := e.client(t, redis.Options{})
	short, err := fila.New(e.driver(t, redis.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	long := e.client(t, redis.Options{})
	other := e.client(t, redis.Options{})

	id1 := enqueue(t, prod, q, fila.Message{Kind: "one"})
	id2 := enqueue(t, prod, q, fila.Message{Kind: "two"})
	d1 := receive(t, short, q, fila.ReceiveParams{Lease: time.Second})
	d2 := receive(t, long, q, fila.ReceiveParams{Lease: 30 * time.Second})
	if d1[0].ID != id1 || d2[0].ID != id2 {
		t.Fatalf("got %s and %s, want %s then %s", d1[0].ID, d2[0].ID, id1, id2)
	}
	short.Close() // the crash: no ack

	start := time.Now()
	again := receive(t, other, q, fila.ReceiveParams{Max: 10, Lease: time.Second})
	if len(again) != 1 || again[0].ID != id1 || again[0].Attempt != 2 {
		t.Fatalf("after the crash got %v, want only %s at attempt 2", ids(again), id1)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("takeover took %v after a 1 s lease", waited)
	}
	if err := again[0].Ack(testCtx(t)); err != nil {
		t.Fatalf("Ack of the taken-over message: %v", err)
	}
	// The 30 s lease stays with its holder: a short-lease receiver sees
	// nothing for longer than the short lease.
	receiveNone(t, other, q, 2500*time.Millisecond)
	if err := d2[0].Ack(testCtx(t)); err != nil {
		t.Fatalf("Ack by the 30 s holder: %v", err)
	}
}

func ids(ds []*fila.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// When a queue's keys are deleted (FLUSHALL, a restart without persistence),
// the driver recreates the stream and group instead of failing with NOGROUP,
// including for a receiver that was blocked at that moment.
func TestNOGROUPRecovery(t *testing.T) { bothPaths(t, testNOGROUPRecovery) }

func testNOGROUPRecovery(t *testing.T, e *env) {
	const q = "nogroup"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)

	enqueue(t, c, q, fila.Message{Kind: "before"})
	ds := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// A receiver blocks on the empty queue; then every key goes.
	got := make(chan []*fila.Delivery, 1)
	errc := make(chan error, 1)
	go func() {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
		errc <- err
		got <- ds
	}()
	time.Sleep(100 * time.Millisecond) // let it block; the test holds either way
	if err := e.raw.Del(ctx, redis.QueueKeys(e.prefix, q)...).Err(); err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, c, q, fila.Message{Kind: "after-del"})
	if err := <-errc; err != nil {
		t.Fatalf("blocked Receive after DEL: %v", err)
	}
	if ds := <-got; len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("blocked Receive after DEL got %v, want %s", ids(ds), id)
	} else if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// Only the group vanishes while the stream keeps an entry: the next
	// Receive recreates the group and delivers the entry.
	id = enqueue(t, c, q, fila.Message{Kind: "after-destroy"})
	stream := redis.QueueKeys(e.prefix, q)[redis.KeyStream]
	if err := e.raw.XGroupDestroy(ctx, stream, "fila").Err(); err != nil {
		t.Fatal(err)
	}
	ds = receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("after XGROUP DESTROY got %v, want %s", ids(ds), id)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// The group vanishes while a message is leased: when the lease expires
	// the entry is handed out again (re-added), not lost.
	id = enqueue(t, c, q, fila.Message{Kind: "leased-destroy"})
	first := receive(t, c, q, fila.ReceiveParams{Lease: time.Second})
	if err := e.raw.XGroupDestroy(ctx, stream, "fila").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.raw.XGroupCreate(ctx, stream, "fila", "$").Err(); err != nil {
		t.Fatal(err)
	}
	again := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if len(again) != 1 || again[0].ID != id || again[0].Attempt != 2 {
		t.Fatalf("after losing the pending entry got %v (attempt %d), want %s at attempt 2", ids(again), again[0].Attempt, id)
	}
	if err := first[0].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("stale Ack = %v, want ErrLeaseLost", err)
	}
	if err := again[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// A pending entry deleted from the stream behind the driver's back (a blind
// XTRIM or XDEL) is cleaned up when its lease expires: nothing is delivered,
// its lease consumer and deadline go and its dedup key is freed.
func TestDeletedEntryOnTakeover(t *testing.T) { bothPaths(t, testDeletedEntryOnTakeover) }

func testDeletedEntryOnTakeover(t *testing.T, e *env) {
	const q = "deleted"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	k := redis.QueueKeys(e.prefix, q)

	enqueue(t, c, q, fila.Message{Kind: "gone", DedupKey: "dk"})
	ds := receive(t, c, q, fila.ReceiveParams{Lease: time.Second})
	sid, _, _ := strings.Cut(ds[0].Receipt(), "/")
	if n, err := e.raw.XDel(ctx, k[redis.KeyStream], sid).Result(); err != nil || n != 1 {
		t.Fatalf("XDEL %s = %d, %v", sid, n, err)
	}
	receiveNone(t, c, q, 2500*time.Millisecond)
	assertNoLeases(t, e, q)
	if e.raw.HExists(ctx, k[redis.KeyDedupIDs], sid).Val() {
		t.Errorf("dedup index of %s left", sid)
	}
	if p := e.raw.XPending(ctx, k[redis.KeyStream], "fila").Val(); p.Count != 0 {
		t.Errorf("%d pending entries left", p.Count)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "again", DedupKey: "dk"}); err != nil {
		t.Errorf("dedup key not freed: %v", err)
	}
}

// The XAUTOCLAIM sweep hands out pending entries that have no lease record
// (read by a foreign XREADGROUP) and cleans up the ones deleted from the
// stream (reported in XAUTOCLAIM's third reply element).
func TestSweepHandlesOrphansAndDeletedEntries(t *testing.T) {
	bothPaths(t, testSweepHandlesOrphansAndDeletedEntries)
}

func testSweepHandlesOrphansAndDeletedEntries(t *testing.T, e *env) {
	const q = "sweep"
	c := e.client(t, redis.Options{SweepEvery: 10 * time.Millisecond, OrphanIdle: time.Millisecond})
	ctx := testCtx(t)
	k := redis.QueueKeys(e.prefix, q)

	// (a plain enqueue leaves the group to the first Receive)
	if err := e.raw.XGroupCreateMkStream(ctx, k[redis.KeyStream], "fila", "0").Err(); err != nil {
		t.Fatal(err)
	}
	keep := enqueue(t, c, q, fila.Message{Kind: "keep"})
	enqueue(t, c, q, fila.Message{Kind: "drop", DedupKey: "dk"})
	// A foreign consumer reads both (no lease records), then one entry is
	// deleted from the stream.
	read, err := e.raw.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "fila", Consumer: "foreign", Streams: []string{k[redis.KeyStream], ">"}, Count: 10}).Result()
	if err != nil || len(read[0].Messages) != 2 {
		t.Fatalf("foreign XREADGROUP: %v %v", read, err)
	}
	if err := e.raw.XDel(ctx, k[redis.KeyStream], read[0].Messages[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past OrphanIdle

	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(ds) != 1 || ds[0].ID != keep || ds[0].Attempt != 2 {
		t.Fatalf("got %v, want only %s at attempt 2 (the foreign read counts)", ids(ds), keep)
	}
	pend, err := e.raw.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: k[redis.KeyStream], Group: "fila", Start: "-", End: "+", Count: 10}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 1 || pend[0].ID != read[0].Messages[0].ID {
		t.Errorf("pending list %v, want only %s", pend, read[0].Messages[0].ID)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// All keys of a queue hash to one Redis Cluster slot, so every script
// touches a single slot.
func TestKeysShareOneClusterSlot(t *testing.T) {
	// Known slots from the Redis Cluster specification and redis-cli.
	for key, want := range map[string]uint16{"123456789": 0x31C3 % 16384, "foo": 12182, "somekey": 11058, "{user1000}.following": keySlot("user1000")} {
		if got := keySlot(key); got != want {
			t.Fatalf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	for _, q := range []string{"a", "orders.v2", "Q-1_x"} {
		ks := redis.QueueKeys("fila", q)
		if len(ks) != 16 {
			t.Fatalf("%d keys", len(ks))
		}
		slot := keySlot(ks[0])
		for _, k := range ks {
			if !strings.HasPrefix(k, "{fila:"+q+"}") {
				t.Errorf("key %q lacks the hash tag", k)
			}
			if s := keySlot(k); s != slot {
				t.Errorf("queue %s: key %q is in slot %d, %q in %d", q, k, s, ks[0], slot)
			}
		}
	}

	// Every key the driver really creates is one of the queue's keys.
	e := newEnv(t)
	const q = "slots"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	enqueue(t, c, q, fila.Message{Kind: "x", DedupKey: "k1"})
	enqueue(t, c, q, fila.Message{Kind: "later", Delay: time.Hour})
	ds := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if err := ds[0].Dead(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, c, q, fila.Message{Kind: "leased"})
	receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	enqueue(t, c, q, fila.Message{Kind: "high", Priority: fila.MaxPriority})
	receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if _, err := c.Driver().(backend.Marker).MarkSet(ctx, q, "pause", time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range redis.QueueKeys(e.prefix, q) {
		known[k] = true
	}
	found, err := e.raw.Keys(ctx, "{"+e.prefix+":"+q+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 6 {
		t.Errorf("only %d keys exist: %v", len(found), found)
	}
	for _, k := range found {
		if !known[k] {
			t.Errorf("unexpected key %q", k)
		}
		if keySlot(k) != keySlot(redis.QueueKeys(e.prefix, q)[0]) {
			t.Errorf("key %q in another slot", k)
		}
	}
}

// keySlot is Redis Cluster's HASH_SLOT: CRC16 (XMODEM) of the key, or of its
// hash tag, modulo 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// The dead-letter stream keeps at most DeadCap letters and the per-kind
// counts follow the trimming.
func TestDeadCap(t *testing.T) { bothPaths(t, testDeadCap) }

func testDeadCap(t *testing.T, e *env) {
	const q = "deadcap"
	c := e.client(t, redis.Options{DeadCap: 3})
	ctx := testCtx(t)
	for i := 0; i < 5; i++ {
		kind := "a"
		if i >= 3 {
			kind = "b"
		}
		enqueue(t, c, q, fila.Message{Kind: kind})
		ds := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
		if err := ds[0].Dead(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st.Dead != 3 || st.DeadByKind["a"] != 1 || st.DeadByKind["b"] != 2 {
		t.Errorf("stats %+v, want 3 dead: a=1 b=2", st)
	}
}

func TestOpenURLParameters(t *testing.T) {
	_, raw := rawClient(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		params map[string]string
		ok     bool
	}{
		{map[string]string{"fila_prefix": "p1", "fila_dead_cap": "10", "fila_block": "500ms", "fila_sweep": "0", "pool_size": "3", "read_timeout": "2s"}, true},
		{map[string]string{"fila_mode": "single"}, true},
		{map[string]string{"fila_nope": "1"}, false},
		{map[string]string{"fila_block": "soon"}, false},
		{map[string]string{"fila_block": "0s"}, false},
		{map[string]string{"fila_dead_cap": "-1"}, false},
		{map[string]string{"fila_mode": "ring"}, false},
		{map[string]string{"fila_prefix": "a{b"}, false},
		{map[string]string{"nonsense": "1"}, false},
		{map[string]string{"pool_size": "many"}, false},
	} {
		u := driverURL(t, raw, tc.params)
		c, err := fila.Open(ctx, u)
		if tc.ok {
			if err != nil {
				t.Errorf("Open(%v): %v", tc.params, err)
				continue
			}
			if err := c.Ping(ctx); err != nil {
				t.Errorf("Ping(%v): %v", tc.params, err)
			}
			c.Close()
			continue
		}
		if err == nil {
			c.Close()
			t.Errorf("Open(%v) succeeded, want ErrInvalid", tc.params)
		} else if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open(%v) = %v, want ErrInvalid", tc.params, err)
		}
	}
	// A password in the URL never shows in errors.
	u, _ := url.Parse(raw)
	u.User = url.UserPassword("me", "s3cret")
	u.RawQuery = "bogus=1"
	if _, err := fila.Open(ctx, u.String()); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open with a password and a bad parameter = %v", err)
	}
}

// AckBatch across two queues and past one script call's limit (1000 refs)
// settles every current receipt and reports the stale one alone.
func TestAckBatchAcrossQueuesAndChunks(t *testing.T) { bothPaths(t, testAckBatchAcrossQueuesAndChunks) }

func testAckBatchAcrossQueuesAndChunks(t *testing.T, e *env) {
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	msgs := make([]fila.Message, 1100)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "bulk"}
	}
	if _, err := c.EnqueueBatch(ctx, "bulk", msgs); err != nil {
		t.Fatal(err)
	}
	enqueue(t, c, "other", fila.Message{Kind: "other"})
	enqueue(t, c, "other", fila.Message{Kind: "stale"})
	var all []*fila.Delivery
	for len(all) < 1100 {
		all = append(all, receive(t, c, "bulk", fila.ReceiveParams{Max: 1000, Lease: time.Minute})...)
	}
	all = append(all, receive(t, c, "other", fila.ReceiveParams{Max: 1, Lease: time.Minute})...)
	stale := receive(t, c, "other", fila.ReceiveParams{Max: 1, Lease: time.Minute})[0]
	if err := stale.Release(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := receive(t, c, "other", fila.ReceiveParams{Max: 1, Lease: time.Minute})[0]

	err := c.AckBatch(ctx, append(all, stale))
	if !errors.Is(err, fila.ErrLeaseLost) {
		t.Fatalf("AckBatch with one stale delivery = %v, want ErrLeaseLost", err)
	}
	if n := strings.Count(err.Error(), "lease lost"); n != 1 {
		t.Errorf("%d lease-lost errors in %v, want 1", n, err)
	}
	for _, q := range []string{"bulk", "other"} {
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if q == "other" {
			want = 1 // fresh is still leased
		}
		if st.Ready != 0 || st.Leased != want {
			t.Errorf("%s after AckBatch: %+v, want leased %d and nothing ready", q, st, want)
		}
	}
	if err := fresh.Ack(ctx); err != nil {
		t.Errorf("the current holder's Ack: %v", err)
	}
}

// A binary body and headers survive the delayed set (msgpack in Lua) on
// enqueue and on retry, with attempts and the last error carried along.
func TestBinaryThroughDelayedSet(t *testing.T) { bothPaths(t, testBinaryThroughDelayedSet) }

func testBinaryThroughDelayedSet(t *testing.T, e *env) {
	const q = "binary"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	body := make([]byte, 512)
	for i := range body {
		body[i] = byte(i)
	}
	h := map[string]string{"trace": "t-1", "ünï": "cödé\t"}
	id := enqueue(t, c, q, fila.Message{Kind: "bin", Body: body, Headers: h, Delay: 20 * time.Millisecond, MaxAttempts: 7})
	check := func(d *fila.Delivery, attempt int, lastErr string) {
		t.Helper()
		if d.ID != id || d.Kind != "bin" || string(d.Body) != string(body) || d.MaxAttempts != 7 ||
			d.Attempt != attempt || d.LastError != lastErr || len(d.Headers) != 2 || d.Headers["ünï"] != h["ünï"] || d.Headers["trace"] != "t-1" {
			t.Fatalf("delivery %+v, want attempt %d, last error %q and the original message", d, attempt, lastErr)
		}
	}
	ds := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	check(ds[0], 1, "")
	if err := ds[0].Retry(ctx, 20*time.Millisecond, "boom"); err != nil {
		t.Fatal(err)
	}
	ds = receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	check(ds[0], 2, "boom")
	if err := ds[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	ds = receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	check(ds[0], 3, "boom")
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// Extending one delivery of a batch moves only that delivery's deadline:
// the rest of the batch is taken over when the batch's lease ends, the
// extended one stays with its holder, who can still settle it.
func TestExtendOneOfABatch(t *testing.T) { bothPaths(t, testExtendOneOfABatch) }

func testExtendOneOfABatch(t *testing.T, e *env) {
	const q = "extend-one"
	holder := e.client(t, redis.Options{})
	other := e.client(t, redis.Options{})
	ctx := testCtx(t)
	for _, k := range []string{"a", "b", "c"} {
		enqueue(t, holder, q, fila.Message{Kind: k})
	}
	ds := receive(t, holder, q, fila.ReceiveParams{Max: 10, Lease: time.Second})
	if len(ds) != 3 {
		t.Fatalf("received %d, want 3", len(ds))
	}
	if err := ds[1].Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	assertLeasedTo(t, e, q, ds[0].Receipt())
	again := map[string]*fila.Delivery{}
	for len(again) < 2 {
		for _, d := range receive(t, other, q, fila.ReceiveParams{Max: 10, Lease: time.Minute}) {
			again[d.Kind] = d
		}
	}
	if again["a"] == nil || again["c"] == nil || again["a"].Attempt != 2 {
		t.Fatalf("taken over %v, want a (attempt 2) and c", again)
	}
	receiveNone(t, other, q, 300*time.Millisecond)
	if err := ds[0].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("stale Ack of a taken-over delivery = %v, want ErrLeaseLost", err)
	}
	if err := ds[1].Extend(ctx, time.Minute); err != nil {
		t.Errorf("second Extend: %v", err)
	}
	if err := holder.AckBatch(ctx, []*fila.Delivery{ds[1], ds[2]}); err == nil {
		t.Errorf("AckBatch with one stale delivery succeeded")
	}
	if err := ds[1].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("Ack after the batch acked it = %v, want ErrLeaseLost (settled once)", err)
	}
	if err := other.AckBatch(ctx, []*fila.Delivery{again["a"], again["c"]}); err != nil {
		t.Fatal(err)
	}
	assertNoLeases(t, e, q)
}

// A batch ack reports exactly the refs whose lease is lost: one settled
// before, one repeated in the batch, one taken over after its lease ended
// (its batch then lost an entry to another consumer); the rest are acked
// once and the queue keeps no lease.
func TestAckBatchReportsEachLostRef(t *testing.T) { bothPaths(t, testAckBatchReportsEachLostRef) }

func testAckBatchReportsEachLostRef(t *testing.T, e *env) {
	const q = "ack-lost"
	d := e.driver(t, redis.Options{})
	ctx := testCtx(t)
	ms := make([]backend.Message, 4)
	for i := range ms {
		ms[i] = msg(t, "m")
	}
	if _, err := d.Enqueue(ctx, q, ms); err != nil {
		t.Fatal(err)
	}
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 4 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	ack := func(refs ...backend.Ref) []error {
		t.Helper()
		errs, err := d.Ack(ctx, refs)
		if err != nil {
			t.Fatal(err)
		}
		return errs
	}
	if errs := ack(ref(q, ds[0])); errs[0] != nil {
		t.Fatalf("first Ack: %v", errs[0])
	}
	errs := ack(ref(q, ds[0]), ref(q, ds[1]), ref(q, ds[1]), ref(q, ds[2]))
	want := []error{backend.ErrLeaseLost, nil, backend.ErrLeaseLost, nil}
	for i := range want {
		if !errors.Is(errs[i], want[i]) && errs[i] != want[i] {
			t.Errorf("ref %d: %v, want %v", i, errs[i], want[i])
		}
	}

	// The last one is taken over after a short lease; its old receipt is
	// stale, in a batch or alone, and the new holder acks it.
	if _, err := d.Enqueue(ctx, q, []backend.Message{msg(t, "short")}); err != nil {
		t.Fatal(err)
	}
	short, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: 200 * time.Millisecond})
	if err != nil || len(short) != 1 {
		t.Fatalf("Receive: %d, %v", len(short), err)
	}
	other := e.driver(t, redis.Options{})
	again, err := other.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(again) != 1 || again[0].ID != short[0].ID || again[0].Attempt != 2 {
		t.Fatalf("takeover: %v, %v", again, err)
	}
	errs = ack(ref(q, short[0]), ref(q, ds[3]))
	if !errors.Is(errs[0], backend.ErrLeaseLost) || errs[1] != nil {
		t.Errorf("stale and current ref: %v, want [ErrLeaseLost <nil>]", errs)
	}
	if errs := ack(ref(q, again[0])); errs[0] != nil {
		t.Errorf("new holder's Ack: %v", errs[0])
	}
	assertNoLeases(t, e, q)
	if n, _ := e.raw.XLen(ctx, redis.QueueKeys(e.prefix, q)[redis.KeyStream]).Result(); n != 0 {
		t.Errorf("%d entries left in the stream", n)
	}
}

// A batch without dedup keys or delays is stored with plain XADDs, which
// create the stream but not its group: stats count it, and the first
// Receive creates the group from the stream's start and gets every entry.
func TestPlainEnqueueBeforeAnyGroup(t *testing.T) { bothPaths(t, testPlainEnqueueBeforeAnyGroup) }

func testPlainEnqueueBeforeAnyGroup(t *testing.T, e *env) {
	const q = "plain"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	want, err := c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "a"}, {Kind: "b"}, {Kind: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	stream := redis.QueueKeys(e.prefix, q)[redis.KeyStream]
	if gs, err := e.raw.XInfoGroups(ctx, stream).Result(); err != nil || len(gs) != 0 {
		t.Fatalf("groups after a plain enqueue: %v, %v; want none yet", gs, err)
	}
	if st, err := c.QueueStats(ctx, q); err != nil || st.Ready != 3 {
		t.Fatalf("stats %+v, %v; want 3 ready", st, err)
	}
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if got := ids(ds); len(got) != 3 || got[0] != want[0] || got[2] != want[2] {
		t.Fatalf("received %v, want %v", got, want)
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
	assertNoLeases(t, e, q)
}

// QueueList names only the driver's own prefix's queues, even next to a
// prefix that extends it, and finds queues holding only delayed messages or
// dead letters.
func TestQueueListKeepsToItsPrefix(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	c := e.client(t, redis.Options{})
	ld, err := redis.New(e.raw, redis.Options{Prefix: e.prefix + ":x"}) // e.driver would force e.prefix
	if err != nil {
		t.Fatal(err)
	}
	longer, err := fila.New(ld)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the longer prefix's keys, which testPrefix's cleanup does not match
		_ = longer.QueueDelete(context.Background(), "theirs", fila.QueueDeleteParams{Force: true})
		longer.Close()
	})
	enqueue(t, c, "ready", fila.Message{Kind: "x"})
	enqueue(t, c, "later", fila.Message{Kind: "x", Delay: time.Hour})
	enqueue(t, longer, "theirs", fila.Message{Kind: "x"})
	qs, err := c.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"later", "ready"}; !slices.Equal(qs, want) {
		t.Errorf("QueueList = %v, want %v", qs, want)
	}
	if err := c.QueueDelete(ctx, "ready", fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatal(err)
	}
	if qs, err := c.QueueList(ctx); err != nil || !slices.Equal(qs, []string{"later"}) {
		t.Errorf("after QueueDelete, QueueList = %v, %v; want [later]", qs, err)
	}
}

// A takeover that takes only part of an expired batch: the holder's acks
// are refused, the taken entry's because someone else holds it and the
// others' because the lease's deadline has passed; the rest of the batch is
// taken over in turn and acked, and no lease is left.
func TestPartialTakeoverFencesStaleAck(t *testing.T) { bothPaths(t, testPartialTakeover) }

func testPartialTakeover(t *testing.T, e *env) {
	const q = "partial"
	holder, other := e.driver(t, redis.Options{}), e.driver(t, redis.Options{})
	ctx := testCtx(t)
	ms := []backend.Message{msg(t, "a"), msg(t, "b"), msg(t, "c")}
	if _, err := holder.Enqueue(ctx, q, ms); err != nil {
		t.Fatal(err)
	}
	ds, err := holder.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: 200 * time.Millisecond})
	if err != nil || len(ds) != 3 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	taken, err := other.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(taken) != 1 || taken[0].Attempt != 2 {
		t.Fatalf("takeover of one: %v, %v", taken, err)
	}
	refs := []backend.Ref{ref(q, ds[0]), ref(q, ds[1]), ref(q, ds[2])}
	errs, err := holder.Ack(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if !errors.Is(errs[i], backend.ErrLeaseLost) {
			t.Errorf("holder's Ack of %s (taken over: %v) after its deadline = %v, want ErrLeaseLost", d.Kind, d.ID == taken[0].ID, errs[i])
		}
	}
	rest, err := other.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(rest) != 2 || rest[0].Attempt != 2 || rest[1].Attempt != 2 {
		t.Fatalf("takeover of the rest: %v, %v", rest, err)
	}
	all := append(taken, rest...)
	acks := make([]backend.Ref, len(all))
	for i, d := range all {
		acks[i] = ref(q, d)
	}
	if errs, err := other.Ack(ctx, acks); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Errorf("new holder's Ack: %v, %v", errs, err)
	}
	assertNoLeases(t, e, q)
}

// A sweep pass ends even while every Receive reads a full batch: it walks
// the stream only up to where the group had read when the pass began (a
// pass chasing the newest reads never ended, and every Receive paid for a
// step).
func TestSweepPassEnds(t *testing.T) { bothPaths(t, testSweepPassEnds) }

func testSweepPassEnds(t *testing.T, e *env) {
	const q = "sweep-ends"
	c := e.client(t, redis.Options{SweepEvery: time.Hour})
	ctx := testCtx(t)
	msgs := make([]fila.Message, 500)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "x"}
	}
	if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		ds := receive(t, c, q, fila.ReceiveParams{Max: 100, Lease: time.Minute})
		if len(ds) != 100 {
			t.Fatalf("receive %d: %d deliveries", i, len(ds))
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.raw.HGetAll(ctx, redis.QueueKeys(e.prefix, q)[redis.KeySweep]).Result()
	if err != nil {
		t.Fatal(err)
	}
	next, _ := strconv.ParseInt(st["t"], 10, 64)
	if st["c"] != "0-0" || time.UnixMilli(next).Before(time.Now().Add(30*time.Minute)) {
		t.Errorf("sweep state %v: want the pass ended (cursor 0-0) and the next one an hour away", st)
	}
}
