package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// Priorities (contract: priorities): among a queue's ready messages a
// higher Message.Priority is handed out first.

// enqueueLevel enqueues n messages of level p whose kind names the level,
// in one batch.
func enqueueLevel(t *testing.T, c *fila.Client, queue string, p, n int) []string {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: fmt.Sprintf("level.%d", p), Body: []byte{byte(p), byte(i)}, Priority: p}
	}
	ids, err := c.EnqueueBatch(ctxTimeout(t, 30*time.Second), queue, msgs)
	if err != nil {
		t.Fatalf("EnqueueBatch(%s) of %d at level %d: %v", queue, n, p, err)
	}
	return ids
}

// testPriorityFirst: with a backlog of lower levels ready, a message of a
// higher level enqueued afterwards is the next one a single receiver gets,
// levels come out highest first, and a larger receive holds the higher
// message too.
func (s *suite) testPriorityFirst(t *testing.T) {
	s.need(t, FeaturePriority)
	c := s.client(t)
	q := s.queue(t)
	enqueueLevel(t, c, q, 0, 30)
	hi := enqueueLevel(t, c, q, fila.MaxPriority, 1)[0]
	if s.has(FeatureStats) {
		st, err := c.QueueStats(ctxTimeout(t, 10*time.Second), q)
		want := make([]int64, fila.MaxPriority+1)
		want[0], want[fila.MaxPriority] = 30, 1
		if err != nil || st.ReadyByPriority != nil && !slices.Equal(st.ReadyByPriority, want) {
			t.Errorf("QueueStats = %+v, %v; want ReadyByPriority %v (or nil where the driver does not count levels)", st, err, want)
		}
	}
	d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if d.ID != hi || d.Priority != fila.MaxPriority {
		t.Fatalf("after 30 messages of level 0, one of level %d: the next receive got %s of level %d, want %s", fila.MaxPriority, d.ID, d.Priority, hi)
	}
	ack(t, d)

	// Every level, enqueued lowest first: received one at a time, highest
	// first.
	for p := 1; p <= fila.MaxPriority; p++ {
		enqueueLevel(t, c, q, p, 2)
	}
	last := fila.MaxPriority
	for range 2 * fila.MaxPriority {
		d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
		if d.Priority > last || d.Priority == 0 {
			t.Errorf("received level %d after level %d (kind %s); want the levels from %d down to 1 before level 0", d.Priority, last, d.Kind, fila.MaxPriority)
		}
		if d.Kind != fmt.Sprintf("level.%d", d.Priority) {
			t.Errorf("a message of kind %s was delivered with level %d", d.Kind, d.Priority)
		}
		last = d.Priority
		ack(t, d)
	}

	// A receive of ten, while 29 of level 0 wait: the new higher message
	// is among them.
	hi = enqueueLevel(t, c, q, 2, 1)[0]
	ds, err := c.Receive(ctxTimeout(t, 10*time.Second), q, fila.ReceiveParams{Max: 10, Lease: 30 * time.Second})
	if err != nil {
		t.Fatalf("Receive(Max 10): %v", err)
	}
	found := false
	for _, d := range ds {
		found = found || d.ID == hi
	}
	if !found {
		t.Errorf("a receive of up to 10 got %d messages without the one of level 2 enqueued last", len(ds))
	}
}

// testPriorityCompeting: among receivers competing for one message each,
// the first claim takes the higher message: exactly one of them gets it.
func (s *suite) testPriorityCompeting(t *testing.T) {
	s.need(t, FeaturePriority)
	s.need(t, FeatureConcurrentClaims)
	c := s.client(t)
	q := s.queue(t)
	enqueueLevel(t, c, q, 0, 20)
	hi := enqueueLevel(t, c, q, 1, 1)[0]
	const receivers = 4
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  int
		errs []error
	)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := c.Receive(ctxTimeout(t, 10*time.Second), q, fila.ReceiveParams{Max: 1, Lease: 30 * time.Second})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, d := range ds {
				if d.ID == hi {
					got++
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("competing receives: %v", err)
	}
	if got != 1 {
		t.Errorf("%d competing receives of one message each got the level 1 message %d times; want once", receivers, got)
	}
}

// testPriorityKept: a delayed message takes its level when due; a retried
// message keeps it; a dead letter keeps it, and its replay is handed out
// at that level again.
func (s *suite) testPriorityKept(t *testing.T) {
	s.need(t, FeaturePriority)
	c := s.client(t)
	q := s.queue(t)
	enqueueLevel(t, c, q, 0, 10)
	const delay = 300 * time.Millisecond
	at := time.Now()
	late, err := c.Enqueue(ctxTimeout(t, 10*time.Second), q, fila.Message{Kind: "level.3", Priority: 3, Delay: delay})
	if err != nil {
		t.Fatalf("Enqueue of a delayed message: %v", err)
	}
	s.waitDue(t, c, q, at.Add(delay))
	if s.has(FeatureStats) {
		// Due, the delayed message counts as ready at its level.
		want := []int64{10, 0, 0, 1}
		st := s.waitStats(t, c, q, func(st fila.Stats) bool { return st.Ready == 11 })
		if st.ReadyByPriority != nil && !slices.Equal(st.ReadyByPriority, want) {
			t.Errorf("QueueStats once the delayed message was due = %+v; want ReadyByPriority %v (or nil where the driver does not count levels)", st, want)
		}
	}
	d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if d.ID != late || d.Priority != 3 {
		t.Fatalf("once the delayed message of level 3 was due, the next receive got %s of level %d; want %s", d.ID, d.Priority, late)
	}

	// Retry: the message comes back ahead of the backlog, at its level.
	if err := d.Retry(ctxTimeout(t, 10*time.Second), 0, "again"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	d = receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if d.ID != late || d.Priority != 3 || d.Attempt != 2 {
		t.Fatalf("after Retry the next receive got %s of level %d attempt %d; want %s at level 3, attempt 2", d.ID, d.Priority, d.Attempt, late)
	}
	if !s.has(FeatureDeadLetters) {
		return
	}
	if err := d.Dead(ctxTimeout(t, 10*time.Second), "to the dead letters"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	page, err := c.DeadList(ctxTimeout(t, 10*time.Second), q, fila.DeadListParams{IDs: []string{late}})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].Priority != 3 {
		t.Fatalf("DeadList of the dead message = %+v, %v; want it at level 3", page.Letters, err)
	}
	if n, err := c.DeadReplay(ctxTimeout(t, 10*time.Second), q, fila.DeadFilter{IDs: []string{late}}); err != nil || n != 1 {
		t.Fatalf("DeadReplay = %d, %v; want 1", n, err)
	}
	d = receiveOne(t, c, q, 30*time.Second, 10*time.Second)
	if d.ID != late || d.Priority != 3 {
		t.Fatalf("after the replay the next receive got %s of level %d; want %s at level 3", d.ID, d.Priority, late)
	}
}

// waitDue waits until a message delayed until due is ready: by the queue's
// stats where the driver counts them, else until due and the harness's
// wake-up bound have passed.
func (s *suite) waitDue(t *testing.T, c *fila.Client, q string, due time.Time) {
	t.Helper()
	if !s.has(FeatureStats) {
		time.Sleep(time.Until(due) + s.h.WakeupBound)
		return
	}
	ctx := ctxTimeout(t, 30*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.QueueStats(ctx, q)
		if err == nil && st.Delayed == 0 && time.Now().After(due) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the delayed message of %s was not due within 30 s: %+v, %v", q, st, err)
		case <-tick.C:
		}
	}
}

// waitStats polls q's stats until ok holds (a broker may count a message
// that moves between its structures late, as RabbitMQ does one that leaves
// a delay queue), and returns them; it fails the test after 10 s.
func (s *suite) waitStats(t *testing.T, c *fila.Client, q string, ok func(fila.Stats) bool) fila.Stats {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.QueueStats(ctx, q)
		if err == nil && ok(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the stats of %s did not reach the expected counts within 10 s: %+v, %v", q, st, err)
		case <-tick.C:
		}
	}
}

// testPriorityBadInput: a level outside 0..MaxPriority is ErrInvalid and
// stores nothing, on every driver; a driver without priorities refuses any
// level above 0 with ErrUnsupported, and one that has them does not.
func (s *suite) testPriorityBadInput(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 10*time.Second)
	for _, p := range []int{-1, fila.MaxPriority + 1} {
		_, err := c.EnqueueBatch(ctx, q, []fila.Message{{Kind: "ok"}, {Kind: "bad", Priority: p}})
		wantErr(t, fmt.Sprintf("EnqueueBatch with priority %d", p), err, fila.ErrInvalid)
	}
	_, err := c.Enqueue(ctx, q, fila.Message{Kind: "level.1", Priority: 1})
	if s.has(FeaturePriority) {
		if err != nil {
			t.Fatalf("Enqueue at level 1: %v", err)
		}
		d := receiveOne(t, c, q, 30*time.Second, 10*time.Second)
		if d.Kind != "level.1" || d.Priority != 1 {
			t.Errorf("the only stored message is %s of level %d; want level.1 of level 1", d.Kind, d.Priority)
		}
		ack(t, d)
	} else {
		wantErr(t, "Enqueue at level 1 on a driver without priorities", err, fila.ErrUnsupported)
	}
	s.expectNone(t, c, q, 300*time.Millisecond, "a queue whose bad enqueues were refused")
}

// ack acks d or fails the test.
func ack(t *testing.T, d *fila.Delivery) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack(%s): %v", d.ID, err)
	}
}
