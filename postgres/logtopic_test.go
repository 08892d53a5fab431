package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestLogCopyIDMatchesGo: the copy ids the log mode derives in SQL are the
// ones backend.CopyID gives, so a copy received from a topic's stream can
// be named (dead letters, MessageCancel) by any process.
func TestLogCopyIDMatchesGo(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := openLog(t, schema, time.Minute)
	ids, err := c.EnqueueBatch(ctx, "copyid", []fila.Message{{Kind: "k", Body: []byte("a")}, {Kind: "k", Body: []byte("b")}, {Kind: "k", Body: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		for _, q := range []string{"q", "orders.eu-1", "Q_2", "a-much-longer-subscription-queue-name.with.dots"} {
			var got string
			if err := pool.QueryRow(ctx, `SELECT `+schema+`.log_copy_id($1::uuid, $2)::text`, id, q).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := backend.CopyID(id, q); got != want {
				t.Errorf("log_copy_id(%s, %s) = %s, want %s", id, q, got, want)
			}
		}
	}
}

// topicRows counts the distinct rows of topic's stream (a row and its
// rotation copies are one).
func topicRows(t *testing.T, pool *pgxpool.Pool, schema, topic string) int {
	t.Helper()
	return queueRows(t, pool, schema, "~t:"+topic)
}

// queueRows counts the distinct rows of queue's own stream.
func queueRows(t *testing.T, pool *pgxpool.Pool, schema, queue string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(DISTINCT pos) FROM %s.log_messages WHERE queue = $1`, schema),
		queue).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// receiveAll receives exactly n deliveries of q (failing on fewer within
// wait) and returns them by id.
func receiveAll(t *testing.T, c *fila.Client, q string, n int, wait time.Duration) map[string]*fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got := map[string]*fila.Delivery{}
	for len(got) < n {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: n - len(got), Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive(%s) after %d of %d: %v", q, len(got), n, err)
		}
		for _, d := range ds {
			if got[d.ID] != nil {
				t.Fatalf("Receive(%s) delivered %s twice", q, d.ID)
			}
			got[d.ID] = d
		}
	}
	return got
}

// TestLogTopicOneRowPerEvent: a publish writes one row per event whatever
// the number of subscriptions, and each subscription still behaves as a
// queue of its own: copy ids, stats, retries and dead letters that the
// others never see, listing, unsubscribing.
func TestLogTopicOneRowPerEvent(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	subs := []string{"sub-a", "sub-b", "sub-c"}
	for _, q := range subs {
		if err := c.TopicSubscribe(ctx, "events", q); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []fila.Message
	for i := 0; i < 5; i++ {
		msgs = append(msgs, fila.Message{Kind: "k", Body: []byte(fmt.Sprintf("event %d", i))})
	}
	res, err := c.PublishBatch(ctx, "events", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Subscriptions != 3 {
		t.Errorf("publish reached %d subscriptions, want 3", res.Subscriptions)
	}
	if n := topicRows(t, pool, schema, "events"); n != 5 {
		t.Errorf("the topic's stream holds %d rows, want one per event (5)", n)
	}
	for _, q := range subs {
		if n := queueRows(t, pool, schema, q); n != 0 {
			t.Errorf("subscription %s holds %d rows of its own, want none (no copies)", q, n)
		}
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready != 5 {
			t.Errorf("QueueStats(%s).Ready = %d, want 5", q, st.Ready)
		}
	}
	queues, err := c.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range subs {
		if !slices.Contains(queues, q) {
			t.Errorf("QueueList %v lacks subscription %s", queues, q)
		}
	}
	for _, q := range queues {
		if strings.HasPrefix(q, "~") {
			t.Errorf("QueueList lists the internal name %q", q)
		}
	}

	// sub-a: every copy once, under its copy id; one retried, one dead.
	a := receiveAll(t, c, "sub-a", 5, 10*time.Second)
	for _, id := range res.IDs {
		if a[fila.CopyID(id, "sub-a")] == nil {
			t.Errorf("sub-a did not get the copy of %s", id)
		}
	}
	retried := a[fila.CopyID(res.IDs[0], "sub-a")]
	buried := a[fila.CopyID(res.IDs[1], "sub-a")]
	if err := retried.Retry(ctx, 0, "again"); err != nil {
		t.Fatal(err)
	}
	if err := buried.Dead(ctx, "bad"); err != nil {
		t.Fatal(err)
	}
	for _, d := range a {
		if d != retried && d != buried {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := receiveOneLog(t, c, "sub-a", 10*time.Second)
	if d.ID != retried.ID || d.Attempt != 2 || d.LastError != "again" || string(d.Body) != "event 0" {
		t.Errorf("retry came back as %s attempt %d error %q body %q; want %s, 2, again, event 0", d.ID, d.Attempt, d.LastError, d.Body, retried.ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := c.DeadList(ctx, "sub-a", fila.DeadListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Letters) != 1 || page.Letters[0].ID != buried.ID || string(page.Letters[0].Body) != "event 1" {
		t.Errorf("sub-a's dead letters: %+v; want the copy %s of event 1", page.Letters, buried.ID)
	}

	// sub-b saw none of that: five first deliveries.
	b := receiveAll(t, c, "sub-b", 5, 10*time.Second)
	for _, id := range res.IDs {
		d := b[fila.CopyID(id, "sub-b")]
		if d == nil {
			t.Errorf("sub-b did not get the copy of %s", id)
			continue
		}
		if d.Attempt != 1 {
			t.Errorf("sub-b's copy of %s is at attempt %d, want 1", id, d.Attempt)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"sub-a", "sub-b"} {
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready+st.Delayed+st.Leased != 0 {
			t.Errorf("QueueStats(%s) = %+v after everything was settled", q, st)
		}
	}

	// sub-c unsubscribes: the topic no longer lists it, and a publish
	// reaches the two others.
	if err := c.TopicUnsubscribe(ctx, "events", "sub-c"); err != nil {
		t.Fatal(err)
	}
	got, err := c.TopicSubscriptions(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []fila.Subscription{{Queue: "sub-a"}, {Queue: "sub-b"}}) {
		t.Errorf("TopicSubscriptions = %v, want [sub-a sub-b]", got)
	}
	res, err = c.PublishBatch(ctx, "events", msgs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if res.Subscriptions != 2 {
		t.Errorf("publish after the unsubscribe reached %d subscriptions, want 2", res.Subscriptions)
	}
}

// TestLogTopicRotation: rotation keeps a topic's row while a subscription
// has not read it or holds it leased, and drops it once every subscription
// is done with it, or unsubscribed.
func TestLogTopicRotation(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for _, q := range []string{"fast", "slow", "gone"} {
		if err := c.TopicSubscribe(ctx, "rot", q); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []fila.Message
	for i := 0; i < 20; i++ {
		msgs = append(msgs, fila.Message{Kind: "k", Body: []byte(fmt.Sprintf("e%d", i))})
	}
	if _, err := c.PublishBatch(ctx, "rot", msgs); err != nil {
		t.Fatal(err)
	}
	for _, d := range receiveAll(t, c, "fast", 20, 10*time.Second) {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitRotations(t, pool, schema, 4) // every generation emptied at least once
	if n := topicRows(t, pool, schema, "rot"); n != 20 {
		t.Fatalf("after rotations the topic holds %d rows; want all 20, which slow and gone have not read", n)
	}
	if st, err := c.QueueStats(ctx, "slow"); err != nil || st.Ready != 20 {
		t.Errorf("QueueStats(slow) = %+v, %v; want 20 ready (its lag)", st, err)
	}

	// slow reads all, acks all but one, which it keeps leased.
	ds := receiveAll(t, c, "slow", 20, 10*time.Second)
	var kept *fila.Delivery
	for _, d := range ds {
		if kept == nil {
			kept = d
			continue
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// gone unsubscribes without reading.
	if err := c.TopicUnsubscribe(ctx, "rot", "gone"); err != nil {
		t.Fatal(err)
	}
	waitRotations(t, pool, schema, 4)
	if n := topicRows(t, pool, schema, "rot"); n != 1 {
		t.Fatalf("after rotations the topic holds %d rows; want 1 (slow's leased one)", n)
	}
	if err := kept.Ack(ctx); err != nil {
		t.Fatalf("ack of the lease held across rotations: %v", err)
	}
	waitRotations(t, pool, schema, 4)
	if n := topicRows(t, pool, schema, "rot"); n != 0 {
		t.Errorf("after every subscription settled everything the topic holds %d rows, want 0", n)
	}
}

// TestLogTopicLateCommitNotSkipped: a PublishTx whose transaction took its
// txid before later publishes, and committed after a subscription read
// them, still reaches the subscription (the queue rule of
// TestLogLateCommitNotSkipped, through a subscription's cursor).
func TestLogTopicLateCommitNotSkipped(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.TopicSubscribe(ctx, "late", "late-sub"); err != nil {
		t.Fatal(err)
	}
	late := publishAroundRead(ctx, t, pool, c, "late", "late-sub", []fila.Message{{Kind: "k", Body: []byte("late")}})
	d := receiveOneLog(t, c, "late-sub", 10*time.Second)
	if d.ID != fila.CopyID(late[0], "late-sub") || string(d.Body) != "late" {
		t.Errorf("after the late commit got %s (%q), want the copy of the late publish", d.ID, d.Body)
	}
}

// publishAroundRead publishes late to topic in a transaction that takes its
// txid first and stays open while a publish of one message commits and sub
// receives and acks it; then it commits, and returns late's ids. late's rows
// then fall in a batch whose older snapshot had their transaction in
// progress.
func publishAroundRead(ctx context.Context, t *testing.T, pool *pgxpool.Pool, c *fila.Client, topic, sub string, late []fila.Message) []string {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	res, err := c.PublishTx(ctx, tx, topic, late)
	if err != nil {
		t.Fatal(err)
	}
	early, err := c.Publish(ctx, topic, fila.Message{Kind: "k", Body: []byte("early")})
	if err != nil {
		t.Fatal(err)
	}
	d := receiveOneLog(t, c, sub, 10*time.Second)
	if d.ID != fila.CopyID(early, sub) {
		t.Fatalf("first delivery %s (%q), want the copy of the early publish", d.ID, d.Body)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return res.IDs
}

// lockedBuffer is a log destination that tests read while drivers write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogTopicLagWarning: a subscription that stops consuming is named in a
// warning, with how many events it has not read, and the one that keeps up
// is not.
func TestLogTopicLagWarning(t *testing.T) {
	defer postgres.SetMinLagAge(0)()
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The events are published and read by keeps-up through a driver that
	// does not rotate; the driver that rotates, and warns, starts after:
	// with the lag age at 0, a rotation between the publish and keeps-up's
	// receive named keeps-up too (it had not read them yet), and then no
	// warning came for a minute.
	quiet := openLog(t, schema, time.Hour)
	for _, q := range []string{"keeps-up", "stalled"} {
		if err := quiet.TopicSubscribe(ctx, "lagging", q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := quiet.PublishBatch(ctx, "lagging", []fila.Message{{Kind: "k", Body: []byte("1")}, {Kind: "k", Body: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range receiveAll(t, quiet, "keeps-up", 2, 10*time.Second) {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var logs lockedBuffer
	openLogWith(t, schema, 100*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "subscription=stalled") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning about the stalled subscription within 30s; log:\n%s", logs.String())
		}
		// Rotation skips while nothing is written: write.
		if _, err := pool.Exec(ctx, fmt.Sprintf(`SELECT nextval('%s.log_pos')`, schema)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, "topic=lagging subscription=stalled unread=2") {
		t.Errorf("the warning does not give the topic and the unread count:\n%s", out)
	}
	if strings.Contains(out, "subscription=keeps-up") {
		t.Errorf("the subscription that keeps up is named in a warning:\n%s", out)
	}
}

// TestLogTopicDedupKey: a message published with a dedup key is copied
// into each subscription, where the key is held: a second publish with the
// key reaches only the subscription whose copy was settled.
func TestLogTopicDedupKey(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{"dk-a", "dk-b"} {
		if err := c.TopicSubscribe(ctx, "dk", q); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.Publish(ctx, "dk", fila.Message{Kind: "k", Body: []byte("1"), DedupKey: "order-7"})
	if err != nil {
		t.Fatal(err)
	}
	if n := topicRows(t, pool, schema, "dk"); n != 0 {
		t.Errorf("a keyed message went to the topic's stream (%d rows); it is copied per subscription", n)
	}
	d := receiveOneLog(t, c, "dk-a", 10*time.Second)
	if d.ID != fila.CopyID(first, "dk-a") {
		t.Fatalf("dk-a got %s, want the copy of %s", d.ID, first)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "dk", fila.Message{Kind: "k", Body: []byte("2"), DedupKey: "order-7"}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"dk-a": "2", "dk-b": "1"} {
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready != 1 {
			t.Errorf("QueueStats(%s).Ready = %d, want 1", q, st.Ready)
		}
		if d := receiveOneLog(t, c, q, 10*time.Second); string(d.Body) != want {
			t.Errorf("%s holds %q, want %q (the key keeps the pending copy)", q, d.Body, want)
		}
	}
}

// TestLogPublishByCopy: a batch large enough to be written by COPY is
// stored as the publish statement stores a small one: every field, headers
// and empty bodies included, reaches each subscription byte for byte, in
// order, due at the transaction's now(). A batch of the same size with a
// delayed message goes by the statement, its delay counted from the
// server's now().
func TestLogPublishByCopy(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := openLog(t, schema, time.Minute)
	drv := c.Driver().(*postgres.Driver)
	subs := []string{"copy.a", "copy.b"}
	for _, q := range subs {
		if err := c.TopicSubscribe(ctx, "copied", q); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(n int, tag string) []fila.Message {
		msgs := make([]fila.Message, n)
		for i := range msgs {
			msgs[i] = fila.Message{Kind: fmt.Sprintf("%s.%d", tag, i), Body: []byte(fmt.Sprintf("\x00%s body %d\xff", tag, i)), MaxAttempts: 1 + i%4}
			if i%3 == 0 {
				msgs[i].Headers = map[string]string{"i": fmt.Sprint(i), "quote": `"{}\`, "ü": "ß"}
			}
		}
		msgs[1].Body = []byte{}
		return msgs
	}
	before := postgres.CopyPublishes(drv)
	big := batch(40, "big")
	res, err := c.PublishBatch(ctx, "copied", big)
	if err != nil {
		t.Fatal(err)
	}
	if n := postgres.CopyPublishes(drv) - before; n != 1 {
		t.Fatalf("a publish of %d wrote %d times by COPY, want once", len(big), n)
	}
	small := batch(3, "small")
	res2, err := c.PublishBatch(ctx, "copied", small)
	if err != nil {
		t.Fatal(err)
	}
	if n := postgres.CopyPublishes(drv) - before; n != 1 {
		t.Fatalf("a publish of 3 was written by COPY")
	}
	delayed := append(batch(40, "delayed"), fila.Message{Kind: "later", Body: []byte("x"), Delay: time.Hour})
	res3, err := c.PublishBatch(ctx, "copied", delayed)
	if err != nil {
		t.Fatal(err)
	}
	if n := postgres.CopyPublishes(drv) - before; n != 1 {
		t.Fatalf("a publish with a delayed message was written by COPY")
	}
	sent := slices.Concat(big, small, delayed[:len(delayed)-1])
	ids := slices.Concat(res.IDs, res2.IDs, res3.IDs[:len(delayed)-1])
	for _, q := range subs {
		got := receiveAll(t, c, q, len(sent), 30*time.Second)
		for i, m := range sent {
			d := got[backend.CopyID(ids[i], q)]
			switch {
			case d == nil:
				t.Errorf("%s: %s (%s) not received", q, ids[i], m.Kind)
			case d.Kind != m.Kind || !bytes.Equal(d.Body, m.Body) || d.Body == nil || d.MaxAttempts != m.MaxAttempts || d.Attempt != 1:
				t.Errorf("%s: got kind %q body %q max %d attempt %d; want %q %q %d 1", q, d.Kind, d.Body, d.MaxAttempts, d.Attempt, m.Kind, m.Body, m.MaxAttempts)
			case !maps.Equal(d.Headers, m.Headers):
				t.Errorf("%s: %s headers %v, want %v", q, m.Kind, d.Headers, m.Headers)
			}
		}
	}
	// Rows in publish order; the COPY's rows due at once, all at one
	// time (their transaction's now()), in the current generation; and the
	// delayed one due an hour after its enqueue.
	var ordered bool
	var runAts, gens int
	var lag, due time.Duration
	var nulls int
	err = pool.QueryRow(ctx, fmt.Sprintf(`SELECT
		(SELECT array_agg(id ORDER BY pos) FROM %[1]s.log_messages WHERE queue = '~t:copied' AND kind <> 'later')::text[] = $1::text[],
		(SELECT count(DISTINCT run_at) FROM %[1]s.log_messages WHERE kind LIKE 'big.%%'),
		(SELECT extract(epoch FROM clock_timestamp() - min(run_at)) * 1e6 FROM %[1]s.log_messages WHERE kind LIKE 'big.%%')::int8,
		(SELECT count(*) FROM %[1]s.log_messages WHERE kind LIKE 'big.%%' AND gen <> (SELECT cur FROM %[1]s.log_state)),
		(SELECT extract(epoch FROM run_at - enqueued_at) * 1e6 FROM %[1]s.log_messages WHERE kind = 'later')::int8,
		(SELECT count(*) FROM %[1]s.log_messages WHERE queue = '~t:copied' AND headers IS NULL)`, schema),
		ids).Scan(&ordered, &runAts, &lag, &gens, &due, &nulls)
	if err != nil {
		t.Fatal(err)
	}
	if !ordered {
		t.Error("the stream's rows are not in publish order")
	}
	if lag *= time.Microsecond; runAts != 1 || lag < 0 || lag > time.Minute {
		t.Errorf("the COPY's rows have %d run-ats, the first %v ago; want one, in the last minute", runAts, lag)
	}
	if gens != 0 {
		t.Errorf("%d of the COPY's rows are outside the current generation", gens)
	}
	want := 0
	for _, m := range slices.Concat(big, small, delayed) {
		if len(m.Headers) == 0 {
			want++
		}
	}
	if nulls != want {
		t.Errorf("%d rows without headers store NULL, want %d (no JSON null)", nulls, want)
	}
	if due *= time.Microsecond; due < time.Hour-5*time.Second || due > time.Hour+5*time.Second {
		t.Errorf("the delayed row is due %v after its enqueue, want an hour", due)
	}
}

// TestLogClaimInProgressPartByIndex: the part of a batch that was in
// progress in its lo snapshot is read by index, one transaction at a time,
// not by a scan of the stream from the cursor. Until schema version 13 the
// claim after a late commit fetched every row the topic's stream held (here
// the 2,000 consumed ones), which under concurrent publishes was most of a
// fan-out's server time.
func TestLogClaimInProgressPartByIndex(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, sub, old = "xip", "xip-sub", 2000
	if err := c.TopicSubscribe(ctx, topic, sub); err != nil {
		t.Fatal(err)
	}
	msgs := make([]fila.Message, old)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k", Body: []byte("old")}
	}
	if _, err := c.PublishBatch(ctx, topic, msgs); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < old; {
		ds, err := c.Receive(ctx, sub, fila.ReceiveParams{Max: 1000, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", n, old, err)
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
		n += len(ds)
	}
	// A publish in progress while the subscription reads a later one: its
	// transaction is in the xip of the batch that follows.
	late := publishAroundRead(ctx, t, pool, c, topic, sub, []fila.Message{{Kind: "k", Body: []byte("late")}})
	// The claim, and the heap rows of the log it fetched, in one
	// transaction: the xact counters are this transaction's own.
	claim, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = claim.Rollback(context.Background()) }()
	var ids []string
	rows, err := claim.Query(ctx, fmt.Sprintf(`SELECT id FROM %s.log_claim($1, 10, 60000000)`, schema), sub)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "~" + late[0]; len(ids) != 1 || ids[0] != want {
		t.Fatalf("log_claim after the late commit returned %v, want [%s]", ids, want)
	}
	var fetched int64
	// (A heap row fetched through an index counts on the index.)
	err = claim.QueryRow(ctx, fmt.Sprintf(`SELECT sum(pg_stat_get_xact_tuples_fetched(i.indexrelid))::int8 FROM pg_index i
		WHERE i.indrelid IN ('%[1]s.log_messages_0'::regclass, '%[1]s.log_messages_1'::regclass, '%[1]s.log_messages_2'::regclass)`,
		schema)).Scan(&fetched)
	if err != nil {
		t.Fatal(err)
	}
	if fetched > 20 {
		t.Errorf("the claim of the late publish's one row fetched %d rows of the log (the topic's stream holds %d); want a handful", fetched, old+2)
	}
}

// TestLogClaimBothPartsInOrder: a claim reads a batch's in-progress part and
// its range part in one statement, in (txid, pos) order, and a Max that
// ends inside either part leaves the rest, whichever part it is in, to the
// next claim, with nothing read twice or skipped.
func TestLogClaimBothPartsInOrder(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, sub = "parts", "parts-sub"
	if err := c.TopicSubscribe(ctx, topic, sub); err != nil {
		t.Fatal(err)
	}
	bodies := func(prefix string) []fila.Message {
		ms := make([]fila.Message, 3)
		for i := range ms {
			ms[i] = fila.Message{Kind: "k", Body: []byte(fmt.Sprintf("%s-%d", prefix, i))}
		}
		return ms
	}
	publishAroundRead(ctx, t, pool, c, topic, sub, bodies("late"))
	if _, err := c.PublishBatch(ctx, topic, bodies("new")); err != nil {
		t.Fatal(err)
	}
	// The late publish's rows are the in-progress part of the next batch,
	// the new ones its range part.
	var got []string
	for _, max := range []int{2, 2, 10} {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := c.Receive(rctx, sub, fila.ReceiveParams{Max: max, Lease: time.Minute})
		rcancel()
		if err != nil {
			t.Fatalf("Receive(Max %d) after %v: %v", max, got, err)
		}
		var claim []string
		for _, d := range ds {
			claim = append(claim, string(d.Body))
		}
		// (The rows of one publish share a run-at, and a receive orders
		// equal run-ats by id: compare each claim's set.)
		slices.Sort(claim)
		got = append(got, strings.Join(claim, ","))
	}
	want := []string{"late-0,late-1", "late-2,new-0", "new-1,new-2"}
	if !slices.Equal(got, want) {
		t.Errorf("claims of Max 2, 2 and 10 got %q, want %q", got, want)
	}
}

// TestLogTopicPublishNotifiesOnce: a publish to a topic of five
// subscriptions wakes a receive blocked on each of them, and the five
// wake-ups are sent in one transaction, not one each.
func TestLogTopicPublishNotifiesOnce(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	ctx := ctxT(t, 60*time.Second)
	subs := []string{"n-a", "n-b", "n-c", "n-d", "n-e"}
	for _, q := range subs {
		if err := d.TopicSubscribe(ctx, "wake", q, ""); err != nil {
			t.Fatal(err)
		}
	}
	p := backend.ReceiveParams{Max: 10, Lease: time.Minute}
	waitListening(t, d)
	type result struct {
		q   string
		n   int
		err error
	}
	done := make(chan result, len(subs))
	for _, q := range subs {
		go func() {
			ds, err := d.Receive(ctxT(t, 20*time.Second), q, p)
			done <- result{q, len(ds), err}
		}()
	}
	waitFor(t, 10*time.Second, "every receive to block", func() bool { return postgres.Sleeping(d) == int64(len(subs)) })
	sent, sends := postgres.NotificationsSent(d), postgres.NotificationSends(d)
	msgs := []backend.Message{{ID: uuidString(), Kind: "k", Body: []byte("one"), MaxAttempts: 5}}
	if n, err := d.TopicPublish(ctx, "wake", msgs); err != nil || n != len(subs) {
		t.Fatalf("TopicPublish: %d, %v; want %d subscriptions", n, err, len(subs))
	}
	for range subs {
		if r := <-done; r.err != nil || r.n != 1 {
			t.Errorf("receive of %s after the publish: %d, %v; want the event", r.q, r.n, r.err)
		}
	}
	waitFor(t, 5*time.Second, "the notifications to finish", func() bool { return postgres.NotificationsIdle(d) })
	if n, tx := postgres.NotificationsSent(d)-sent, postgres.NotificationSends(d)-sends; n != int64(len(subs)) || tx != 1 {
		t.Errorf("the publish sent %d notifications in %d transactions; want %d in one", n, tx, len(subs))
	}
}

// TestLogPublishByCopyMatchesStatement: a publish by COPY, whose rows the
// driver encodes itself, stores the same enqueue time, headers and attempts
// as the publish statement (a batch under copyMin) for the same messages,
// to the microsecond, including times before 2000 and nanoseconds that
// round.
func TestLogPublishByCopyMatchesStatement(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	ctx := ctxT(t, 60*time.Second)
	if err := d.TopicSubscribe(ctx, "same", "same.sub", ""); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 8, 45, 1, 123456789, time.FixedZone("x", -3*3600))
	msgs := func(n int) []backend.Message {
		out := make([]backend.Message, n)
		for i := range out {
			out[i] = backend.Message{ID: uuidString(), Kind: "k", Body: []byte{byte(i), 0, 0xff}, MaxAttempts: i + 1,
				EnqueuedAt: at.Add(time.Duration(i) * 999 * time.Nanosecond), Attempts: i % 3}
			switch i % 4 {
			case 1:
				out[i].Attempts = 1<<31 - 1
			case 2:
				out[i].EnqueuedAt = time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC)
				out[i].Headers = map[string]string{"a": "b"}
			}
		}
		return out
	}
	byCopy, byStmt := msgs(20), msgs(3)
	copies := postgres.CopyPublishes(d)
	for _, b := range [][]backend.Message{byCopy, byStmt} {
		if _, err := d.TopicPublish(ctx, "same", b); err != nil {
			t.Fatal(err)
		}
	}
	if n := postgres.CopyPublishes(d) - copies; n != 1 {
		t.Fatalf("%d publishes by COPY, want 1", n)
	}
	type row struct {
		Enq             time.Time
		Headers         *string
		Attempts, MaxAt int
		Body            []byte
	}
	read := func(msgs []backend.Message) []row {
		var out []row
		for _, m := range msgs {
			var r row
			err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT enqueued_at, headers::text, attempts, max_attempts, body
				FROM %s.log_messages WHERE id = $1`, schema), m.ID).Scan(&r.Enq, &r.Headers, &r.Attempts, &r.MaxAt, &r.Body)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	got, want := read(byCopy[:3]), read(byStmt)
	for i := range want {
		g, w := got[i], want[i]
		if !g.Enq.Equal(w.Enq) || (g.Headers == nil) != (w.Headers == nil) ||
			(g.Headers != nil && *g.Headers != *w.Headers) || g.Attempts != w.Attempts || g.MaxAt != w.MaxAt || !bytes.Equal(g.Body, w.Body) {
			t.Errorf("message %d: by COPY %+v, by the statement %+v", i, g, w)
		}
	}
}

// TestLogPublishByCopyFailureKeepsNothing: a publish by COPY is one
// transaction, and the driver reads the whole exchange of a failed one. A
// row the server refuses (a kind with a NUL byte, which the root package
// would have refused first) fails the batch as invalid input and stores
// none of its rows; the pool's one connection then publishes again. A
// publish to a topic without subscriptions stores nothing and reports none.
func TestLogPublishByCopyFailureKeepsNothing(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	pool := testPoolWith(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog, DisableListen: true, PollInterval: time.Second})
	if err := d.TopicSubscribe(ctx, "fails", "fails.sub", ""); err != nil {
		t.Fatal(err)
	}
	batch := func(n int) []backend.Message {
		out := make([]backend.Message, n)
		for i := range out {
			out[i] = backend.Message{ID: uuidString(), Kind: "k", Body: []byte{byte(i)}, MaxAttempts: 1, EnqueuedAt: time.Now()}
		}
		return out
	}
	stored := func() int {
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.log_messages`, schema)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	copies := postgres.CopyPublishes(d)
	bad := batch(40)
	bad[29].Kind = "k\x00"
	if _, err := d.TopicPublish(ctx, "fails", bad); !errors.Is(err, backend.ErrInvalid) {
		t.Fatalf("a publish with a NUL in a kind: %v, want ErrInvalid", err)
	}
	if n := stored(); n != 0 {
		t.Fatalf("the failed publish stored %d rows, want none", n)
	}
	for range 3 {
		n, err := d.TopicPublish(ctx, "fails", batch(40))
		if err != nil || n != 1 {
			t.Fatalf("publish after the failure: %d subscriptions, %v; want 1, nil", n, err)
		}
	}
	if n, err := d.TopicPublish(ctx, "nobody", batch(40)); err != nil || n != 0 {
		t.Fatalf("publish to a topic without subscriptions: %d, %v; want 0, nil", n, err)
	}
	if n := stored(); n != 120 {
		t.Errorf("%d rows stored, want 120", n)
	}
	if n := postgres.CopyPublishes(d) - copies; n != 4 {
		t.Errorf("%d publishes by COPY, want 4", n)
	}
}

// TestLogTopicDeliveryOrder: a single receiver of a subscription gets a
// batch in publish order, as it gets its queue's own messages in enqueue
// order (the package doc's ordering rule). The copies of a publish by COPY
// share a run-at and their copy ids keep only the millisecond of the
// event's id, so a receive that sorted its claim by run-at and id handed
// them out shuffled.
func TestLogTopicDeliveryOrder(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx := ctxT(t, 60*time.Second)
	if err := c.TopicSubscribe(ctx, "ordered", "ordered.sub"); err != nil {
		t.Fatal(err)
	}
	msgs := make([]fila.Message, 200)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k", Body: []byte(fmt.Sprint(i))}
	}
	var ids []string
	for b := range slices.Chunk(msgs, 100) {
		res, err := c.PublishBatch(ctx, "ordered", b)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.IDs...)
	}
	var got []string
	for len(got) < len(ids) {
		ds, err := c.Receive(ctx, "ordered.sub", fila.ReceiveParams{Max: 1000, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got = append(got, string(d.Body))
		}
	}
	for i := range got {
		if got[i] != fmt.Sprint(i) {
			t.Fatalf("delivery %d is event %s; want publish order (first 10: %v)", i, got[i], got[:min(10, len(got))])
		}
	}
}

// TestLogPublishByCopyQuotesTopic: the publish by COPY names its topic in
// the query's text, quoted. A topic whose name holds a quote and a
// backslash (the root package refuses such names; a driver called directly
// does not) reaches its subscription, and one that differs only by them
// does not, on connections where standard_conforming_strings is off, so a
// backslash in a plain literal would be an escape.
func TestLogPublishByCopyQuotesTopic(t *testing.T) {
	pool := testPoolWith(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["standard_conforming_strings"] = "off" })
	schema := migratedSchema(t, testPool(t)) // the migrations need the setting on
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	ctx := ctxT(t, 60*time.Second)
	const topic = `it's\a topic`
	if err := d.TopicSubscribe(ctx, topic, "quoted.sub", ""); err != nil {
		t.Fatal(err)
	}
	batch := func() []backend.Message {
		out := make([]backend.Message, 20)
		for i := range out {
			out[i] = backend.Message{ID: uuidString(), Kind: "k", Body: []byte{byte(i)}, MaxAttempts: 1, EnqueuedAt: time.Now()}
		}
		return out
	}
	copies := postgres.CopyPublishes(d)
	for _, c := range []struct {
		topic string
		want  int
	}{{topic, 1}, {`its\a topic`, 0}, {`it's a topic`, 0}} {
		if n, err := d.TopicPublish(ctx, c.topic, batch()); err != nil || n != c.want {
			t.Errorf("TopicPublish(%q) = %d, %v; want %d subscriptions", c.topic, n, err, c.want)
		}
	}
	if n := postgres.CopyPublishes(d) - copies; n != 3 {
		t.Errorf("%d publishes by COPY, want 3", n)
	}
}

// TestLogTopicKindPatterns: in the log mode a publish, by COPY (16 or more
// events) or by statement, reports and wakes only the subscriptions whose
// patterns take a kind of it and stores nothing when none does; a claim
// leases only the matching rows, passes the others, and QueueStats counts
// only the matching unread rows.
func TestLogTopicKindPatterns(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	d := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	ctx := ctxT(t, 60*time.Second)
	if err := d.TopicSubscribe(ctx, "routed", "routed.a", "a.*"); err != nil {
		t.Fatal(err)
	}
	if err := d.TopicSubscribe(ctx, "routed", "routed.b", "#.b"); err != nil {
		t.Fatal(err)
	}
	batch := func(n int, kinds ...string) []backend.Message {
		out := make([]backend.Message, n)
		for i := range out {
			out[i] = backend.Message{ID: uuidString(), Kind: kinds[i%len(kinds)], Body: []byte{byte(i)}, MaxAttempts: 5}
		}
		return out
	}
	stored := func() int {
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.log_messages WHERE queue = '~t:routed'`, schema)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	copies := postgres.CopyPublishes(d)
	for _, b := range [][]backend.Message{batch(20, "c"), batch(3, "c.x")} {
		n, err := d.TopicPublish(ctx, "routed", b)
		if err != nil || n != 0 {
			t.Fatalf("TopicPublish of kinds no pattern takes = %d, %v; want 0", n, err)
		}
	}
	if n := stored(); n != 0 {
		t.Fatalf("a publish no subscription takes stored %d rows, want none", n)
	}
	// 20 by COPY (15 for routed.a), then 3 by statement (2 for routed.b).
	want := map[string]map[string]bool{"routed.a": {}, "routed.b": {}}
	// By COPY, the kinds are a literal in the query: quotes and backslashes
	// must arrive as they are.
	for _, b := range [][]backend.Message{batch(20, "a.x", "zz", `a."q"`, `a.\b'`), batch(3, "x.b", "q.b", "a.b.c")} {
		n, err := d.TopicPublish(ctx, "routed", b)
		if err != nil || n != 1 {
			t.Fatalf("TopicPublish = %d, %v; want 1 subscription", n, err)
		}
		for _, m := range b {
			for q, p := range map[string]string{"routed.a": "a.*", "routed.b": "#.b"} {
				if backend.KindMatch(p, m.Kind) {
					want[q][backend.CopyID(m.ID, q)] = true
				}
			}
		}
	}
	if n := postgres.CopyPublishes(d) - copies; n != 2 {
		t.Fatalf("%d publishes by COPY, want 2", n)
	}
	for q, ids := range want {
		st, err := d.QueueStats(ctx, q)
		if err != nil || st.Ready != int64(len(ids)) {
			t.Errorf("Stats(%s) = %+v, %v; want %d ready", q, st, err, len(ids))
		}
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, dl := range ds {
			got[dl.Message.ID] = true
		}
		if !maps.Equal(got, ids) {
			t.Errorf("%s received %d messages, want %d: %v", q, len(got), len(ids), ds)
		}
	}
}
