package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testMessageList: a queue's pending messages listed by state, paged and
// found by id, with what a dashboard shows of them, changing nothing
// (contract: message-list).
func (s *suite) testMessageList(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	if !s.has(FeatureMessageList) {
		_, err := c.MessageList(ctx, q, fila.MessageListParams{State: fila.StateReady})
		wantErr(t, "MessageList on a driver without message listing", err, fila.ErrUnsupported)
		s.need(t, FeatureMessageList)
	}
	start := time.Now()
	// One leased message and one retried into the future, each alone in
	// the queue when it is received.
	leasedID := enqueue(t, c, q, fila.Message{Kind: "leased", Body: []byte("L")})
	leased := receiveOne(t, c, q, time.Minute, 10*time.Second)
	retriedID := enqueue(t, c, q, fila.Message{Kind: "retried", Body: []byte("R")})
	retried := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if leased.ID != leasedID || retried.ID != retriedID {
		t.Fatalf("received %s and %s, want %s and %s", leased.ID, retried.ID, leasedID, retriedID)
	}
	if err := retried.Retry(ctx, time.Hour, "boom <b>"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	levels := []int{0, 0, 0, 0}
	if s.has(FeaturePriority) {
		levels = []int{0, 2, 0, 1}
	}
	var ready []string
	for i, l := range levels {
		m := fila.Message{Kind: "ready", Body: []byte(fmt.Sprintf("ready %d", i)), Priority: l}
		if i == 0 {
			m.Headers = map[string]string{"trace": "t-1"}
		}
		ready = append(ready, enqueue(t, c, q, m))
	}
	var delayed []string
	for i := 0; i < 2; i++ {
		delayed = append(delayed, enqueue(t, c, q, fila.Message{Kind: "delayed", Body: []byte(fmt.Sprintf("delayed %d", i)), Delay: time.Hour}))
	}
	list := func(p fila.MessageListParams) []fila.PendingMessage {
		t.Helper()
		var all []fila.PendingMessage
		seen := map[string]bool{}
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("MessageList(%s, Limit %d) paging does not end", p.State, p.Limit)
			}
			page, err := c.MessageList(ctx, q, p)
			if err != nil {
				t.Fatalf("MessageList(%s): %v", p.State, err)
			}
			if p.Limit > 0 && len(page.Messages) > p.Limit {
				t.Errorf("MessageList(Limit %d) returned %d", p.Limit, len(page.Messages))
			}
			for _, m := range page.Messages {
				if seen[m.ID] {
					t.Errorf("MessageList(%s) listed %s twice", p.State, m.ID)
				}
				seen[m.ID] = true
			}
			all = append(all, page.Messages...)
			if page.Next == "" {
				return all
			}
			p.Cursor = page.Next
		}
	}
	ids := func(ms []fila.PendingMessage) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.ID
		}
		return out
	}
	// Ready: every one, with what was enqueued, the same one page or
	// paged one at a time.
	gotReady := list(fila.MessageListParams{State: fila.StateReady})
	if got, want := slices.Sorted(slices.Values(ids(gotReady))), slices.Sorted(slices.Values(ready)); !slices.Equal(got, want) {
		t.Fatalf("ready messages listed: %v; want %v", got, want)
	}
	if paged := ids(list(fila.MessageListParams{State: fila.StateReady, Limit: 1})); !slices.Equal(paged, ids(gotReady)) {
		t.Errorf("ready messages paged one at a time: %v; want %v as in one page", paged, ids(gotReady))
	}
	for _, m := range gotReady {
		i := slices.Index(ready, m.ID)
		if m.State != fila.StateReady || m.Queue != q || m.Kind != "ready" || string(m.Body) != fmt.Sprintf("ready %d", i) ||
			m.Attempts != 0 || m.Priority != levels[i] || m.LastError != "" {
			t.Errorf("ready message %s: state %s queue %q kind %q body %q attempts %d level %d last error %q; want ready, %q, ready, %q, 0, %d, none",
				m.ID, m.State, m.Queue, m.Kind, m.Body, m.Attempts, m.Priority, m.LastError, q, fmt.Sprintf("ready %d", i), levels[i])
		}
		if (i == 0) != (m.Headers["trace"] == "t-1") || (i != 0 && len(m.Headers) != 0) {
			t.Errorf("ready message %d has headers %v", i, m.Headers)
		}
		if m.Due.Before(start.Add(-time.Minute)) || m.Due.After(time.Now().Add(time.Minute)) {
			t.Errorf("ready message %s is due %v; want about now (%v)", m.ID, m.Due, start)
		}
		if m.EnqueuedAt.Before(start.Add(-time.Minute)) || m.EnqueuedAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("ready message %s was enqueued at %v; want about now", m.ID, m.EnqueuedAt)
		}
	}
	// Delayed: the two delays and the retried message with its reason.
	gotDelayed := list(fila.MessageListParams{State: fila.StateDelayed, Limit: 2})
	if got, want := slices.Sorted(slices.Values(ids(gotDelayed))), slices.Sorted(slices.Values(append([]string{retriedID}, delayed...))); !slices.Equal(got, want) {
		t.Fatalf("delayed messages listed: %v; want %v", got, want)
	}
	for _, m := range gotDelayed {
		if m.State != fila.StateDelayed || m.Due.Before(start.Add(50*time.Minute)) || m.Due.After(time.Now().Add(70*time.Minute)) {
			t.Errorf("delayed message %s: state %s due %v; want delayed, due in about an hour", m.ID, m.State, m.Due)
		}
		if m.ID == retriedID && (m.LastError != "boom <b>" || m.Attempts != 1 || string(m.Body) != "R") {
			t.Errorf("retried message: last error %q attempts %d body %q; want %q, 1, R", m.LastError, m.Attempts, m.Body, "boom <b>")
		}
		if m.ID != retriedID && m.Attempts != 0 {
			t.Errorf("delayed message %s: attempts %d; want 0", m.ID, m.Attempts)
		}
	}
	// Leased: the running one, with its deadline.
	gotLeased := list(fila.MessageListParams{State: fila.StateLeased})
	if len(gotLeased) != 1 || gotLeased[0].ID != leasedID {
		t.Fatalf("leased messages listed: %v; want [%s]", ids(gotLeased), leasedID)
	}
	if m := gotLeased[0]; m.Attempts != 1 || string(m.Body) != "L" || m.Due.Sub(leased.Deadline()).Abs() > 5*time.Second {
		t.Errorf("leased message: attempts %d body %q due %v; want 1, L, its deadline %v", m.Attempts, m.Body, m.Due, leased.Deadline())
	}
	// By id, whatever the state; ids the queue does not hold match nothing.
	found := list(fila.MessageListParams{IDs: []string{delayed[1], leasedID, ready[2], "0190d3c4-0000-7000-8000-000000000000", "not-a-uuid"}})
	states := map[string]fila.MessageState{}
	for _, m := range found {
		states[m.ID] = m.State
	}
	if want := map[string]fila.MessageState{delayed[1]: fila.StateDelayed, leasedID: fila.StateLeased, ready[2]: fila.StateReady}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("MessageList(IDs) found %v; want %v", states, want)
	}
	if got := list(fila.MessageListParams{State: fila.StateReady, IDs: []string{delayed[0], ready[1]}}); !slices.Equal(ids(got), []string{ready[1]}) {
		t.Errorf("MessageList(ready, IDs) = %v; want only the ready one %s", ids(got), ready[1])
	}
	for _, m := range list(fila.MessageListParams{State: fila.StateReady, WithoutBodies: true}) {
		if m.Body != nil || m.Kind != "ready" {
			t.Errorf("MessageList(WithoutBodies): %s has body %q kind %q; want no body, kind ready", m.ID, m.Body, m.Kind)
		}
	}
	// Bad input is refused.
	for _, p := range []fila.MessageListParams{{State: "running"}, {}, {State: fila.StateReady, Limit: -1}, {IDs: []string{""}}} {
		_, err := c.MessageList(ctx, q, p)
		wantErr(t, fmt.Sprintf("MessageList(%+v)", p), err, fila.ErrInvalid)
	}
	_, err := c.MessageList(ctx, q, fila.MessageListParams{State: fila.StateReady, Cursor: "not a cursor!"})
	wantErr(t, "MessageList with a cursor the driver did not return", err, fila.ErrInvalid)
	// Listing changed nothing: the lease still holds, and the ready
	// messages come out in the order they were listed.
	if err := leased.Ack(ctx); err != nil {
		t.Errorf("Ack of the leased message after the listings: %v", err)
	}
	for i, m := range gotReady {
		d := receiveOne(t, c, q, time.Minute, 10*time.Second)
		if d.ID != m.ID {
			t.Errorf("receive %d after the listing got %s; want %s, the listing's order", i, d.ID, m.ID)
		}
		if err := d.Ack(ctx); err != nil {
			t.Errorf("Ack: %v", err)
		}
	}
}
