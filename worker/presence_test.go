package worker_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/worker"
)

// testPresence: a running worker is listed in each queue it serves with its
// settings, renews its records, and is gone once Run returned, before its
// records would expire.
func testPresence(t *testing.T, c *fila.Client) {
	q, other := newQueue(t, c), newQueue(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := worker.PresenceList(ctx, c, q); errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the driver cannot list marks: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	cfg := worker.Config{
		Queues:   map[string]worker.QueueConfig{q: {Concurrency: 3}, other: {Concurrency: 2}},
		Presence: time.Second, // records live 3s: no load makes one expire here
	}
	before := time.Now()
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(context.Context, *fila.Delivery) error { return nil })
	})
	list := func(queue string) []worker.Presence {
		t.Helper()
		ps, err := worker.PresenceList(ctx, c, queue)
		if err != nil {
			t.Fatalf("PresenceList(%s): %v", queue, err)
		}
		return ps
	}
	var got worker.Presence
	// The records of the two queues are written one after the other.
	waitFor(t, "the worker's presence records", func() bool {
		ps := list(q)
		if len(ps) == 1 {
			got = ps[0]
		}
		return len(ps) == 1 && len(list(other)) == 1
	})
	host, _ := os.Hostname()
	if got.ID == "" || got.Host != host || got.PID != os.Getpid() || got.Concurrency != 3 || got.Shared != 0 ||
		got.Started.Before(before.Truncate(time.Millisecond)) || got.Started.After(time.Now()) {
		t.Errorf("presence in %s = %+v; want host %q, pid %d, concurrency 3, started after %v", q, got, host, os.Getpid(), before)
	}
	if ps := list(other); len(ps) != 1 || ps[0].ID != got.ID || ps[0].Concurrency != 2 {
		t.Errorf("presence in %s = %+v; want the same worker with concurrency 2", other, ps)
	}
	// Renewed: a record deleted behind the worker's back comes back (with
	// no bound on how late a renewal may be on a loaded machine).
	names, err := c.Driver().(backend.MarkLister).MarkList(ctx, q, "worker/")
	if err != nil || len(names) != 1 {
		t.Fatalf("MarkList = %q, %v; want one record", names, err)
	}
	if err := c.Driver().(backend.Marker).MarkDelete(ctx, q, names[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the record to be renewed", func() bool {
		ps := list(q)
		return len(ps) == 1 && ps[0] == got
	})
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// A worker whose records would live three minutes deletes them as Run
	// returns.
	cfg.Presence = time.Minute
	r = start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(context.Context, *fila.Delivery) error { return nil })
	})
	waitFor(t, "the second worker's presence records", func() bool {
		ps, ps2 := list(q), list(other)
		return len(ps) == 1 && ps[0].ID != got.ID && len(ps2) == 1
	})
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, queue := range []string{q, other} {
		if ps := list(queue); len(ps) != 0 {
			t.Errorf("presence in %s after Run returned = %+v; want none", queue, ps)
		}
	}
}

func TestPresenceListBadInput(t *testing.T) {
	c := memClient(t)
	ctx := context.Background()
	if _, err := worker.PresenceList(ctx, c, "bad queue name"); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("PresenceList(bad name) = %v; want ErrInvalid", err)
	}
	if _, err := worker.PresenceList(ctx, nil, "q"); err == nil {
		t.Error("PresenceList(nil client) = nil error")
	}
	// Records are anybody's marks: control characters are not passed on,
	// and what cannot be read is skipped.
	m := c.Driver().(backend.Marker)
	for _, name := range []string{
		"worker/ab?h=%1B%5B31mevil%07&p=7&c=2&t=1000",
		"worker/noquery",
		"worker/?h=x&t=1",
		"worker/cd?h=x&t=notanumber",
	} {
		if _, err := m.MarkSet(ctx, "q", name, time.Time{}, false); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := worker.PresenceList(ctx, c, "q")
	if err != nil {
		t.Fatal(err)
	}
	want := worker.Presence{ID: "ab", Host: "\uFFFD[31mevil\uFFFD", PID: 7, Concurrency: 2, Started: time.UnixMilli(1000)}
	if len(ps) != 1 || ps[0] != want {
		t.Errorf("PresenceList = %+v; want only %+v", ps, want)
	}
}

func TestPresenceDisabled(t *testing.T) {
	c := memClient(t)
	q := newQueue(t, c)
	var rec recorder
	cfg := worker.Config{Queues: map[string]worker.QueueConfig{q: {}}, Presence: -1}
	rec.hook(&cfg)
	r := start(t, c, cfg, func(w *worker.Worker) {
		w.HandleFunc("job", func(context.Context, *fila.Delivery) error { return nil })
	})
	// Once a job ran, a record would have been written long ago (the first
	// goes out as Run starts); none may show for a while after.
	enqueue(t, c, q, fila.Message{Kind: "job"})
	rec.waitEnds(t, 1)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if ps, err := worker.PresenceList(context.Background(), c, q); err != nil || len(ps) != 0 {
			t.Fatalf("PresenceList of a worker with Presence -1 = %+v, %v; want none", ps, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleList: the schedules of running workers are listed in their
// queue with their settings, last and next tick; a schedule's record stays
// when one of its processes stops (the others still run it).
func TestScheduleList(t *testing.T) {
	c := memClient(t)
	ctx := context.Background()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	cfg := worker.Config{
		Periodic: []worker.Periodic{
			{Name: "tick", Queue: "jobs", Every: time.Second, Message: fila.Message{Kind: "tick.kind"}},
			{Name: "daily", Queue: "jobs", Cron: "30 9 * * *", Location: paris, Message: fila.Message{Kind: "daily.kind"}},
		},
		Presence: time.Minute,
	}
	r := start(t, c, cfg, nil)
	var got []worker.Schedule
	waitFor(t, "both schedules with a last tick", func() bool {
		got, err = worker.ScheduleList(ctx, c, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 2 && !got[1].Last.IsZero()
	})
	now := time.Now()
	daily, tick := got[0], got[1]
	if daily.Name != "daily" || daily.Cron != "30 9 * * *" || daily.Location != "Europe/Paris" || daily.Kind != "daily.kind" || daily.Every != 0 {
		t.Errorf("daily = %+v", daily)
	}
	if n := daily.Next.In(paris); n.Hour() != 9 || n.Minute() != 30 || !n.After(now) || n.Sub(now) > 25*time.Hour {
		t.Errorf("daily's next tick = %v; want the next 9:30 in Paris", n)
	}
	if tick.Name != "tick" || tick.Every != time.Second || tick.Cron != "" || tick.Kind != "tick.kind" {
		t.Errorf("tick = %+v", tick)
	}
	if !tick.Next.After(tick.Last) || tick.Next.Sub(now) > time.Second || now.Sub(tick.Last) > 3*time.Second || tick.Last.UnixNano()%int64(time.Second) != 0 {
		t.Errorf("tick: last %v, next %v at %v; want whole seconds around now", tick.Last, tick.Next, now)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got, err := worker.ScheduleList(ctx, c, "jobs"); err != nil || len(got) != 2 {
		t.Errorf("after one process stopped: %+v, %v; want both schedules still listed", got, err)
	}
	if _, err := worker.ScheduleList(ctx, c, "bad name"); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("ScheduleList(bad name) = %v; want ErrInvalid", err)
	}
}

// A host name that escapes to more than a mark holds is cut to fit.
func TestPresenceLongHost(t *testing.T) {
	name := worker.PresenceName(worker.Presence{ID: "0123456789abcdef", Host: strings.Repeat("é", 100), PID: 1, Concurrency: 1, Started: time.UnixMilli(1)})
	if len(name) > backend.MaxMarkName {
		t.Errorf("presence mark name of %d bytes; the most is %d", len(name), backend.MaxMarkName)
	}
	if !strings.Contains(name, "%C3%A9%C3%A9") {
		t.Errorf("the host is gone from %q", name)
	}
}
