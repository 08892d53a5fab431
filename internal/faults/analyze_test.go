package faults_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The accounting of the worker-crash test, on ledgers written by hand: it
// must tell the duplicates a kill explains from those it does not.

// t0 is the kill time of the hand-written ledgers; "A id -5s" in a ledger
// below is an ack stored 5s before it, "X id retry -5s" a retry.
var t0 = time.Unix(1_700_000_000, 0)

func ledgerOf(name string, killed bool, lines ...string) incarnation {
	inc := incarnation{name: name}
	if killed {
		inc.killedAt = t0
	}
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "A "); ok {
			id, ago, _ := strings.Cut(rest, " ")
			d, err := time.ParseDuration(strings.TrimPrefix(ago, "-"))
			if err != nil {
				panic(err)
			}
			l = fmt.Sprintf("A %s %d", id, t0.Add(-d).UnixNano())
		}
		if f := strings.Fields(l); f[0] == "X" && len(f) == 4 {
			d, err := time.ParseDuration(strings.TrimPrefix(f[3], "-"))
			if err != nil {
				panic(err)
			}
			l = fmt.Sprintf("X %s %s %d", f[1], f[2], t0.Add(-d).UnixNano())
		}
		e, err := parseEntry(l)
		if err != nil {
			panic(err)
		}
		inc.entries = append(inc.entries, e)
	}
	return inc
}

func TestAnalyze(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                               string
		grace                              time.Duration
		retryCopies                        bool
		incs                               []incarnation
		kills, inFlight, dups, unexplained int
		lost                               []int
	}{{
		name: "clean",
		incs: []incarnation{
			ledgerOf("w0.0", false, "R a 0 1", "H a 0", "A a -5s", "R b 1 1", "H b 1", "A b -5s"),
		},
	}, {
		name: "redelivered after a kill",
		incs: []incarnation{
			// a: acked; b: handled, ack unknown; killed with b in flight.
			ledgerOf("w0.0", true, "R a 0 1", "H a 0", "A a -5s", "R b 1 1", "H b 1"),
			ledgerOf("w1.0", false, "R b 1 2", "H b 1", "A b -1s"),
		},
		kills: 1, inFlight: 1, dups: 1,
	}, {
		name: "in flight at a kill but its ack had landed",
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "H a 0"),
			ledgerOf("w1.0", false, "R b 1 1", "H b 1", "A b -5s"),
		},
		kills: 1, inFlight: 1,
	}, {
		// The RabbitMQ give-back defect: the killed process never handed
		// b to a handler, yet b arrives twice elsewhere.
		name:  "duplicate of a message the killed process never received",
		grace: time.Second,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "H a 0"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -5s", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w2.0", false, "R b 1 1", "H b 1", "A b -5s"),
		},
		kills: 1, inFlight: 1, dups: 2, unexplained: 1,
	}, {
		name: "delivered twice to a survivor (lease lost)",
		incs: []incarnation{
			ledgerOf("w0.0", false, "R a 0 1", "H a 0", "X a lease_lost", "R a 0 2", "H a 0", "A a -5s", "R b 1 1", "H b 1", "A b -5s"),
		},
		dups: 1, unexplained: 1,
	}, {
		name:  "acked by the killed process long before, delivered again",
		grace: time.Second,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "H a 0", "A a -5s", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -5s"),
		},
		kills: 1, dups: 1, unexplained: 1,
	}, {
		name:  "acked just before the kill, delivered again (within the grace)",
		grace: time.Second,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "H a 0", "A a -10ms", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -5s"),
		},
		kills: 1, inFlight: 1, dups: 1,
	}, {
		name: "acked just before the kill, delivered again (no grace: PostgreSQL, Redis)",
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "H a 0", "A a -10ms", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -5s"),
		},
		kills: 1, dups: 1, unexplained: 1,
	}, {
		name: "lost: received, never handled",
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "R b 1 1", "H b 1", "A b -5s"),
		},
		kills: 1, inFlight: 1, lost: []int{0},
	}, {
		name: "retried, delivered again: no duplicate",
		incs: []incarnation{
			ledgerOf("w0.0", false, "R a 0 1", "X a retry -5s", "R a 0 2", "H a 0", "A a -4s", "R b 1 1", "H b 1", "A b -5s"),
		},
	}, {
		name: "retried by a process killed later: not in flight",
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "X a retry -5s", "R b 1 1", "H b 1"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -4s", "R b 1 2", "H b 1", "A b -4s"),
		},
		kills: 1, inFlight: 1, dups: 1,
	}, {
		name: "retried once, delivered three times",
		incs: []incarnation{
			ledgerOf("w0.0", false, "R a 0 1", "X a retry -5s", "R a 0 2", "H a 0", "A a -4s", "R a 0 3", "H a 0", "A a -3s", "R b 1 1", "H b 1", "A b -5s"),
		},
		dups: 1, unexplained: 1,
	}, {
		// RabbitMQ: the retry's copy is confirmed, the ack of the
		// original an unanswered frame a kill can lose.
		name:  "retried just before the kill, original and copy delivered (within the grace)",
		grace: time.Second,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "X a retry -10ms", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -4s", "R a 0 2", "H a 0", "A a -3s"),
		},
		kills: 1, inFlight: 1, dups: 1,
	}, {
		// Killed between a retry's copy and its ack (no X line): the
		// message was in flight once, and comes back twice.
		name:  "in flight at a kill, delivered twice after it",
		grace: time.Second,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -4s", "R a 0 2", "H a 0", "A a -3s"),
		},
		kills: 1, inFlight: 1, dups: 2, unexplained: 1,
	}, {
		// RabbitMQ: killed during a Retry (F line, no outcome), after its
		// copy was stored and before the original's ack.
		name:        "killed during a retry that stores a copy, original and copy delivered",
		grace:       time.Second,
		retryCopies: true,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "F a 0", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -4s", "R a 0 2", "H a 0", "A a -3s"),
		},
		kills: 1, inFlight: 2, dups: 2,
	}, {
		// PostgreSQL, Redis: a retry is one atomic write, so a kill during
		// it leaves the message once.
		name:  "killed during an atomic retry, delivered twice after it",
		grace: time.Second,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "F a 0", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -4s", "R a 0 2", "H a 0", "A a -3s"),
		},
		kills: 1, inFlight: 1, dups: 2, unexplained: 1,
	}, {
		// The retry finished (X line) long before the kill: no copy in
		// doubt.
		name:        "failed and retried long before a kill, delivered three times",
		grace:       time.Second,
		retryCopies: true,
		incs: []incarnation{
			ledgerOf("w0.0", true, "R a 0 1", "F a 0", "X a retry -5s", "R b 1 1", "H b 1", "A b -5s"),
			ledgerOf("w1.0", false, "R a 0 2", "H a 0", "A a -4s", "R a 0 2", "H a 0", "A a -3s"),
		},
		kills: 1, dups: 1, unexplained: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := analyze(2, tt.incs, tt.grace, tt.retryCopies)
			if r.kills != tt.kills || r.sumInFlight() != tt.inFlight || r.duplicates != tt.dups ||
				r.unexplained != tt.unexplained || !slices.Equal(r.lost, tt.lost) || len(r.inconsistent) > 0 {
				t.Errorf("analyze = %s inconsistent=%v; want kills=%d in-flight=%d duplicates=%d unexplained=%d lost=%v",
					r.summary(), r.inconsistent, tt.kills, tt.inFlight, tt.dups, tt.unexplained, tt.lost)
			}
		})
	}
}
