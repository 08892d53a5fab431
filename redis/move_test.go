package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/redis"
)

// newID returns a random (version 4) UUID, a valid message id.
func newID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func msg(t *testing.T, kind string) backend.Message {
	return backend.Message{ID: newID(t), Kind: kind, Body: []byte(kind), EnqueuedAt: time.Now()}
}

func receiveDelayed(t *testing.T, d *redis.Driver, q string, max int, lease time.Duration) []backend.Delivery {
	t.Helper()
	ds, err := d.ReceiveDelayed(testCtx(t), q, backend.ReceiveParams{Max: max, Lease: lease})
	if err != nil {
		t.Fatalf("ReceiveDelayed: %v", err)
	}
	return ds
}

func ref(q string, d backend.Delivery) backend.Ref {
	return backend.Ref{Queue: q, ID: d.ID, Receipt: d.Receipt}
}

// Extend, Retry, Ack and Dead work on deliveries taken early; an extended
// early delivery stays held, a retried one waits for its run-at again;
// settling one frees its payload and dedup key.
func TestReceiveDelayedSettlements(t *testing.T) { bothPaths(t, testReceiveDelayedSettlements) }

func testReceiveDelayedSettlements(t *testing.T, e *env) {
	const q = "early"
	d := e.driver(t, redis.Options{})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	runAt := time.Now().Add(time.Hour)
	var ms []backend.Message
	for _, k := range []string{"retry", "ack", "dead"} {
		m := msg(t, k)
		m.RunAt, m.DedupKey, m.Attempts = runAt, "dk-"+k, 1
		ms = append(ms, m)
	}
	if _, err := d.Enqueue(ctx, q, ms); err != nil {
		t.Fatal(err)
	}
	ds := receiveDelayed(t, d, q, 10, time.Second)
	if len(ds) != 3 {
		t.Fatalf("ReceiveDelayed took %d, want 3", len(ds))
	}
	by := map[string]backend.Delivery{}
	for _, x := range ds {
		if x.Attempt != 2 || x.RunAt.Sub(runAt).Abs() > time.Millisecond || x.DedupKey != "dk-"+x.Kind {
			t.Errorf("early delivery %s: attempt %d run-at %v dedup %q", x.Kind, x.Attempt, x.RunAt, x.DedupKey)
		}
		by[x.Kind] = x
	}
	if more := receiveDelayed(t, d, q, 10, time.Second); len(more) != 0 {
		t.Errorf("a second ReceiveDelayed took %d held messages", len(more))
	}
	for _, x := range ds {
		if _, err := d.Extend(ctx, ref(q, x), time.Minute); err != nil {
			t.Fatalf("Extend of an early delivery: %v", err)
		}
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil || st.Leased != 3 || st.Delayed != 0 || st.Ready != 0 {
		t.Errorf("stats with 3 early leases: %+v, %v", st, err)
	}
	// The extended leases outlive the original 1 s one.
	receiveNone(t, c, q, 1500*time.Millisecond)

	// Released (a relay that could not move it), it waits for its run-at
	// again: only ReceiveDelayed sees it.
	if err := d.Retry(ctx, ref(q, by["retry"]), 0, "moved back"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	receiveNone(t, c, q, 300*time.Millisecond)
	again := receiveDelayed(t, d, q, 10, time.Minute)
	if len(again) != 1 || again[0].ID != by["retry"].ID || again[0].Attempt != 3 || again[0].LastError != "moved back" ||
		again[0].RunAt.Sub(runAt).Abs() > time.Millisecond {
		t.Fatalf("after Retry(0) of an early delivery ReceiveDelayed got %+v", again)
	}
	if errs, err := d.Ack(ctx, []backend.Ref{ref(q, again[0])}); err != nil || errs[0] != nil {
		t.Fatalf("Ack: %v %v", errs, err)
	}
	errs, err := d.Ack(ctx, []backend.Ref{ref(q, by["ack"]), ref(q, by["ack"])})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], backend.ErrLeaseLost) {
		t.Fatalf("Ack of an early delivery, twice: %v %v", errs, err)
	}
	if err := d.Dead(ctx, ref(q, by["dead"]), "gone", by["dead"].Attempt); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	if err := d.Retry(ctx, ref(q, by["dead"]), 0, ""); !errors.Is(err, backend.ErrLeaseLost) {
		t.Errorf("Retry after Dead: %v, want ErrLeaseLost", err)
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != by["dead"].ID || page.Letters[0].Attempts != 2 || page.Letters[0].Reason != "gone" {
		t.Fatalf("dead letters %+v, %v", page.Letters, err)
	}
	keys := redis.QueueKeys(e.prefix, q)
	if n, _ := e.raw.HLen(ctx, keys[redis.KeyPayloads]).Result(); n != 0 {
		t.Errorf("%d payloads left after settling every early delivery", n)
	}
	if n, _ := e.raw.HLen(ctx, keys[redis.KeyDedup]).Result(); n != 0 {
		t.Errorf("%d dedup keys left after settling every early delivery", n)
	}
	if n, _ := e.raw.HLen(ctx, keys[redis.KeyLeases]).Result(); n != 1 { // the padding member
		t.Errorf("%d lease records left, want only the padding", n)
	}
}

// An early lease that expires after the message's run-at has passed makes
// the message ready at once, with the attempt counted; one whose run-at is
// still ahead is delayed again.
func TestEarlyLeaseExpiringAfterRunAt(t *testing.T) { bothPaths(t, testEarlyLeaseExpiringAfterRunAt) }

func testEarlyLeaseExpiringAfterRunAt(t *testing.T, e *env) {
	const q = "early-late"
	d := e.driver(t, redis.Options{})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	m, later := msg(t, "soon"), msg(t, "later")
	m.RunAt, later.RunAt = time.Now().Add(300*time.Millisecond), time.Now().Add(time.Hour)
	if _, err := d.Enqueue(testCtx(t), q, []backend.Message{m, later}); err != nil {
		t.Fatal(err)
	}
	if ds := receiveDelayed(t, d, q, 2, 600*time.Millisecond); len(ds) != 2 {
		t.Fatalf("ReceiveDelayed took %d", len(ds))
	}
	// Wait out the leases (no Receive runs meanwhile): Stats counts the
	// expired early leases by their run-at.
	time.Sleep(time.Until(m.RunAt.Add(400 * time.Millisecond)))
	if st, err := c.QueueStats(testCtx(t), q); err != nil || st.Ready != 1 || st.Leased != 0 || st.Delayed != 1 {
		t.Errorf("stats after the early lease and the run-at passed: %+v, %v", st, err)
	}
	got := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if got[0].ID != m.ID || got[0].Attempt != 2 {
		t.Errorf("after the early lease expired got %s attempt %d, want %s attempt 2", got[0].ID, got[0].Attempt, m.ID)
	}
}

// Carried attempts survive the delayed set.
func TestCarriedAttemptsThroughDelayedSet(t *testing.T) {
	bothPaths(t, testCarriedAttemptsThroughDelayedSet)
}

func testCarriedAttemptsThroughDelayedSet(t *testing.T, e *env) {
	const q = "carried"
	d := e.driver(t, redis.Options{})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	m := msg(t, "later")
	m.Delay, m.Attempts = 50*time.Millisecond, 4
	if _, err := d.Enqueue(testCtx(t), q, []backend.Message{m}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if got[0].Attempt != 5 {
		t.Errorf("attempt %d, want 5", got[0].Attempt)
	}
}

// Imported dead letters are purged, replayed, counted and capped like the
// queue's own, and an id whose letter was purged can be imported again.
func TestDeadImportWithNativeLetters(t *testing.T) { bothPaths(t, testDeadImportWithNativeLetters) }

func testDeadImportWithNativeLetters(t *testing.T, e *env) {
	const q = "import"
	d := e.driver(t, redis.Options{DeadCap: 4})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	enqueue(t, c, q, fila.Message{Kind: "native"})
	ds := receive(t, c, q, fila.ReceiveParams{Lease: time.Minute})
	if err := ds[0].Dead(ctx, "native"); err != nil {
		t.Fatal(err)
	}
	var ls []backend.DeadLetter
	for _, k := range []string{"a", "a", "b"} {
		ls = append(ls, backend.DeadLetter{Message: msg(t, k), Attempts: 3, Reason: "r", DeadAt: time.Now().Add(-time.Minute)})
	}
	ls[0].DedupKey = "dk"
	// Importing its own letter back changes nothing either.
	native := backend.DeadLetter{Message: backend.Message{ID: ds[0].ID, Kind: "native", Body: []byte{}}, Reason: "copy"}
	if err := d.DeadImport(ctx, q, append(ls, native)); err != nil {
		t.Fatal(err)
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil || st.Dead != 4 || st.DeadByKind["a"] != 2 || st.DeadByKind["b"] != 1 || st.DeadByKind["native"] != 1 {
		t.Fatalf("stats after import: %+v, %v", st, err)
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil || len(page.Letters) != 4 || page.Letters[0].ID != ds[0].ID || page.Letters[1].DedupKey != "dk" || page.Letters[1].Attempts != 3 {
		t.Fatalf("DeadList: %+v, %v", page.Letters, err)
	}
	if n, err := d.DeadPurge(ctx, q, backend.DeadFilter{Kind: "b"}); err != nil || n != 1 {
		t.Fatalf("DeadPurge kind b = %d, %v", n, err)
	}
	// The purged one imports again; one more trims the oldest (the native one).
	extra := backend.DeadLetter{Message: msg(t, "c"), Reason: "r"}
	if err := d.DeadImport(ctx, q, []backend.DeadLetter{ls[2], extra}); err != nil {
		t.Fatal(err)
	}
	st, err = c.QueueStats(ctx, q)
	if err != nil || st.Dead != 4 || st.DeadByKind["native"] != 0 || st.DeadByKind["b"] != 1 || st.DeadByKind["c"] != 1 {
		t.Fatalf("stats after the cap trimmed: %+v, %v", st, err)
	}
	if n, _ := e.raw.HLen(ctx, redis.QueueKeys(e.prefix, q)[redis.KeyDeadIDs]).Result(); n != 4 {
		t.Errorf("dead-letter id index has %d entries for 4 letters", n)
	}
	if n, err := d.DeadReplay(ctx, q, backend.DeadFilter{Kind: "a"}); err != nil || n != 2 {
		t.Fatalf("DeadReplay kind a = %d, %v", n, err)
	}
	got := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if len(got) != 2 || got[0].Attempt != 1 || got[0].DedupKey != "" {
		t.Errorf("replayed imports: %d, first %+v", len(got), got[0])
	}
	if n, err := d.DeadPurge(ctx, q, backend.DeadFilter{}); err != nil || n != 2 {
		t.Fatalf("DeadPurge all = %d, %v", n, err)
	}
	if n, _ := e.raw.Exists(ctx, redis.QueueKeys(e.prefix, q)[redis.KeyDeadIDs]).Result(); n != 0 {
		t.Errorf("the id index survived a full purge")
	}
}

// Errors a retry may cure wrap backend.ErrUnavailable.
func TestUnreachableIsUnavailable(t *testing.T) {
	rc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	d, err := redis.New(rc, redis.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Ping of a closed port: %v, want ErrUnavailable", err)
	}
	if _, err := d.Enqueue(ctx, "q", []backend.Message{msg(t, "x")}); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Enqueue to a closed port: %v, want ErrUnavailable", err)
	}
}
