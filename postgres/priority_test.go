package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// levelMsg is a message of level p whose kind names the level.
func levelMsg(p int) backend.Message {
	m := msg(uuidString(), fmt.Sprintf("level.%d", p))
	m.Priority = p
	return m
}

// TestPriorityEveryPath: in the skip-locked mode every way into the
// messages table stores the level (one message or a batch, with or without
// dedup keys, in the caller's transaction, EnqueueMulti of one queue or
// several, dead letters imported and replayed), a claim returns the levels
// highest first, ReceiveDelayed returns a delayed message's level, and a
// dead letter keeps its level in DeadList and through its replay.
func TestPriorityEveryPath(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	if !d.Priorities() {
		t.Fatal("the skip-locked mode's Priorities() = false")
	}
	ctx := ctxT(t, 60*time.Second)
	q := "levels-" + randHex(4)
	want := map[string]int{} // id -> level
	note := func(ms ...backend.Message) {
		for _, m := range ms {
			want[m.ID] = m.Priority
		}
	}
	enqueue := func(what string, ms ...backend.Message) {
		t.Helper()
		if _, err := d.Enqueue(ctx, q, ms); err != nil {
			t.Fatalf("Enqueue (%s): %v", what, err)
		}
		note(ms...)
	}
	enqueue("one", levelMsg(1))
	keyed := levelMsg(2)
	keyed.DedupKey = "k1"
	enqueue("one with a dedup key", keyed)
	enqueue("a batch", levelMsg(0), levelMsg(3), levelMsg(2), levelMsg(0))
	k1, k2 := levelMsg(3), levelMsg(1)
	k1.DedupKey, k2.DedupKey = "k2", "k3"
	enqueue("a batch with dedup keys", k1, k2, levelMsg(2))

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx := []backend.Message{levelMsg(3), levelMsg(1)}
	if _, err := d.EnqueueTx(ctx, tx, q, inTx); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	multiOne, multiMany := levelMsg(2), []backend.Message{levelMsg(1), levelMsg(3)}
	if err := d.EnqueueMultiTx(ctx, tx, []backend.QueueBatch{{Queue: q, Msgs: []backend.Message{multiOne}}}); err != nil {
		t.Fatalf("EnqueueMultiTx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	note(inTx...)
	note(multiOne)
	if err := d.EnqueueMulti(ctx, []backend.QueueBatch{{Queue: q, Msgs: multiMany}}); err != nil {
		t.Fatalf("EnqueueMulti: %v", err)
	}
	note(multiMany...)

	stored := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT id::text, priority FROM `+schema+`.messages WHERE queue = $1`, q)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var p int16
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		stored[id] = int(p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, p := range want {
		if got, ok := stored[id]; !ok || got != p {
			t.Errorf("message %s stored at level %d (found %v), want %d", id, got, ok, p)
		}
	}

	// One receive of them all: highest level first, each with its level.
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 100, Lease: time.Minute})
	if err != nil || len(ds) != len(want) {
		t.Fatalf("Receive: %d deliveries, %v; want %d", len(ds), err, len(want))
	}
	if !slices.IsSortedFunc(ds, func(a, b backend.Delivery) int { return b.Priority - a.Priority }) {
		t.Errorf("a claim's deliveries are not highest level first: %v", levelsOf(ds))
	}
	for _, dl := range ds {
		if dl.Priority != want[dl.ID] || dl.Kind != fmt.Sprintf("level.%d", dl.Priority) {
			t.Errorf("delivery %s of kind %s has level %d, want %d", dl.ID, dl.Kind, dl.Priority, want[dl.ID])
		}
	}

	// Dead, listed, replayed: the level stays.
	var hi backend.Delivery
	for _, dl := range ds {
		if dl.Priority == 3 {
			hi = dl
			break
		}
	}
	if err := d.Dead(ctx, backend.Ref{Queue: q, ID: hi.ID, Receipt: hi.Receipt}, "dead", hi.Attempt); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	// Imported dead letters keep theirs.
	imported := []backend.DeadLetter{
		{Message: levelMsg(2), Attempts: 1, Reason: "imported"},
		{Message: levelMsg(0), Attempts: 1, Reason: "imported"},
	}
	if err := d.DeadImport(ctx, q, imported); err != nil {
		t.Fatalf("DeadImport: %v", err)
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 10})
	if err != nil || len(page.Letters) != 3 {
		t.Fatalf("DeadList: %d letters, %v; want 3", len(page.Letters), err)
	}
	wantDead := map[string]int{hi.ID: 3, imported[0].ID: 2, imported[1].ID: 0}
	for _, l := range page.Letters {
		if l.Priority != wantDead[l.ID] {
			t.Errorf("dead letter %s (%s) listed at level %d, want %d", l.ID, l.Reason, l.Priority, wantDead[l.ID])
		}
	}
	if _, err := d.Ack(ctx, refsOf(ds)); err != nil {
		t.Fatal(err)
	}
	if n, err := d.DeadReplay(ctx, q, backend.DeadFilter{}); err != nil || n != 3 {
		t.Fatalf("DeadReplay = %d, %v; want 3", n, err)
	}
	ds, err = d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 3 {
		t.Fatalf("Receive of the replayed: %d, %v; want 3", len(ds), err)
	}
	if got := levelsOf(ds); !slices.Equal(got, []int{3, 2, 0}) {
		t.Errorf("replayed dead letters came back at levels %v, want [3 2 0]", got)
	}
	for _, dl := range ds {
		if dl.Priority != wantDead[dl.ID] {
			t.Errorf("replayed %s at level %d, want %d", dl.ID, dl.Priority, wantDead[dl.ID])
		}
	}

	// A delayed message taken early comes with its level.
	late := levelMsg(2)
	late.Delay = time.Hour
	enqueue("a delayed one", late)
	ds, err = d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != late.ID || ds[0].Priority != 2 {
		t.Fatalf("ReceiveDelayed = %+v, %v; want %s at level 2", ds, err, late.ID)
	}
}

// TestPriorityCompetingReceivers: receivers competing for a queue of mixed
// levels, each taking up to a different Max, get every message exactly
// once, and each claim's deliveries come highest level first.
func TestPriorityCompetingReceivers(t *testing.T) {
	checkCompetingLevels(t, postgres.ModeSkipLocked, 250, 6)
}

// checkCompetingLevels enqueues perLevel messages of each level and has
// receivers drivers of mode take them at once, each up to a different Max:
// every message is delivered once, and each claim's deliveries come
// highest level first.
func checkCompetingLevels(t *testing.T, mode string, perLevel, receivers int) {
	t.Helper()
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx := ctxT(t, 120*time.Second)
	q := "compete-" + randHex(4)
	var all []backend.Message
	for p := 0; p <= backend.MaxPriority; p++ {
		for range perLevel {
			all = append(all, levelMsg(p))
		}
	}
	producer := newDriver(t, pool, postgres.Options{Schema: schema, Mode: mode})
	for i := 0; i < len(all); i += 100 {
		if _, err := producer.Enqueue(ctx, q, all[i:min(i+100, len(all))]); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		errs []error
		wg   sync.WaitGroup
	)
	for r := range receivers {
		d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: mode})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) == len(all)
				mu.Unlock()
				if done {
					return
				}
				short, cancel := context.WithTimeout(ctx, time.Second)
				ds, err := d.Receive(short, q, backend.ReceiveParams{Max: 1 + r*7, Lease: time.Minute})
				cancel()
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					continue
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if !slices.IsSortedFunc(ds, func(a, b backend.Delivery) int { return b.Priority - a.Priority }) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("a claim's deliveries are not highest level first: %v", levelsOf(ds)))
					mu.Unlock()
				}
				mu.Lock()
				for _, dl := range ds {
					seen[dl.ID]++
				}
				mu.Unlock()
				if _, err := d.Ack(ctx, refsOf(ds)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if seen[m.ID] != 1 {
			t.Errorf("message %s of level %d delivered %d times, want once", m.ID, m.Priority, seen[m.ID])
		}
	}
}

// TestPriorityUpgrade: messages and dead letters stored before schema
// version 17 are of level 0 after it, and messages_claim is rebuilt with
// the level.
func TestPriorityUpgrade(t *testing.T) {
	pool := testPool(t)
	schema := freshSchema(t, pool)
	ctx := ctxT(t, 60*time.Second)
	if err := postgres.MigrateTo(ctx, pool, schema, 16); err != nil {
		t.Fatal(err)
	}
	id, deadID := uuidString(), uuidString()
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.messages (id, queue, kind, body, enqueued_at, visible_at)
		VALUES ($1, 'old', 'k', '', now(), now())`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.dead (id, queue, kind, body, enqueued_at, attempts, max_attempts, reason)
		VALUES ($1, 'old', 'k', '', now(), 1, 1, 'r')`, deadID); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool, schema); err != nil {
		t.Fatalf("Migrate from 16: %v", err)
	}
	var def string
	if err := pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'messages_claim'`,
		schema).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := "(queue, priority DESC, visible_at, id)"; !strings.Contains(def, want) {
		t.Errorf("messages_claim is %s, want the columns %s", def, want)
	}
	d := newDriver(t, pool, postgres.Options{Schema: schema})
	ds, err := d.Receive(ctx, "old", backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].Priority != 0 {
		t.Fatalf("Receive of a message stored at version 16: %+v, %v", ds, err)
	}
	page, err := d.DeadList(ctx, "old", backend.DeadListParams{Limit: 10})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != deadID || page.Letters[0].Priority != 0 {
		t.Fatalf("DeadList of a letter stored at version 16: %+v, %v", page.Letters, err)
	}
}

// levelsOf returns the levels of ds in order.
func levelsOf(ds []backend.Delivery) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = d.Priority
	}
	return out
}
