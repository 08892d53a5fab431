package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// marker opens a driver instance of its own and returns it as a
// backend.Marker, skipping t when the harness declares marks missing.
func (s *suite) marker(t *testing.T) backend.Marker {
	t.Helper()
	s.need(t, FeatureMarks)
	c := s.client(t)
	m, ok := c.Driver().(backend.Marker)
	if !ok {
		t.Fatalf("the driver does not implement backend.Marker")
	}
	return m
}

// markNames are names a Marker must store as they are: the portable layer
// builds them from ids, dedup keys and schedule names.
var markNames = []string{
	"pause",
	"cancel/0190c4e2-7a1b-7c3d-8e4f-5a6b7c8d9e0f",
	"unique/order 42: paid/ünïcödé ☃",
	"periodic/report/1764576000000000000",
	"dots.and-dashes_and/slashes/",
	strings.Repeat("x", backend.MaxMarkName),
	"UPPER/lower",
	"*[?]{}%_\\'\"$",
}

func wantMark(t *testing.T, m backend.Marker, ctx context.Context, q, name string, want bool, when string) {
	t.Helper()
	got, err := m.MarkGet(ctx, q, name)
	if err != nil {
		t.Errorf("%s: MarkGet(%.40q): %v", when, name, err)
		return
	}
	if got != want {
		t.Errorf("%s: MarkGet(%.40q) = %v, want %v", when, name, got, want)
	}
}

// testMarks: marks are set, replaced, read and deleted by name, per queue,
// and onlyNew refuses a live mark (contract: marks).
func (s *suite) testMarks(t *testing.T) {
	m := s.marker(t)
	other := s.marker(t) // another process sees the same marks
	q, q2 := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	for _, name := range markNames {
		wantMark(t, m, ctx, q, name, false, "before MarkSet")
		ok, err := m.MarkSet(ctx, q, name, time.Time{}, true)
		if err != nil || !ok {
			t.Errorf("MarkSet(%.40q, onlyNew) of a new mark = %v, %v; want true", name, ok, err)
			continue
		}
		wantMark(t, other, ctx, q, name, true, "after MarkSet, from another driver instance")
		wantMark(t, m, ctx, q2, name, false, "after MarkSet on another queue")
		ok, err = other.MarkSet(ctx, q, name, time.Now().Add(time.Hour), true)
		if err != nil || ok {
			t.Errorf("MarkSet(%.40q, onlyNew) of a live mark = %v, %v; want false", name, ok, err)
		}
		ok, err = other.MarkSet(ctx, q, name, time.Now().Add(time.Hour), false)
		if err != nil || !ok {
			t.Errorf("MarkSet(%.40q) replacing a live mark = %v, %v; want true", name, ok, err)
		}
		wantMark(t, m, ctx, q, name, true, "after replacing it")
	}
	for _, name := range markNames {
		if err := m.MarkDelete(ctx, q, name); err != nil {
			t.Errorf("MarkDelete(%.40q): %v", name, err)
		}
		wantMark(t, other, ctx, q, name, false, "after MarkDelete")
		if err := m.MarkDelete(ctx, q, name); err != nil {
			t.Errorf("MarkDelete(%.40q) of a mark that does not exist: %v", name, err)
		}
	}
	// Similar names stay apart.
	for _, name := range []string{"a", "a/", "a/b", "A"} {
		if _, err := m.MarkSet(ctx, q, name, time.Time{}, false); err != nil {
			t.Fatalf("MarkSet(%q): %v", name, err)
		}
	}
	if err := m.MarkDelete(ctx, q, "a/"); err != nil {
		t.Fatalf("MarkDelete: %v", err)
	}
	for name, want := range map[string]bool{"a": true, "a/": false, "a/b": true, "A": true, "b": false} {
		wantMark(t, m, ctx, q, name, want, "after deleting \"a/\" of a, a/, a/b and A")
	}
}

// testMarksExpire: a mark whose expiry passed is gone, and onlyNew can
// create it again (contract: marks).
func (s *suite) testMarksExpire(t *testing.T) {
	m := s.marker(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	until := time.Now().Add(time.Second)
	if ok, err := m.MarkSet(ctx, q, "short", until, true); err != nil || !ok {
		t.Fatalf("MarkSet(short) = %v, %v", ok, err)
	}
	if ok, err := m.MarkSet(ctx, q, "long", time.Now().Add(time.Hour), true); err != nil || !ok {
		t.Fatalf("MarkSet(long) = %v, %v", ok, err)
	}
	// Past expiry in the set call itself: absent at once.
	if _, err := m.MarkSet(ctx, q, "past", time.Now().Add(-time.Minute), false); err != nil {
		t.Fatalf("MarkSet(past): %v", err)
	}
	wantMark(t, m, ctx, q, "past", false, "a mark set with an expiry in the past")
	if time.Now().Before(until.Add(-earlyTolerance)) {
		// The broker answers somewhere within the round trip: only an
		// answer that came back before the expiry says the mark left
		// early (a slow broker may answer after it).
		live, err := m.MarkGet(ctx, q, "short")
		if err != nil {
			t.Fatalf("MarkGet(short): %v", err)
		}
		if !live && time.Now().Before(until.Add(-earlyTolerance)) {
			t.Errorf("before its expiry: MarkGet(%q) = false, want true", "short")
		}
	}
	deadline := until.Add(s.h.RedeliveryBound)
	for {
		live, err := m.MarkGet(ctx, q, "short")
		if err != nil {
			t.Fatalf("MarkGet(short): %v", err)
		}
		if !live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mark still there %v after its expiry", s.h.RedeliveryBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if now := time.Now(); now.Before(until.Add(-earlyTolerance)) {
		t.Errorf("mark gone %v before its expiry", until.Sub(now))
	}
	wantMark(t, m, ctx, q, "long", true, "a mark with an hour left, after another expired")
	if ok, err := m.MarkSet(ctx, q, "short", time.Now().Add(time.Hour), true); err != nil || !ok {
		t.Errorf("MarkSet(onlyNew) of an expired mark = %v, %v; want true", ok, err)
	}
}

// testMarkRace: of many processes racing MarkSet(onlyNew) on one name,
// exactly one wins, for every name (contract: marks).
func (s *suite) testMarkRace(t *testing.T) {
	const procs, names = 6, 20
	ms := make([]backend.Marker, procs)
	for i := range ms {
		ms[i] = s.marker(t)
	}
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	wins := make([]int, names)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range names {
				ok, err := m.MarkSet(ctx, q, fmt.Sprintf("tick/%d", n), time.Now().Add(time.Minute), true)
				if err != nil {
					t.Errorf("MarkSet(tick/%d, onlyNew): %v", n, err)
					return
				}
				if ok {
					mu.Lock()
					wins[n]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for n, w := range wins {
		if w != 1 {
			t.Errorf("tick/%d: %d of %d racing MarkSet(onlyNew) calls won, want exactly 1", n, w, procs)
		}
	}
}

// testMarkList: MarkList names a queue's live marks with a prefix, sorted,
// and nothing of other queues (contract: marks).
func (s *suite) testMarkList(t *testing.T) {
	m := s.marker(t)
	s.need(t, FeatureMarkList)
	ml, ok := m.(backend.MarkLister)
	if !ok {
		t.Fatalf("the driver does not implement backend.MarkLister")
	}
	q, q2 := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	if got, err := ml.MarkList(ctx, q, ""); err != nil || len(got) != 0 {
		t.Errorf("MarkList of a queue without marks = %q, %v; want none", got, err)
	}
	set := []string{"cancel/b", "cancel/a", "cancel/c%", "cancel_x", "pause", "cancel/ü", "cancel/a b"}
	for _, name := range set {
		if _, err := m.MarkSet(ctx, q, name, time.Now().Add(time.Hour), false); err != nil {
			t.Fatalf("MarkSet(%q): %v", name, err)
		}
	}
	if _, err := m.MarkSet(ctx, q, "cancel/expired", time.Now().Add(-time.Second), false); err != nil {
		t.Fatalf("MarkSet: %v", err)
	}
	if _, err := m.MarkSet(ctx, q2, "cancel/other-queue", time.Time{}, false); err != nil {
		t.Fatalf("MarkSet: %v", err)
	}
	want := []string{"cancel/a", "cancel/a b", "cancel/b", "cancel/c%", "cancel/ü"}
	got, err := ml.MarkList(ctx, q, "cancel/")
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("MarkList(cancel/) = %q, %v; want %q", got, err, want)
	}
	all := slices.Clone(set)
	slices.Sort(all)
	if got, err := ml.MarkList(ctx, q, ""); err != nil || !slices.Equal(got, all) {
		t.Errorf("MarkList(\"\") = %q, %v; want %q", got, err, all)
	}
}

// testQueueDeleteMarks: QueueDelete deletes the queue's marks, and only
// its own (contract: queue-admin, marks).
func (s *suite) testQueueDeleteMarks(t *testing.T) {
	m := s.marker(t)
	s.need(t, FeatureQueueDelete)
	c := s.client(t)
	q, q2 := s.queue(t), s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	for _, qq := range []string{q, q2} {
		for _, name := range []string{"pause", "cancel/x"} {
			if _, err := m.MarkSet(ctx, qq, name, time.Time{}, false); err != nil {
				t.Fatalf("MarkSet: %v", err)
			}
		}
	}
	if err := c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
	for _, name := range []string{"pause", "cancel/x"} {
		wantMark(t, m, ctx, q, name, false, "after QueueDelete")
		wantMark(t, m, ctx, q2, name, true, "after QueueDelete of another queue")
	}
}
