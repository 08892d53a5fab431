package conformance

import (
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testQueueList: every queue holding a ready, delayed or leased message or a
// dead letter is listed (other tests' queues may be listed too), sorted (contract: queue-admin).
func (s *suite) testQueueList(t *testing.T) {
	c := s.client(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if !s.has(FeatureQueueList) {
		_, err := c.QueueList(ctx)
		wantErr(t, "QueueList on a driver without queue listing", err, fila.ErrUnsupported)
		s.need(t, FeatureQueueList)
	}
	ready, delayed, leased, dead := s.queue(t)+"r", s.queue(t)+"d", s.queue(t)+"l", s.queue(t)+"x"
	enqueue(t, c, ready, fila.Message{Kind: "ready"})
	enqueue(t, c, delayed, fila.Message{Kind: "later", Delay: time.Hour})
	enqueue(t, c, leased, fila.Message{Kind: "leased"})
	receiveOne(t, c, leased, time.Hour, 10*time.Second)
	enqueue(t, c, dead, fila.Message{Kind: "dead"})
	if err := receiveOne(t, c, dead, time.Hour, 10*time.Second).Dead(ctx, "listed"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	qs, err := c.QueueList(ctx)
	if err != nil {
		t.Fatalf("QueueList: %v", err)
	}
	if !slices.IsSorted(qs) {
		t.Errorf("QueueList is not sorted: %v", qs)
	}
	for _, q := range []string{ready, delayed, leased, dead} {
		if _, found := slices.BinarySearch(qs, q); !found {
			t.Errorf("QueueList lacks %s (%d queues listed)", q, len(qs))
		}
	}
}

// testQueueDelete: without Force a queue that holds anything is refused and
// keeps it all; with Force everything goes (ready, delayed, leased, dead,
// dedup keys), an old lease is lost, and the queue works again at once (contract: queue-admin).
func (s *suite) testQueueDelete(t *testing.T) {
	c := s.client(t)
	other := s.client(t)
	q, bystander := s.queue(t), s.queue(t)+"b"
	ctx := ctxTimeout(t, 60*time.Second)
	if !s.has(FeatureQueueDelete) {
		err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true})
		wantErr(t, "QueueDelete on a driver without queue deletion", err, fila.ErrUnsupported)
		s.need(t, FeatureQueueDelete)
	}
	if err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete of a queue that never held anything: %v", err)
	}
	if err := c.QueueDelete(ctx, "", fila.QueueDeleteParams{Force: true}); err == nil {
		t.Errorf("QueueDelete of an empty name succeeded")
	} else {
		wantErr(t, "QueueDelete of an empty name", err, fila.ErrInvalid)
	}
	keep := enqueue(t, c, bystander, fila.Message{Kind: "keep"})
	dk := fila.Message{Kind: "ready"}
	if s.has(FeatureDedup) {
		dk.DedupKey = "dk"
	}
	enqueue(t, c, q, dk)
	enqueue(t, c, q, fila.Message{Kind: "later", Delay: time.Hour})
	enqueue(t, c, q, fila.Message{Kind: "leased"})
	enqueue(t, c, q, fila.Message{Kind: "dead"})
	var held *fila.Delivery
	for i := 0; i < 3; i++ {
		d := receiveOne(t, c, q, time.Hour, 10*time.Second)
		switch d.Kind {
		case "leased":
			held = d
		case "dead":
			if err := d.Dead(ctx, "deleted with its queue"); err != nil {
				t.Fatalf("Dead: %v", err)
			}
		default:
			if err := d.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
	}
	if held == nil {
		t.Fatalf("the leased message was not received")
	}
	if s.has(FeatureStats) {
		err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{})
		wantErr(t, "QueueDelete without Force of a queue holding messages", err, fila.ErrQueueNotEmpty)
		if st, err := c.QueueStats(ctx, q); err != nil {
			t.Fatalf("QueueStats: %v", err)
		} else if st.Ready != 1 || st.Delayed != 1 || st.Leased != 1 || st.Dead != 1 {
			t.Errorf("after a refused QueueDelete stats are %+v; want ready, delayed, leased and dead 1 each", st)
		}
	}
	if err := other.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
	wantErr(t, "Ack of a delivery leased from a deleted queue", held.Ack(ctx), fila.ErrLeaseLost)
	s.expectNone(t, c, q, time.Second, "after QueueDelete")
	if s.has(FeatureStats) {
		st, err := c.QueueStats(ctx, q)
		if err != nil {
			t.Fatalf("QueueStats: %v", err)
		}
		if st.Ready+st.Delayed+st.Leased+st.Dead != 0 {
			t.Errorf("stats after QueueDelete: %+v, want zero", st)
		}
		if err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{}); err != nil {
			t.Errorf("QueueDelete without Force of an empty queue: %v", err)
		}
	}
	if s.has(FeatureDeadLetters) {
		page, err := c.DeadList(ctx, q, fila.DeadListParams{})
		if err != nil {
			t.Fatalf("DeadList: %v", err)
		}
		if len(page.Letters) != 0 {
			t.Errorf("%d dead letters left after QueueDelete", len(page.Letters))
		}
	}
	if s.has(FeatureQueueList) {
		qs, err := c.QueueList(ctx)
		if err != nil {
			t.Fatalf("QueueList: %v", err)
		}
		if _, found := slices.BinarySearch(qs, q); found {
			t.Errorf("QueueList still lists the deleted queue %s", q)
		}
	}
	// The queue works again at once, its dedup key free; the bystander kept
	// its message.
	again := enqueue(t, c, q, dk)
	if d := receiveOne(t, c, q, time.Minute, 10*time.Second); d.ID != again {
		t.Errorf("after QueueDelete received %s, want the new message %s", d.ID, again)
	} else if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
	if d := receiveOne(t, c, bystander, time.Minute, 10*time.Second); d.ID != keep {
		t.Errorf("the other queue lost its message: received %s, want %s", d.ID, keep)
	} else if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
