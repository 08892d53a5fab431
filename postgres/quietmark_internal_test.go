package postgres

import (
	"testing"
	"time"
)

// A quiet mark spares claims for at most quietMax: a claim whose snapshot
// missed a message (and no notification says so) costs a short-polling
// consumer that long, not the safety poll.
func TestQuietMarkExpires(t *testing.T) {
	var w waiters
	w.listening.Store(true)
	m := w.claimStarting("q")
	w.claimEnded("q", m, true, time.Time{})
	now := time.Now()
	left, skip := w.quietWait("q", now)
	if !skip || left <= 0 || left > quietMax {
		t.Fatalf("right after an empty claim: quietWait = %v, %v; want a skip of at most %v", left, skip, quietMax)
	}
	if left, skip := w.quietWait("q", now.Add(quietMax)); skip {
		t.Errorf("%v after an empty claim: quietWait = %v, %v; want a claim", quietMax, left, skip)
	}

	// A known due time within quietMax ends the skip at it.
	m = w.claimStarting("q")
	due := time.Now().Add(quietMax / 4)
	w.claimEnded("q", m, true, due)
	if left, skip := w.quietWait("q", time.Now()); !skip || left > quietMax/4 {
		t.Errorf("before a due time: quietWait = %v, %v; want a skip until it", left, skip)
	}
	if _, skip := w.quietWait("q", due); skip {
		t.Error("at the due time: quietWait skips")
	}
}
