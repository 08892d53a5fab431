package mongo

import (
	"context"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// blockedReceive starts a Receive of one message on drv and returns the
// channel its outcome arrives on.
func blockedReceive(t *testing.T, drv *Driver, queue string) <-chan []backend.Delivery {
	t.Helper()
	out := make(chan []backend.Delivery, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	go func() {
		ds, err := drv.Receive(ctx, queue, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			t.Errorf("Receive: %v", err)
		}
		out <- ds
	}()
	return out
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func enqueueOne(t *testing.T, drv *Driver, queue string, m backend.Message) {
	t.Helper()
	if m.ID == "" {
		m.ID = uniqueQueue("id")
	}
	if m.Kind == "" {
		m.Kind = "k"
	}
	m.EnqueuedAt = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := drv.Enqueue(ctx, queue, []backend.Message{m}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}

// expectWithin fails the test unless a delivery arrives within d.
func expectWithin(t *testing.T, got <-chan []backend.Delivery, d time.Duration, why string) {
	t.Helper()
	select {
	case ds := <-got:
		if len(ds) != 1 {
			t.Fatalf("%s: got %d deliveries, want 1", why, len(ds))
		}
	case <-time.After(d):
		t.Fatalf("%s: no delivery within %v", why, d)
	}
}

// TestWakeUpByPolling: without change streams a receiver blocked on an
// empty queue notices a message enqueued by another driver instance (as
// by another process) within its poll interval.
func TestWakeUpByPolling(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	db := testDatabase(t, s)
	params := map[string]string{"fila_database": db, "fila_change_streams": "false", "fila_poll_interval": "100ms"}
	cons, prod := openDriver(t, s, params), openDriver(t, s, params)
	if cons.Capabilities().ChangeStreams {
		t.Fatalf("fila_change_streams=false left change streams on")
	}
	q := uniqueQueue("poll")
	got := blockedReceive(t, cons, q)
	// Let the receiver reach its longest poll wait.
	waitFor(t, "the receiver to poll several times", func() bool { return cons.waits.Load() >= 5 })
	enqueueOne(t, prod, q, backend.Message{})
	expectWithin(t, got, time.Second, "polling receiver")
}

// TestWakeUpAtNextDue: a blocked receiver wakes when a delayed message
// becomes due, though its poll interval is an hour.
func TestWakeUpAtNextDue(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	db := testDatabase(t, s)
	params := map[string]string{"fila_database": db, "fila_change_streams": "false", "fila_poll_interval": "1h"}
	cons, prod := openDriver(t, s, params), openDriver(t, s, params)
	q := uniqueQueue("due")
	enqueueOne(t, prod, q, backend.Message{Delay: 400 * time.Millisecond})
	start := time.Now()
	got := blockedReceive(t, cons, q)
	expectWithin(t, got, 2*time.Second, "receiver waiting for a delayed message")
	if el := time.Since(start); el < 350*time.Millisecond {
		t.Errorf("delayed message received after %v, before its delay of 400ms", el)
	}
}

// TestWakeUpByChangeStream: on a replica set a receiver blocked on an
// empty queue is woken by the change stream, long before its safety poll.
func TestWakeUpByChangeStream(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	if !s.caps.ChangeStreams {
		if s.caps.FerretDB {
			t.Skip("FerretDB v1 has no change streams")
		}
		t.Skip("the server has no change streams (not a replica set)")
	}
	db := testDatabase(t, s)
	params := map[string]string{"fila_database": db, "fila_poll_interval": "1h"}
	cons, prod := openDriver(t, s, params), openDriver(t, s, params)
	q := uniqueQueue("stream")
	got := blockedReceive(t, cons, q)
	waitFor(t, "the change stream to open", cons.notify.isHealthy)
	// The stream wakes everyone once it opens; wait for the receiver to
	// sleep again, now for the safety poll.
	w := cons.waits.Load()
	waitFor(t, "the receiver to sleep", func() bool { return cons.waits.Load() > w })
	enqueueOne(t, prod, q, backend.Message{})
	expectWithin(t, got, time.Second, "receiver woken by the change stream")
}
