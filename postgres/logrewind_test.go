package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// openLogRetention opens a log-mode client of schema rotating every rotate
// and keeping topics' events for retention (0: none).
func openLogRetention(t *testing.T, schema string, rotate, retention time.Duration) *fila.Client {
	t.Helper()
	more := map[string]string{}
	if retention > 0 {
		more["fila_topic_retention"] = retention.String()
	}
	return openLogParams(t, schema, rotate, quietLogger, more)
}

// publishN publishes n events of kind to topic and returns their ids.
func publishN(t *testing.T, c *fila.Client, topic, kind string, n int) []string {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: kind, Body: []byte(fmt.Sprintf("%s-%d", kind, i))}
	}
	res, err := c.PublishBatch(context.Background(), topic, msgs)
	if err != nil {
		t.Fatalf("PublishBatch(%s): %v", topic, err)
	}
	return res.IDs
}

// ackAll receives exactly the copies in queue of ids (and nothing else,
// within a second after), checks each is at attempt 1, and acks them.
func ackAll(t *testing.T, c *fila.Client, queue string, ids []string, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := receiveAll(t, c, queue, len(ids), 20*time.Second)
	for _, id := range ids {
		d := got[fila.CopyID(id, queue)]
		if d == nil {
			t.Errorf("%s: %s lacks the copy of %s", what, queue, id)
			continue
		}
		if d.Attempt != 1 {
			t.Errorf("%s: %s got the copy of %s at attempt %d, want 1", what, queue, id, d.Attempt)
		}
	}
	for _, d := range got {
		if err := d.Ack(ctx); err != nil {
			t.Errorf("%s: Ack(%s): %v", what, d.ID, err)
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%s: %s received %d copies, want %d", what, queue, len(got), len(ids))
	}
	noMore(t, c, queue, what)
}

// noMore checks that queue hands out nothing within a second.
func noMore(t *testing.T, c *fila.Client, queue, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 10, Lease: time.Minute})
	if err == nil {
		t.Errorf("%s: %s received %d more copies, want none", what, queue, len(ds))
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: Receive(%s): %v", what, queue, err)
	}
}

// TestLogTopicRetentionAndRewind: with a retention, rotation keeps a
// topic's events that every subscription read, and TopicRewind delivers
// those from a point in time again, to that subscription alone; a lease
// held across the rewind ends; a rewind past the newest event skips the
// unread ones. Without a retention, events every subscription read are gone
// after the rotations, and a rewind finds nothing to deliver.
func TestLogTopicRetentionAndRewind(t *testing.T) {
	t.Parallel()
	pool := testPool(t)

	t.Run("retention", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		schema := migratedSchema(t, pool)
		c := openLogRetention(t, schema, 100*time.Millisecond, time.Hour)
		for _, q := range []string{"a", "b"} {
			if err := c.TopicSubscribe(ctx, "rw", q); err != nil {
				t.Fatal(err)
			}
		}
		first := publishN(t, c, "rw", "first", 5)
		point := time.Now()
		second := publishN(t, c, "rw", "second", 5)
		all := append(append([]string(nil), first...), second...)
		ackAll(t, c, "a", all, "a before any rewind")
		ackAll(t, c, "b", all, "b before any rewind")
		waitRotations(t, pool, schema, 4) // every generation emptied at least once
		if n := topicRows(t, pool, schema, "rw"); n != 10 {
			t.Fatalf("after rotations the topic holds %d rows; want all 10, within the retention", n)
		}

		// a holds a lease of a third event across its rewind.
		third := publishN(t, c, "rw", "third", 1)
		held := receiveOneLog(t, c, "a", 10*time.Second)
		if held.ID != fila.CopyID(third[0], "a") {
			t.Fatalf("a received %s, want the copy of the third event", held.ID)
		}
		if err := c.TopicRewind(ctx, "rw", "a", point); err != nil {
			t.Fatalf("TopicRewind(a): %v", err)
		}
		if err := held.Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
			t.Errorf("Ack of a lease held across the rewind: %v, want ErrLeaseLost", err)
		}
		ackAll(t, c, "a", append(append([]string(nil), second...), third...), "a after its rewind to the second batch")
		if st, err := c.QueueStats(ctx, "b"); err != nil || st.Ready != 1 {
			t.Errorf("QueueStats(b) after a's rewind = %+v, %v; want only the third event ready", st, err)
		}
		ackAll(t, c, "b", third, "b, untouched by a's rewind")

		// From before the first event: everything kept, in b alone.
		if err := c.TopicRewind(ctx, "rw", "b", time.Time{}); err != nil {
			t.Fatalf("TopicRewind(b, zero time): %v", err)
		}
		ackAll(t, c, "b", append(all, third...), "b after its rewind to the start")
		noMore(t, c, "a", "a while b rewound")

		// Past the newest event: what a had not read is skipped, what is
		// published after is read.
		publishN(t, c, "rw", "skipped", 3)
		if err := c.TopicRewind(ctx, "rw", "a", time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("TopicRewind(a, future): %v", err)
		}
		after := publishN(t, c, "rw", "after", 2)
		ackAll(t, c, "a", after, "a after a rewind past the newest event")

		err := c.TopicRewind(ctx, "rw", "nobody", point)
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("TopicRewind of a queue that is not subscribed: %v, want ErrInvalid", err)
		}
	})

	t.Run("none", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		schema := migratedSchema(t, pool)
		c := openLogRetention(t, schema, 100*time.Millisecond, 0)
		if err := c.TopicSubscribe(ctx, "rw", "a"); err != nil {
			t.Fatal(err)
		}
		ackAll(t, c, "a", publishN(t, c, "rw", "e", 5), "a")
		waitRotations(t, pool, schema, 4)
		if n := topicRows(t, pool, schema, "rw"); n != 0 {
			t.Fatalf("without a retention the topic holds %d rows after rotations; want 0", n)
		}
		if err := c.TopicRewind(ctx, "rw", "a", time.Time{}); err != nil {
			t.Fatalf("TopicRewind: %v", err)
		}
		noMore(t, c, "a", "a rewound with nothing kept")
	})
}

// TestTopicRetentionParam: fila_topic_retention is a positive duration, in
// the log mode only.
func TestTopicRetentionParam(t *testing.T) {
	t.Parallel()
	for _, params := range []map[string]string{
		{"fila_mode": "log", "fila_topic_retention": "0s"},
		{"fila_mode": "log", "fila_topic_retention": "-1h"},
		{"fila_topic_retention": "1h"},
	} {
		u, err := url.Parse(driverURL(t, params))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger})
		cancel()
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open with %v: %v, want ErrInvalid", params, err)
		}
	}
}
