package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testDeadLetters: list (paged, by kind), replay (one, by kind) and purge
// dead letters (contract: dead-letter-management).
func (s *suite) testDeadLetters(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	if !s.has(FeatureDeadLetters) {
		_, err := c.DeadList(ctx, q, fila.DeadListParams{})
		wantErr(t, "DeadList on a driver without dead-letter management", err, fila.ErrUnsupported)
		s.need(t, FeatureDeadLetters)
	}
	kinds := []string{"a", "a", "b", "b", "b"}
	reasons := map[string]string{}
	kindOf := map[string]string{}
	for i, k := range kinds {
		id := enqueue(t, c, q, fila.Message{Kind: k, Body: []byte(fmt.Sprint(i))})
		d := receiveOne(t, c, q, time.Minute, 10*time.Second)
		if d.ID != id {
			t.Fatalf("received %s, want %s", d.ID, id)
		}
		reasons[id] = fmt.Sprintf("reason %d", i)
		kindOf[id] = k
		if err := d.Dead(ctx, reasons[id]); err != nil {
			t.Fatalf("Dead: %v", err)
		}
	}
	// Page through all of them two at a time, oldest first.
	var all []fila.DeadLetter
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("DeadList paging does not end")
		}
		page, err := c.DeadList(ctx, q, fila.DeadListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatalf("DeadList: %v", err)
		}
		if len(page.Letters) > 2 {
			t.Errorf("DeadList(Limit 2) returned %d", len(page.Letters))
		}
		all = append(all, page.Letters...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(all) != len(kinds) {
		t.Fatalf("DeadList pages hold %d dead letters, want %d", len(all), len(kinds))
	}
	for i, l := range all {
		if l.Reason != reasons[l.ID] || l.Kind != kindOf[l.ID] || l.Attempts != 1 || l.Queue != q {
			t.Errorf("dead letter %s: reason %q kind %q attempts %d queue %q; want %q %q 1 %q",
				l.ID, l.Reason, l.Kind, l.Attempts, l.Queue, reasons[l.ID], kindOf[l.ID], q)
		}
		if string(l.Body) != fmt.Sprint(i) {
			t.Errorf("dead letter %d has body %q: not oldest first", i, l.Body)
		}
	}
	page, err := c.DeadList(ctx, q, fila.DeadListParams{Kind: "a"})
	if err != nil {
		t.Fatalf("DeadList(kind a): %v", err)
	}
	if len(page.Letters) != 2 {
		t.Errorf("DeadList(kind a) returned %d, want 2", len(page.Letters))
	}
	// By id: only those letters, with the kind and paging still applied;
	// an id the queue does not hold (or that is not even a UUID) matches
	// nothing.
	byID := []string{all[4].ID, all[1].ID, "0190d3c4-0000-7000-8000-000000000000", "not-a-uuid"}
	var picked []string
	cursor = ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("DeadList(IDs, Limit 1) paging does not end")
		}
		page, err = c.DeadList(ctx, q, fila.DeadListParams{IDs: byID, Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatalf("DeadList(IDs): %v", err)
		}
		for _, l := range page.Letters {
			picked = append(picked, l.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if !slices.Equal(picked, []string{all[1].ID, all[4].ID}) {
		t.Errorf("DeadList(IDs) paged %v, want %v (oldest first)", picked, []string{all[1].ID, all[4].ID})
	}
	if page, err = c.DeadList(ctx, q, fila.DeadListParams{IDs: byID, Kind: "b"}); err != nil || len(page.Letters) != 1 || page.Letters[0].ID != all[4].ID {
		t.Errorf("DeadList(IDs, kind b) = %d letters, %v; want only %s", len(page.Letters), err, all[4].ID)
	}
	// Without bodies: everything else as before.
	if page, err = c.DeadList(ctx, q, fila.DeadListParams{WithoutBodies: true}); err != nil || len(page.Letters) != len(kinds) {
		t.Errorf("DeadList(WithoutBodies) = %d letters, %v; want %d", len(page.Letters), err, len(kinds))
	} else {
		for i, l := range page.Letters {
			if l.Body != nil || l.ID != all[i].ID || l.Kind != all[i].Kind || l.Reason != all[i].Reason || l.Attempts != all[i].Attempts {
				t.Errorf("DeadList(WithoutBodies) letter %d = %s kind %q reason %q attempts %d body %q; want %s %q %q %d and no body",
					i, l.ID, l.Kind, l.Reason, l.Attempts, l.Body, all[i].ID, all[i].Kind, all[i].Reason, all[i].Attempts)
			}
		}
	}
	if page, err = c.DeadList(ctx, q, fila.DeadListParams{IDs: []string{}}); err != nil || len(page.Letters) != 0 {
		t.Errorf("DeadList(empty IDs) = %d letters, %v; want none", len(page.Letters), err)
	}
	_, err = c.DeadList(ctx, q, fila.DeadListParams{IDs: []string{""}})
	wantErr(t, "DeadList with an empty id", err, fila.ErrInvalid)

	// Replay one by id: ready again, attempts reset.
	one := all[0].ID
	n, err := c.DeadReplay(ctx, q, fila.DeadFilter{IDs: []string{one}})
	if err != nil || n != 1 {
		t.Fatalf("DeadReplay(one id) = %d, %v; want 1", n, err)
	}
	d := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+time.Second)
	if d.ID != one || d.Attempt != 1 || d.Kind != "a" || string(d.Body) != "0" {
		t.Errorf("replayed delivery %s attempt %d kind %q body %q; want %s attempt 1 kind a body 0", d.ID, d.Attempt, d.Kind, d.Body, one)
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack of replayed: %v", err)
	}

	// Replay by kind.
	n, err = c.DeadReplay(ctx, q, fila.DeadFilter{Kind: "b"})
	if err != nil || n != 3 {
		t.Fatalf("DeadReplay(kind b) = %d, %v; want 3", n, err)
	}
	for id, dd := range drain(t, c, q, 3, s.h.RedeliveryBound+10*time.Second) {
		if kindOf[id] != "b" || dd.Attempt != 1 {
			t.Errorf("replayed %s has kind %q attempt %d, want kind b attempt 1", id, dd.Kind, dd.Attempt)
		}
	}
	n, err = c.DeadReplay(ctx, q, fila.DeadFilter{IDs: []string{}})
	if err != nil || n != 0 {
		t.Errorf("DeadReplay of an empty id list = %d, %v; want 0, nil", n, err)
	}

	// Purge the rest.
	n, err = c.DeadPurge(ctx, q, fila.DeadFilter{})
	if err != nil || n != 1 {
		t.Errorf("DeadPurge(all) = %d, %v; want 1", n, err)
	}
	page, err = c.DeadList(ctx, q, fila.DeadListParams{})
	if err != nil || len(page.Letters) != 0 {
		t.Errorf("DeadList after purge: %d letters, %v", len(page.Letters), err)
	}
	s.expectNone(t, c, q, time.Second, "after purge")
}

// testStats: counts are exact on a quiescent queue (contract: stats).
func (s *suite) testStats(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if !s.has(FeatureStats) {
		_, err := c.QueueStats(ctx, q)
		wantErr(t, "QueueStats on a driver without stats", err, fila.ErrUnsupported)
		s.need(t, FeatureStats)
	}
	st, err := c.QueueStats(ctx, q)
	if err != nil {
		t.Fatalf("QueueStats of an unknown queue: %v", err)
	}
	if st.Ready+st.Delayed+st.Leased+st.Dead != 0 || !st.OldestReadyAt.IsZero() {
		t.Errorf("stats of an unknown queue: %+v, want zero", st)
	}
	before := time.Now()
	for i := 0; i < 4; i++ {
		enqueue(t, c, q, fila.Message{Kind: "ready"})
	}
	for i := 0; i < 2; i++ {
		enqueue(t, c, q, fila.Message{Kind: "later", Delay: time.Hour})
	}
	leased := receiveOne(t, c, q, time.Hour, 10*time.Second)
	dead := receiveOne(t, c, q, time.Hour, 10*time.Second)
	if err := dead.Dead(ctx, "stats"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	st, err = c.QueueStats(ctx, q)
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if st.Ready != 2 || st.Delayed != 2 || st.Leased != 1 || st.Dead != 1 {
		t.Errorf("stats %+v; want ready 2, delayed 2, leased 1, dead 1", st)
	}
	if s.has(FeatureOldestReady) {
		if st.OldestReadyAt.Before(before.Add(-time.Second)) || st.OldestReadyAt.After(time.Now().Add(time.Second)) {
			t.Errorf("oldest ready at %v, want between %v and now", st.OldestReadyAt, before)
		}
		if age := st.OldestReadyAge(time.Now()); age > time.Since(before)+time.Second {
			t.Errorf("oldest ready age %v, but the first message was enqueued %v ago", age, time.Since(before))
		}
	}
	if s.has(FeatureDeadByKind) {
		if st.DeadByKind["ready"] != 1 || len(st.DeadByKind) != 1 {
			t.Errorf("dead by kind %v, want map[ready:1]", st.DeadByKind)
		}
	}
	if err := leased.Ack(ctx); err != nil {
		t.Errorf("Ack: %v", err)
	}
}
