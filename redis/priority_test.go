package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/redis"
)

// levelKeys returns the queue's level streams that exist.
func levelKeys(t *testing.T, e *env, q string) []string {
	t.Helper()
	ks := redis.QueueKeys(e.prefix, q)
	var out []string
	for _, k := range []string{ks[redis.KeyStream1], ks[redis.KeyStream2], ks[redis.KeyStream3]} {
		if n, err := e.raw.Exists(testCtx(t), k).Result(); err != nil {
			t.Fatal(err)
		} else if n == 1 {
			out = append(out, k)
		}
	}
	return out
}

func enqueueLevels(t *testing.T, c *fila.Client, q string, p, n int) []string {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: fmt.Sprintf("level.%d", p), Priority: p}
	}
	ids, err := c.EnqueueBatch(testCtx(t), q, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A queue that never uses a level above 0 has no key of one, whatever
// happens to its messages (plain, delayed, dedup-keyed, retried, dead,
// replayed, expired), and a queue whose levels were drained loses their
// streams at its next claim.
func TestLevelZeroQueueHasNoLevelKeys(t *testing.T) { bothPaths(t, testLevelZeroQueueHasNoLevelKeys) }

func testLevelZeroQueueHasNoLevelKeys(t *testing.T, e *env) {
	const q = "level0"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	enqueueLevels(t, c, q, 0, 20)
	enqueue(t, c, q, fila.Message{Kind: "delayed", Delay: 50 * time.Millisecond})
	enqueue(t, c, q, fila.Message{Kind: "dedup", DedupKey: "k"})
	ds := receive(t, c, q, fila.ReceiveParams{Max: 15, Lease: 50 * time.Millisecond})
	if err := ds[0].Retry(ctx, 0, "again"); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Dead(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the others' leases expire
	if _, err := c.DeadReplay(ctx, q, fila.DeadFilter{}); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 22; {
		ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
		for _, d := range ds {
			if d.Priority != 0 {
				t.Errorf("%s delivered at level %d", d.Kind, d.Priority)
			}
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
		n += len(ds)
	}
	if _, err := c.QueueStats(ctx, q); err != nil {
		t.Fatal(err)
	}
	if ks := levelKeys(t, e, q); len(ks) > 0 {
		t.Errorf("a queue without levels has level keys %v", ks)
	}

	// Levels used, then drained: the claim that finds them empty deletes
	// them.
	enqueueLevels(t, c, q, 2, 3)
	enqueueLevels(t, c, q, 3, 1)
	if ks := levelKeys(t, e, q); len(ks) != 2 {
		t.Errorf("level keys after enqueues of levels 2 and 3: %v", ks)
	}
	ds = receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if len(ds) != 4 || ds[0].Priority != 3 {
		t.Fatalf("got %d deliveries, the first of level %d; want 4, level 3 first", len(ds), ds[0].Priority)
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
	receiveNone(t, c, q, 200*time.Millisecond)
	if ks := levelKeys(t, e, q); len(ks) > 0 {
		t.Errorf("drained level streams %v were not deleted", ks)
	}
	names, err := c.QueueList(ctx)
	if err != nil || len(names) != 1 || names[0] != q {
		t.Errorf("QueueList = %v, %v; want [%s]", names, err, q)
	}

	// QueueDelete deletes the level streams.
	enqueueLevels(t, c, q, 1, 2)
	if err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatal(err)
	}
	if ks := levelKeys(t, e, q); len(ks) > 0 {
		t.Errorf("QueueDelete left %v", ks)
	}
}

// A queue holding messages of level 1 only (a plain enqueue makes no level
// 0 stream) is listed, counted and received.
func TestOnlyHigherLevels(t *testing.T) { bothPaths(t, testOnlyHigherLevels) }

func testOnlyHigherLevels(t *testing.T, e *env) {
	const q = "only1"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	enqueueLevels(t, c, q, 1, 3)
	names, err := c.QueueList(ctx)
	if err != nil || len(names) != 1 || names[0] != q {
		t.Errorf("QueueList = %v, %v; want [%s]", names, err, q)
	}
	if st, err := c.QueueStats(ctx, q); err != nil || st.Ready != 3 {
		t.Errorf("QueueStats = %+v, %v; want 3 ready", st, err)
	}
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if len(ds) != 3 {
		t.Fatalf("%d deliveries", len(ds))
	}
	if st, err := c.QueueStats(ctx, q); err != nil || st.Ready != 0 || st.Leased != 3 {
		t.Errorf("QueueStats = %+v, %v; want 3 leased", st, err)
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
}

// ReadyByPriority counts a due delayed message at its level, before a
// Receive moved it to its level's stream.
func TestReadyByPriorityDelayed(t *testing.T) { bothPaths(t, testReadyByPriorityDelayed) }

func testReadyByPriorityDelayed(t *testing.T, e *env) {
	const q = "delayedlevels"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	enqueueLevels(t, c, q, 1, 2)
	at := time.Now()
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "late", Priority: 2, Delay: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.QueueStats(ctx, q); err != nil || st.Delayed != 1 || !slices.Equal(st.ReadyByPriority, []int64{0, 2, 0, 0}) {
		t.Errorf("QueueStats before the run-at = %+v, %v; want 1 delayed, ReadyByPriority [0 2 0 0]", st, err)
	}
	// Polled until the message is due (counted ready), then its level.
	var st fila.Stats
	for {
		var err error
		if st, err = c.QueueStats(ctx, q); err != nil {
			t.Fatal(err)
		}
		if st.Delayed == 0 || time.Since(at) > 10*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Ready != 3 || !slices.Equal(st.ReadyByPriority, []int64{0, 2, 1, 0}) {
		t.Errorf("QueueStats after the run-at = %+v; want 3 ready, ReadyByPriority [0 2 1 0]", st)
	}
}

// Expired leases keep their level, and redelivery prefers the higher
// levels: an expired lease of level 1 comes before ready and expired
// messages of level 0, even when the lease of level 0 expired first, and a
// new message of level 3 before both.
func TestLevelsAcrossLeaseExpiry(t *testing.T) { bothPaths(t, testLevelsAcrossLeaseExpiry) }

func testLevelsAcrossLeaseExpiry(t *testing.T, e *env) {
	const q = "expiry"
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	lows := enqueueLevels(t, c, q, 0, 3)
	// level 0 leased first, with the shorter lease
	d0 := receive(t, c, q, fila.ReceiveParams{Max: 1, Lease: 50 * time.Millisecond})[0]
	if d0.ID != lows[0] {
		t.Fatalf("got %s, want the first level 0 message", d0.ID)
	}
	hi := enqueueLevels(t, c, q, 1, 1)[0]
	d1 := receive(t, c, q, fila.ReceiveParams{Max: 1, Lease: 150 * time.Millisecond})[0]
	if d1.ID != hi || d1.Priority != 1 {
		t.Fatalf("got %s at level %d, want the level 1 message", d1.ID, d1.Priority)
	}
	time.Sleep(250 * time.Millisecond)
	if st, err := c.QueueStats(ctx, q); err != nil || !slices.Equal(st.ReadyByPriority, []int64{3, 1, 0, 0}) {
		t.Errorf("QueueStats after both leases expired = %+v, %v; want ReadyByPriority [3 1 0 0]", st, err)
	}
	again := receive(t, c, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})[0]
	if again.ID != hi || again.Priority != 1 || again.Attempt != 2 {
		t.Fatalf("after both leases expired got %s at level %d attempt %d; want the level 1 message at attempt 2", again.ID, again.Priority, again.Attempt)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// the level 0 lease expired too; a new level 3 message comes first
	top := enqueueLevels(t, c, q, 3, 1)[0]
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if len(ds) != 4 || ds[0].ID != top {
		t.Fatalf("got %v, want 4 with the level 3 message first", ids(ds))
	}
	for _, d := range ds[1:] {
		if d.Priority != 0 || (d.ID == lows[0]) != (d.Attempt == 2) {
			t.Errorf("%s: level %d attempt %d", d.ID, d.Priority, d.Attempt)
		}
	}
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatal(err)
	}
}

// A driver whose fast path does not know that another client put a
// message of a higher level in the queue still hands that message first:
// its claim gives back what it read of level 0, which keeps its attempts.
// The same through AckReceive.
func TestFastPathGivesBackForLevels(t *testing.T) {
	e := newEnv(t)
	e.fast = true
	for _, viaAckReceive := range []bool{false, true} {
		t.Run(fmt.Sprintf("AckReceive=%v", viaAckReceive), func(t *testing.T) {
			q := fmt.Sprintf("giveback-%v", viaAckReceive)
			a := e.client(t, redis.Options{})
			b := e.client(t, redis.Options{})
			ctx := testCtx(t)
			lows := enqueueLevels(t, a, q, 0, 4)
			first := receive(t, a, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
			hi := enqueueLevels(t, b, q, 2, 1)[0]
			var got []*fila.Delivery
			if viaAckReceive {
				var ackErr, err error
				got, ackErr, err = a.AckReceive(ctx, first, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
				if err != nil || ackErr != nil {
					t.Fatal(err, ackErr)
				}
			} else {
				if err := first[0].Ack(ctx); err != nil {
					t.Fatal(err)
				}
				got = receive(t, a, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
			}
			if len(got) != 1 || got[0].ID != hi || got[0].Priority != 2 {
				t.Fatalf("after another client's level 2 enqueue got %v; want %s", ids(got), hi)
			}
			if st, err := a.QueueStats(ctx, q); err != nil || st.Ready != 3 || st.Leased != 1 {
				t.Errorf("QueueStats = %+v, %v; want 3 ready, 1 leased", st, err)
			}
			rest := receive(t, a, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
			if len(rest) != 3 {
				t.Fatalf("got %d of the 3 level 0 messages left", len(rest))
			}
			for i, d := range rest {
				if d.ID != lows[i+1] || d.Attempt != 1 {
					t.Errorf("level 0 message %d: %s attempt %d; want %s attempt 1", i, d.ID, d.Attempt, lows[i+1])
				}
			}
			if err := a.AckBatch(ctx, append(rest, got...)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A Receive blocked on an empty queue wakes for a message of a level
// above 0 (a stream that did not exist when it began to wait) at once, not
// at the end of its block.
func TestLevelWakesBlockedReceive(t *testing.T) { bothPaths(t, testLevelWakesBlockedReceive) }

func testLevelWakesBlockedReceive(t *testing.T, e *env) {
	const q = "wake"
	a := e.client(t, redis.Options{Block: 30 * time.Second})
	b := e.client(t, redis.Options{})
	enqueue(t, a, q, fila.Message{Kind: "first"})
	if err := a.AckBatch(testCtx(t), receive(t, a, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ds  []*fila.Delivery
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		ds, err := a.Receive(testCtx(t), q, fila.ReceiveParams{Max: 5, Lease: time.Minute})
		done <- result{ds, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	id := enqueueLevels(t, b, q, 3, 1)[0]
	select {
	case r := <-done:
		if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != id || r.ds[0].Priority != 3 {
			t.Fatalf("blocked Receive = %v, %v", ids(r.ds), r.err)
		}
		if el := r.at.Sub(sent); el > 5*time.Second {
			t.Errorf("the blocked Receive woke %v after the enqueue", el)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a level 3 enqueue did not wake a Receive blocked for 30 s")
	}
}

// Entries of different levels' streams may have the same stream id (one
// script adds both in the same millisecond): their dedup keys and Extend's
// leases stay apart.
func TestLevelsWithEqualStreamIDs(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t, redis.Options{})
	ctx := testCtx(t)
	const q = "sameid"
	now := time.Now()
	msgs := []backend.Message{
		{ID: "00000000-0000-7000-8000-000000000001", Kind: "low", DedupKey: "a", EnqueuedAt: now},
		{ID: "00000000-0000-7000-8000-000000000002", Kind: "high", DedupKey: "b", Priority: 1, EnqueuedAt: now},
	}
	if _, err := d.Enqueue(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 2, Lease: time.Minute})
	if err != nil || len(ds) != 2 {
		t.Fatalf("Receive = %d, %v", len(ds), err)
	}
	hi, lo := ds[0], ds[1]
	if hi.Priority != 1 || lo.Priority != 0 {
		t.Fatalf("levels %d, %d; want 1 then 0", hi.Priority, lo.Priority)
	}
	hs, _, _ := strings.Cut(hi.Receipt, "/")
	ls, _, _ := strings.Cut(lo.Receipt, "/")
	if !strings.HasPrefix(hs, "1:") {
		t.Fatalf("receipt %s of a level 1 delivery", hi.Receipt)
	}
	if hs[2:] != ls {
		t.Logf("stream ids %s and %s differ: the test checks less", hs, ls)
	}
	// Extend each: one short, one long; the short one expires alone.
	if _, err := d.Extend(ctx, backend.Ref{Queue: q, ID: hi.ID, Receipt: hi.Receipt}, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Extend(ctx, backend.Ref{Queue: q, ID: lo.ID, Receipt: lo.Receipt}, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	again, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 2, Lease: time.Minute})
	if err != nil || len(again) != 1 || again[0].ID != hi.ID || again[0].Attempt != 2 {
		t.Fatalf("after the short lease expired: %+v, %v; want the level 1 message again", again, err)
	}
	errs, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: lo.ID, Receipt: lo.Receipt}, {Queue: q, ID: hi.ID, Receipt: hi.Receipt}})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], backend.ErrLeaseLost) {
		t.Fatalf("Ack of the long lease and the expired one = %v, %v", errs, err)
	}
	// The low message's dedup key was freed; the high one's is still held.
	res, err := d.Enqueue(ctx, q, []backend.Message{
		{ID: "00000000-0000-7000-8000-000000000003", Kind: "low", DedupKey: "a", EnqueuedAt: now},
		{ID: "00000000-0000-7000-8000-000000000004", Kind: "high", DedupKey: "b", Priority: 1, EnqueuedAt: now},
	})
	if err != nil || res[0].Duplicate || !res[1].Duplicate || res[1].ID != hi.ID {
		t.Fatalf("enqueue again = %+v, %v; want a stored, b held by %s", res, err, hi.ID)
	}
	if errs, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: hi.ID, Receipt: again[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatalf("Ack = %v, %v", errs, err)
	}
	if res, err := d.Enqueue(ctx, q, []backend.Message{{ID: "00000000-0000-7000-8000-000000000005", Kind: "high", DedupKey: "b", Priority: 1, EnqueuedAt: now}}); err != nil || res[0].Duplicate {
		t.Fatalf("enqueue once b was acked = %+v, %v", res, err)
	}
}

// A message published to a topic is copied into its subscription's stream
// of its level: a receive takes it before the older copies of level 0
// (those the same copy brought: a copy reads the log in publish order, as
// far ahead as its size allows).
func TestTopicCopyKeepsLevel(t *testing.T) {
	e := newEnv(t)
	c := e.client(t, redis.Options{})
	ctx := testCtx(t)
	const topic, q = "levels", "levels-sub"
	if err := c.TopicSubscribe(ctx, topic, q); err != nil {
		t.Fatal(err)
	}
	// a first copy, so the next ones know the events' size
	if _, err := c.Publish(ctx, topic, fila.Message{Kind: "warm"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AckBatch(ctx, receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})); err != nil {
		t.Fatal(err)
	}
	msgs := []fila.Message{{Kind: "a"}, {Kind: "b"}, {Kind: "c"}, {Kind: "top", Priority: 3}, {Kind: "d"}}
	if _, err := c.PublishBatch(ctx, topic, msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, fila.Message{Kind: "later", Priority: 2, Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	var kinds []string
	for len(kinds) < 6 {
		ds := receive(t, c, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		for _, d := range ds {
			kinds = append(kinds, fmt.Sprintf("%s/%d", d.Kind, d.Priority))
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, "top/3 later/2 ") {
		t.Errorf("received %s; want top/3 then later/2 first", got)
	}
}

// Concurrent receivers of a queue with every level get each message once,
// and each receiver's deliveries come highest level first.
func TestLevelsConcurrentReceivers(t *testing.T) { bothPaths(t, testLevelsConcurrentReceivers) }

func testLevelsConcurrentReceivers(t *testing.T, e *env) {
	const q = "concurrent"
	prod := e.client(t, redis.Options{})
	const per = 50
	for p := 0; p <= fila.MaxPriority; p++ {
		enqueueLevels(t, prod, q, p, per)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type got struct {
		id    string
		level int
	}
	out := make(chan []got, 4)
	for range 4 {
		c := e.client(t, redis.Options{})
		go func() {
			var mine []got
			defer func() { out <- mine }()
			for {
				rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 7, Lease: time.Minute})
				rcancel()
				if err != nil {
					return
				}
				last := fila.MaxPriority
				for _, d := range ds {
					if d.Priority > last {
						t.Errorf("a batch holds level %d after level %d", d.Priority, last)
					}
					last = d.Priority
					mine = append(mine, got{d.ID, d.Priority})
				}
				if err := c.AckBatch(ctx, ds); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	for range 4 {
		for _, g := range <-out {
			if seen[g.id] {
				t.Errorf("%s delivered twice", g.id)
			}
			seen[g.id] = true
		}
	}
	if len(seen) != per*(fila.MaxPriority+1) {
		t.Errorf("%d messages delivered, want %d", len(seen), per*(fila.MaxPriority+1))
	}
}

// Moving queues keeps levels: a delayed message taken early by
// ReceiveDelayed reports its level and, its lease expired after its run-at,
// goes to its level's stream; an imported dead letter keeps its level
// through DeadList and DeadReplay.
func TestLevelsMoveQueues(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t, redis.Options{})
	ctx := testCtx(t)
	const q = "move"
	now := time.Now()
	if _, err := d.Enqueue(ctx, q, []backend.Message{
		{ID: "00000000-0000-7000-8000-000000000001", Kind: "low", EnqueuedAt: now},
		{ID: "00000000-0000-7000-8000-000000000002", Kind: "delayed", Priority: 2, Delay: 100 * time.Millisecond, EnqueuedAt: now},
	}); err != nil {
		t.Fatal(err)
	}
	early, err := d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: 200 * time.Millisecond})
	if err != nil || len(early) != 1 || early[0].Priority != 2 {
		t.Fatalf("ReceiveDelayed = %+v, %v; want the level 2 message", early, err)
	}
	time.Sleep(300 * time.Millisecond) // run-at and lease both passed
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != early[0].ID || ds[0].Priority != 2 || ds[0].Attempt != 2 {
		t.Fatalf("after the early lease expired: %+v, %v; want the level 2 message at attempt 2", ds, err)
	}
	if errs, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}

	letter := backend.DeadLetter{Message: backend.Message{ID: "00000000-0000-7000-8000-000000000003", Kind: "imported", Priority: 3, EnqueuedAt: now}, Queue: q, Reason: "elsewhere", Attempts: 4}
	if err := d.DeadImport(ctx, q, []backend.DeadLetter{letter}); err != nil {
		t.Fatal(err)
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].Priority != 3 {
		t.Fatalf("DeadList = %+v, %v; want the letter at level 3", page.Letters, err)
	}
	if n, err := d.DeadReplay(ctx, q, backend.DeadFilter{}); err != nil || n != 1 {
		t.Fatalf("DeadReplay = %d, %v", n, err)
	}
	ds, err = d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != letter.ID || ds[0].Priority != 3 || ds[0].Attempt != 1 {
		t.Fatalf("after the replay: %+v, %v; want the imported message at level 3, attempt 1", ds, err)
	}
}

// The sweep covers the level streams: entries of level 2 read by a foreign
// consumer (no lease) are handed out once it is idle past OrphanIdle, at
// their level, and one deleted from the stream frees its dedup key.
func TestSweepCoversLevels(t *testing.T) { bothPaths(t, testSweepCoversLevels) }

func testSweepCoversLevels(t *testing.T, e *env) {
	const q = "sweep-levels"
	c := e.client(t, redis.Options{SweepEvery: 10 * time.Millisecond, OrphanIdle: time.Millisecond})
	ctx := testCtx(t)
	stream := redis.QueueKeys(e.prefix, q)[redis.KeyStream2]
	if err := e.raw.XGroupCreateMkStream(ctx, stream, "fila", "0").Err(); err != nil {
		t.Fatal(err)
	}
	keep := enqueue(t, c, q, fila.Message{Kind: "keep", Priority: 2})
	enqueue(t, c, q, fila.Message{Kind: "drop", Priority: 2, DedupKey: "dk"})
	low := enqueue(t, c, q, fila.Message{Kind: "low"})
	read, err := e.raw.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "fila", Consumer: "foreign", Streams: []string{stream, ">"}, Count: 10}).Result()
	if err != nil || len(read[0].Messages) != 2 {
		t.Fatalf("foreign XREADGROUP: %v %v", read, err)
	}
	if err := e.raw.XDel(ctx, stream, read[0].Messages[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past OrphanIdle
	// the first claim's sweep gives the foreign consumer an expired
	// deadline; the level 0 message may come first, the kept one next
	var got []*fila.Delivery
	for len(got) < 2 {
		ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
		got = append(got, ds...)
	}
	byID := map[string]*fila.Delivery{}
	for _, d := range got {
		byID[d.ID] = d
	}
	if d := byID[keep]; len(got) != 2 || d == nil || d.Priority != 2 || d.Attempt != 2 || byID[low] == nil {
		t.Fatalf("got %v; want %s at level 2, attempt 2, and %s", ids(got), keep, low)
	}
	if err := c.AckBatch(ctx, got); err != nil {
		t.Fatal(err)
	}
	// the deleted entry's dedup key is free again
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "again", Priority: 2, DedupKey: "dk"}); err != nil {
		t.Fatal(err)
	}
	ds := receive(t, c, q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if len(ds) != 1 || ds[0].Kind != "again" {
		t.Fatalf("got %v, want the new dk message", ids(ds))
	}
}
