package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestPriorityLogEveryPath: in the log mode (schema version 18) every way
// in stores the level and puts a row of level p above 0 in the stream
// '~p<p>:<queue>' (one message or a batch, with or without dedup keys,
// EnqueueMulti, dead letters imported and replayed); a claim returns the
// levels highest first; a retry, a dead letter and its replay keep the
// level; ReceiveDelayed returns it; the level streams count in QueueStats,
// are no queues of QueueList, and go with QueueDelete; a topic's events
// have no level.
func TestPriorityLogEveryPath(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	if !d.Priorities() {
		t.Fatal("the log mode's Priorities() = false")
	}
	ctx := ctxT(t, 60*time.Second)
	q := "loglevels-" + randHex(4)
	want := map[string]int{}
	enqueue := func(what string, ms ...backend.Message) {
		t.Helper()
		if _, err := d.Enqueue(ctx, q, ms); err != nil {
			t.Fatalf("Enqueue (%s): %v", what, err)
		}
		for _, m := range ms {
			want[m.ID] = m.Priority
		}
	}
	enqueue("one", levelMsg(1))
	keyed := levelMsg(2)
	keyed.DedupKey = "k1"
	enqueue("one with a dedup key", keyed)
	enqueue("a batch", levelMsg(0), levelMsg(3), levelMsg(2), levelMsg(0))
	k1, k2 := levelMsg(3), levelMsg(1)
	k1.DedupKey, k2.DedupKey = "k2", "k3"
	enqueue("a batch with dedup keys", k1, k2, levelMsg(2))
	multi := []backend.Message{levelMsg(1), levelMsg(3)}
	if err := d.EnqueueMulti(ctx, []backend.QueueBatch{{Queue: q, Msgs: multi}}); err != nil {
		t.Fatalf("EnqueueMulti: %v", err)
	}
	for _, m := range multi {
		want[m.ID] = m.Priority
	}

	// Stored in their level's stream, with their level.
	rows, err := pool.Query(ctx, `SELECT id::text, queue, priority FROM `+schema+`.log_messages
WHERE queue IN ($1, '~p1:' || $1, '~p2:' || $1, '~p3:' || $1)`, q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id, stream string
		var p int16
		if err := rows.Scan(&id, &stream, &p); err != nil {
			t.Fatal(err)
		}
		n++
		wantStream := q
		if want[id] > 0 {
			wantStream = fmt.Sprintf("~p%d:%s", want[id], q)
		}
		if int(p) != want[id] || stream != wantStream {
			t.Errorf("message %s of level %d stored in %s at level %d, want %s", id, want[id], stream, p, wantStream)
		}
	}
	if err := rows.Err(); err != nil || n != len(want) {
		t.Fatalf("read %d stored rows (%v), want %d", n, err, len(want))
	}
	st, err := d.QueueStats(ctx, q)
	if err != nil || st.Ready != int64(len(want)) {
		t.Errorf("Stats = %+v, %v; want %d ready", st, err, len(want))
	}
	queues, err := d.QueueList(ctx)
	if err != nil || !slices.Contains(queues, q) {
		t.Errorf("QueueList = %v, %v; want %s in it", queues, err, q)
	}
	for _, name := range queues {
		if name[0] == '~' {
			t.Errorf("QueueList lists the stream %s", name)
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

	// A retry keeps the level, ahead of a level-0 backlog.
	var hi, mid backend.Delivery
	for _, dl := range ds {
		switch {
		case dl.Priority == 3 && hi.ID == "":
			hi = dl
		case dl.Priority == 2 && mid.ID == "":
			mid = dl
		}
	}
	var rest []backend.Ref
	for _, dl := range ds {
		if dl.ID != hi.ID && dl.ID != mid.ID {
			rest = append(rest, backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt})
		}
	}
	if _, err := d.Ack(ctx, rest); err != nil {
		t.Fatal(err)
	}
	enqueue("a level-0 backlog", levelMsg(0), levelMsg(0), levelMsg(0))
	if err := d.Retry(ctx, backend.Ref{Queue: q, ID: mid.ID, Receipt: mid.Receipt}, 0, "again"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	ds, err = d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != mid.ID || ds[0].Priority != 2 || ds[0].Attempt != 2 {
		t.Fatalf("after a retry of level 2: Receive = %+v, %v; want %s at level 2, attempt 2", ds, err, mid.ID)
	}
	if _, err := d.Ack(ctx, refsOf(ds)); err != nil {
		t.Fatal(err)
	}

	// Dead, imported, listed, replayed: the level stays.
	if err := d.Dead(ctx, backend.Ref{Queue: q, ID: hi.ID, Receipt: hi.Receipt}, "dead", hi.Attempt); err != nil {
		t.Fatalf("Dead: %v", err)
	}
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
	if n, err := d.DeadReplay(ctx, q, backend.DeadFilter{}); err != nil || n != 3 {
		t.Fatalf("DeadReplay = %d, %v; want 3", n, err)
	}
	// The replayed ones of levels 3 and 2 come before the level-0 backlog
	// (three, and the replayed one of level 0).
	ds, err = d.Receive(ctx, q, backend.ReceiveParams{Max: 2, Lease: time.Minute})
	if err != nil || len(ds) != 2 || !slices.Equal(levelsOf(ds), []int{3, 2}) {
		t.Fatalf("Receive of 2 after the replay: levels %v, %v; want [3 2]", levelsOf(ds), err)
	}
	for _, dl := range ds {
		if dl.Priority != wantDead[dl.ID] {
			t.Errorf("replayed %s at level %d, want %d", dl.ID, dl.Priority, wantDead[dl.ID])
		}
	}
	ds2, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds2) != 4 || !slices.Equal(levelsOf(ds2), []int{0, 0, 0, 0}) {
		t.Fatalf("Receive of the rest: levels %v, %v; want four of level 0", levelsOf(ds2), err)
	}
	if _, err := d.Ack(ctx, refsOf(append(ds, ds2...))); err != nil {
		t.Fatal(err)
	}

	// A delayed message taken early comes with its level.
	late := levelMsg(2)
	late.Delay = time.Hour
	enqueue("a delayed one", late)
	ds, err = d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != late.ID || ds[0].Priority != 2 {
		t.Fatalf("ReceiveDelayed = %+v, %v; want %s at level 2", ds, err, late.ID)
	}

	// A topic's events have no level.
	c := newClient(t, d)
	if err := c.TopicSubscribe(ctx, "t-"+q, q+"-sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "t-"+q, fila.Message{Kind: "k", Priority: 1}); !errors.Is(err, fila.ErrUnsupported) {
		t.Errorf("Publish of level 1 in the log mode: %v, want ErrUnsupported", err)
	}

	// QueueDelete drops the level streams and their cursors.
	enqueue("before the delete", levelMsg(1), levelMsg(3))
	if _, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.QueueDelete(ctx, q); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.log_messages WHERE queue LIKE '~p_:' || $1)
	+ (SELECT count(*) FROM `+schema+`.log_cursors WHERE queue LIKE '~p_:' || $1)`, q).Scan(&left); err != nil || left != 0 {
		t.Errorf("after QueueDelete: %d rows of the level streams and their cursors left, %v; want none", left, err)
	}
}

// TestPriorityLogRotation: rotation keeps the unread rows of the level
// streams, with their level, as it keeps a queue's own, and drops the read
// ones; what a receiver read before a rotation is not read again.
func TestPriorityLogRotation(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 100*time.Millisecond)
	ctx := ctxT(t, 60*time.Second)
	q := "logrot-" + randHex(4)
	var msgs []fila.Message
	for p := 0; p <= fila.MaxPriority; p++ {
		for i := range 3 {
			msgs = append(msgs, fila.Message{Kind: fmt.Sprintf("level.%d", p), Body: []byte{byte(i)}, Priority: p})
		}
	}
	if _, err := c.EnqueueBatch(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	// Read one of level 3, then let every generation rotate out.
	first, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(first) != 1 || first[0].Priority != 3 {
		t.Fatalf("first Receive: %v, %v; want one of level 3", first, err)
	}
	if err := first[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	waitRotations(t, pool, schema, 4)
	var got []int
	for len(got) < len(msgs)-1 {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 4, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive after %d: %v", len(got), err)
		}
		for _, dl := range ds {
			if dl.Kind != fmt.Sprintf("level.%d", dl.Priority) {
				t.Errorf("a message of kind %s came back at level %d", dl.Kind, dl.Priority)
			}
			got = append(got, dl.Priority)
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []int{3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("after rotations the levels came out as %v, want %v", got, want)
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if ds, err := c.Receive(sctx, q, fila.ReceiveParams{Max: 10, Lease: time.Minute}); err == nil && len(ds) > 0 {
		t.Errorf("after every message was acked, Receive got %d more", len(ds))
	}
}

// TestPriorityLogCompeting: receivers of the log mode competing for a queue
// of mixed levels, each taking up to a different Max, get every message
// exactly once, and each claim's deliveries come highest level first; a
// receiver that takes one at a time never gets a level below one a claim
// still left ready.
func TestPriorityLogCompeting(t *testing.T) {
	checkCompetingLevels(t, postgres.ModeLog, 150, 5)
}

// TestPriorityLogLateCommit: a claim skips a level stream only when its
// cursor has passed every row (schema version 19), and a row of a
// transaction that was in progress when the cursor's batch was taken, and
// commits after a later transaction's row was read, is still found: the
// next claim hands it out ahead of the level 0 backlog.
func TestPriorityLogLateCommit(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	ctx := ctxT(t, 60*time.Second)
	q := "loglate-" + randHex(4)
	if _, err := d.Enqueue(ctx, q, []backend.Message{levelMsg(0), levelMsg(0), levelMsg(0)}); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	late := levelMsg(3)
	if _, err := d.EnqueueTx(ctx, tx, q, []backend.Message{late}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	early := levelMsg(3)
	if _, err := d.Enqueue(ctx, q, []backend.Message{early}); err != nil {
		t.Fatal(err)
	}
	recv := func(what string) backend.Delivery {
		t.Helper()
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive (%s): %d, %v", what, len(ds), err)
		}
		if _, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}}); err != nil {
			t.Fatalf("Ack (%s): %v", what, err)
		}
		return ds[0]
	}
	if got := recv("the committed level 3 message"); got.ID != early.ID {
		t.Fatalf("first Receive got %s at level %d; want the committed level 3 message %s", got.ID, got.Priority, early.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recv("the late level 3 message"); got.ID != late.ID || got.Priority != 3 {
		t.Fatalf("after the older transaction committed, Receive got %s at level %d; want its level 3 message %s ahead of level 0",
			got.ID, got.Priority, late.ID)
	}
}
