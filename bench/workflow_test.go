package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

// TestWorkflowOnMemory runs the workflow scenario at a small size on the
// in-memory driver: both kinds of chain end, each is timed and its calls
// counted, and the report has its row.
func TestWorkflowOnMemory(t *testing.T) {
	ctx := context.Background()
	s, err := newFilaSystem(ctx, "mem://bench-workflow-"+randSuffix(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	st := workflowSettings{runs: 3, steps: 4}
	cases, err := workflowScenario(ctx, "memory", []System{s}, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 1 {
		t.Fatalf("%d cases: %+v", len(cases), cases)
	}
	c := cases[0]
	if c.Runs != 3 || len(c.Plain) != 3 || len(c.Flow) != 3 || len(c.PlainCalls) != 3 || len(c.FlowCalls) != 3 {
		t.Fatalf("case %+v", c)
	}
	for i := range c.Plain {
		if c.Plain[i] <= 0 || c.Flow[i] <= 0 {
			t.Errorf("run %d: times %v and %v", i, c.Plain[i], c.Flow[i])
		}
		// A plain chain enqueues each step once; a workflow's start
		// enqueues the first, each ack but the last releases one.
		if c.PlainCalls[i] < int64(st.steps) || c.FlowCalls[i] <= c.PlainCalls[i] {
			t.Errorf("run %d: %d calls plain, %d workflow", i, c.PlainCalls[i], c.FlowCalls[i])
		}
	}
	if got := c.PlainBy["Enqueue"]; got != int64(st.runs*st.steps) {
		t.Errorf("plain chains made %d Enqueue calls; want %d", got, st.runs*st.steps)
	}
	if got := c.FlowBy["Enqueue"]; got != int64(st.runs*st.steps) {
		t.Errorf("workflow chains made %d Enqueue calls; want %d", got, st.runs*st.steps)
	}
	for _, m := range []string{"MarkSet", "MarkGet", "DeadImport"} {
		if c.FlowBy[m] == 0 || c.PlainBy[m] != 0 {
			t.Errorf("%s: %d calls in workflow chains, %d in plain ones", m, c.FlowBy[m], c.PlainBy[m])
		}
	}
	md := workflowMarkdown(cases, st)
	for _, want := range []string{"| memory | fila", "3 chains of 4 steps", "one call = one round trip", "MarkSet"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// A wrapped driver implements an optional interface exactly when the
// driver it wraps does.
func TestCountedDriverInterfaces(t *testing.T) {
	u, _ := url.Parse("mem://bench-counted-" + randSuffix())
	mem, err := memory.Open(context.Background(), u, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	type required interface {
		backend.Driver
		backend.Marker
		backend.DeadLetterer
		backend.DeadImporter
		backend.QueueDeleter
	}
	full := mem.(required)
	// RabbitMQ's shape: no mark listing, no message listing, no AckReceive.
	rabbitLike := struct{ required }{full}
	// MongoDB's shape: no AckReceive.
	mongoLike := struct {
		required
		backend.MarkLister
		backend.MessageLister
	}{full, mem.(backend.MarkLister), mem.(backend.MessageLister)}
	for _, tc := range []struct {
		name    string
		d       backend.Driver
		l, m, a bool
	}{
		{"memory", mem, true, true, true},
		{"rabbitmq-like", rabbitLike, false, false, false},
		{"mongo-like", mongoLike, true, true, false},
	} {
		n := &callCounter{n: map[string]int64{}}
		w, _, err := newCountedDriver(tc.d, n)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, l := w.(backend.MarkLister)
		_, m := w.(backend.MessageLister)
		_, a := w.(backend.AckReceiver)
		if l != tc.l || m != tc.m || a != tc.a {
			t.Errorf("%s: wrapper has MarkLister %v, MessageLister %v, AckReceiver %v; want %v, %v, %v", tc.name, l, m, a, tc.l, tc.m, tc.a)
		}
		for _, ok := range []bool{implements[backend.Marker](w), implements[backend.DeadLetterer](w), implements[backend.DeadImporter](w),
			implements[backend.QueueDeleter](w), implements[backend.Deduper](w), implements[backend.Namer](w)} {
			if !ok {
				t.Errorf("%s: the wrapper lacks a required interface", tc.name)
			}
		}
		if _, err := w.(backend.Marker).MarkSet(context.Background(), "q", "m", time.Time{}, false); err != nil {
			t.Fatal(err)
		}
		if got := n.snapshot()["MarkSet"]; got != 1 {
			t.Errorf("%s: MarkSet counted %d times", tc.name, got)
		}
	}
	// A driver without marks is refused.
	if _, _, err := newCountedDriver(struct{ backend.Driver }{mem}, &callCounter{n: map[string]int64{}}); err == nil {
		t.Error("a driver without marks was wrapped")
	}
}

func implements[T any](v any) bool { _, ok := v.(T); return ok }
