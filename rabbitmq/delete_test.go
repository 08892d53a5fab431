package rabbitmq_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// TestQueueDeleteByOtherProcess: a queue deleted by a driver this process
// does not see as sharing its queues (as another process would be; here the
// same broker under another host name) is noticed through the broker's
// cancellation of the consumer: the lease held on it is lost, the stats are
// zero, and the queue works again.
func TestQueueDeleteByOtherProcess(t *testing.T) {
	raw := testenv.RabbitMQURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	switch u.Hostname() {
	case "127.0.0.1":
		u.Host = "localhost:" + u.Port()
	case "localhost":
		u.Host = "127.0.0.1:" + u.Port()
	default:
		t.Skipf("the broker's host %q has no second name to make a driver outside this one's scope", u.Hostname())
	}
	if u.Port() == "" {
		u.Host = u.Hostname()
	}
	tr := newTracker(t, raw)
	c, _ := newClient(t, tr, nil)
	otherTr := newTracker(t, u.String())
	other, _ := newClient(t, otherTr, nil)
	q := uniqueQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "held"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Hour})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %d deliveries, %v", len(ds), err)
	}
	held := ds[0]
	if err := other.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
	// The broker's basic.cancel reaches c asynchronously: poll with Extend,
	// which does not settle the lease while it still holds.
	for {
		err := held.Extend(ctx, time.Hour)
		if errors.Is(err, fila.ErrLeaseLost) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the lease on a message of a deleted queue was not lost")
		}
		if err != nil {
			t.Fatalf("Extend after the queue was deleted: %v, want nil until ErrLeaseLost", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := held.Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("Ack of a delivery of a deleted queue: %v, want ErrLeaseLost", err)
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready+st.Delayed+st.Leased+st.Dead != 0 {
		t.Errorf("stats after QueueDelete: %+v, want zero", st)
	}
	id, err := c.Enqueue(ctx, q, fila.Message{Kind: "again"})
	if err != nil {
		t.Fatalf("Enqueue after QueueDelete: %v", err)
	}
	ds, err = c.Receive(ctx, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive after QueueDelete: %d deliveries, %v", len(ds), err)
	}
	if ds[0].ID != id {
		t.Errorf("after QueueDelete received %s (%s), want the new message %s", ds[0].ID, ds[0].Kind, id)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
