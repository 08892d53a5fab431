package redis_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/redis"
)

// MessageList over every source the Redis layout has: expired leases of
// two levels, new entries, due delayed messages not promoted yet, early
// leases (ReceiveDelayed) live, expired and due, expired and not due. The
// ready listing is the order the following Receives hand the messages out,
// paged or not, and listing changes nothing.
func TestMessageListSources(t *testing.T) { bothPaths(t, testMessageListSources) }

func testMessageListSources(t *testing.T, e *env) {
	const q = "browse"
	d := e.driver(t, redis.Options{})
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	enq := func(m fila.Message) string {
		t.Helper()
		m.Body = []byte(m.Kind)
		id, err := c.Enqueue(ctx, q, m)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// early leases: x (due, its lease expired), y (not due, its lease
	// expired), z (live)
	x := enq(fila.Message{Kind: "x", Delay: 100 * time.Millisecond})
	if ds := receiveDelayed(t, d, q, 1, 50*time.Millisecond); len(ds) != 1 || ds[0].ID != x {
		t.Fatalf("ReceiveDelayed took %v; want %s", ds, x)
	}
	y := enq(fila.Message{Kind: "y", Delay: time.Hour})
	if ds := receiveDelayed(t, d, q, 1, 50*time.Millisecond); len(ds) != 1 || ds[0].ID != y {
		t.Fatalf("ReceiveDelayed took %v; want %s", ds, y)
	}
	z := enq(fila.Message{Kind: "z", Delay: time.Hour})
	if ds := receiveDelayed(t, d, q, 1, time.Minute); len(ds) != 1 || ds[0].ID != z {
		t.Fatalf("ReceiveDelayed took %v; want %s", ds, z)
	}
	a0 := enq(fila.Message{Kind: "a0"})
	b0 := enq(fila.Message{Kind: "b0"})
	c2 := enq(fila.Message{Kind: "c2", Priority: 2})
	short := fila.ReceiveParams{Max: 1, Lease: 100 * time.Millisecond}
	if ds := receive(t, c, q, short); len(ds) != 1 || ds[0].ID != c2 {
		t.Fatalf("got %v; want %s", ids(ds), c2)
	}
	if ds := receive(t, c, q, short); len(ds) != 1 || ds[0].ID != a0 {
		t.Fatalf("got %v; want %s", ids(ds), a0)
	}
	held := receive(t, c, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
	if len(held) != 1 || held[0].ID != b0 {
		t.Fatalf("got %v; want %s", ids(held), b0)
	}
	d1 := enq(fila.Message{Kind: "d1", Priority: 1})
	e0 := enq(fila.Message{Kind: "e0"})
	f3 := enq(fila.Message{Kind: "f3", Priority: 3, Delay: 150 * time.Millisecond})
	g0 := enq(fila.Message{Kind: "g0", Delay: 150 * time.Millisecond})
	h := enq(fila.Message{Kind: "h", Delay: time.Hour})
	time.Sleep(400 * time.Millisecond)

	list := func(p fila.MessageListParams) []fila.PendingMessage {
		t.Helper()
		var all []fila.PendingMessage
		for range 50 {
			page, err := c.MessageList(ctx, q, p)
			if err != nil {
				t.Fatalf("MessageList(%+v): %v", p, err)
			}
			all = append(all, page.Messages...)
			if page.Next == "" {
				return all
			}
			p.Cursor = page.Next
		}
		t.Fatalf("MessageList(%+v) does not end", p)
		return nil
	}
	pids := func(ms []fila.PendingMessage) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.Kind
		}
		return out
	}
	// the ready order: level 2's expired lease, level 1, level 0's
	// expired lease, new entry, due delayed message, due early lease; f3
	// (level 3, due) first
	wantReady := []string{"f3", "c2", "d1", "a0", "e0", "g0", "x"}
	ready := list(fila.MessageListParams{State: fila.StateReady})
	if got := pids(ready); !slices.Equal(got, wantReady) {
		t.Fatalf("ready listed %v; want %v", got, wantReady)
	}
	for i := 1; i <= 3; i++ {
		if got := pids(list(fila.MessageListParams{State: fila.StateReady, Limit: i})); !slices.Equal(got, wantReady) {
			t.Errorf("ready paged by %d: %v; want %v", i, got, wantReady)
		}
	}
	byKind := map[string]fila.PendingMessage{}
	for _, m := range ready {
		byKind[m.Kind] = m
	}
	if m := byKind["c2"]; m.Attempts != 1 || m.Priority != 2 || string(m.Body) != "c2" || m.Due.IsZero() {
		t.Errorf("expired lease c2: %+v", m)
	}
	if m := byKind["x"]; m.Attempts != 1 || m.ID != x {
		t.Errorf("expired early lease x: %+v", m)
	}
	if m := byKind["f3"]; m.ID != f3 || m.Attempts != 0 || m.Priority != 3 {
		t.Errorf("due delayed f3: %+v", m)
	}
	delayed := list(fila.MessageListParams{State: fila.StateDelayed, Limit: 1})
	if got := pids(delayed); !slices.Equal(got, []string{"h", "y"}) {
		t.Errorf("delayed listed %v; want [h y]", got)
	}
	for _, m := range delayed {
		if m.Kind == "y" && (m.Attempts != 1 || time.Until(m.Due) < 50*time.Minute) {
			t.Errorf("expired early lease y: attempts %d due %v", m.Attempts, m.Due)
		}
	}
	leased := list(fila.MessageListParams{State: fila.StateLeased, Limit: 1})
	if got := slices.Sorted(slices.Values(pids(leased))); !slices.Equal(got, []string{"b0", "z"}) {
		t.Errorf("leased listed %v; want b0 and z", got)
	}
	for _, m := range leased {
		if m.Attempts != 1 || time.Until(m.Due) < 50*time.Second || m.State != fila.StateLeased {
			t.Errorf("leased %s: attempts %d due %v", m.Kind, m.Attempts, m.Due)
		}
	}
	found := list(fila.MessageListParams{IDs: []string{x, y, z, h, c2, e0, b0}, Limit: 2, WithoutBodies: true})
	states := map[string]fila.MessageState{}
	for _, m := range found {
		states[m.Kind] = m.State
		if m.Body != nil || m.Kind == "" || m.EnqueuedAt.IsZero() {
			t.Errorf("without bodies: %+v", m)
		}
	}
	if want := map[string]fila.MessageState{"x": fila.StateReady, "y": fila.StateDelayed, "z": fila.StateLeased, "h": fila.StateDelayed,
		"c2": fila.StateReady, "e0": fila.StateReady, "b0": fila.StateLeased}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("by ids: %v; want %v", states, want)
	}
	// a cursor of another state, or altered, is refused
	page, err := c.MessageList(ctx, q, fila.MessageListParams{State: fila.StateReady, Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("MessageList: %v, next %q", err, page.Next)
	}
	for _, p := range []fila.MessageListParams{
		{State: fila.StateDelayed, Cursor: page.Next},
		{State: fila.StateReady, Cursor: page.Next + "x"},
		{State: fila.StateReady, Cursor: "WyJyZWFkeSIsIjIiLCIoIiwiIiwiIl0"}, // ["ready","2","(","",""]
	} {
		if _, err := c.MessageList(ctx, q, p); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("MessageList(%+v) = %v; want ErrInvalid", p, err)
		}
	}
	// nothing changed: the receives follow the listing
	for i, k := range wantReady {
		ds := receive(t, c, q, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		if len(ds) != 1 || ds[0].Kind != k {
			t.Fatalf("receive %d got %v; want %s", i, ids(ds), k)
		}
	}
	if err := held[0].Ack(ctx); err != nil {
		t.Errorf("Ack of the leased message after the listings: %v", err)
	}
	_ = d1
	_ = g0
}
