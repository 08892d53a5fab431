package faults_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila/worker"
)

// A ledger is one worker process's record of what its handlers saw, one
// line per event, each written with a single write(2) on a file opened with
// O_APPEND before the step it records goes on. A SIGKILL cannot lose a line
// whose write returned (the kernel holds it; only a machine crash could, and
// that is not what these tests do), so the ledgers of killed processes are
// exact up to the kill.
//
//	R <id> <seq> <attempt>   a handler received the message (first thing it does)
//	H <id> <seq>             the handler is done and returns nil (before the ack call)
//	F <id> <seq>             the handler fails on purpose and returns its error: the
//	                         worker's Retry follows (before the Retry call)
//	A <id> <unix ns>         the ack is stored (worker's OnJobEnd, outcome ack), and when
//	X <id> <outcome> [<unix ns>]
//	                         the job ended another way, and when (the time is
//	                         optional): retry (the Retry is stored, so the
//	                         message comes back once more), lease_lost,
//	                         unsettled, ...
const (
	opReceived = 'R'
	opHandled  = 'H'
	opFailing  = 'F'
	opAcked    = 'A'
	opOther    = 'X'
)

// ledger is the writing side, used by the worker child.
type ledger struct {
	f       *os.File
	mu      sync.Mutex
	failure error
}

func createLedger(path string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &ledger{f: f}, nil
}

// write appends one line with one write call. Writes from concurrent jobs
// never interleave inside a line (O_APPEND writes of a few bytes to a local
// file are atomic).
func (l *ledger) write(op byte, id, rest string) {
	line := make([]byte, 0, 64)
	line = append(line, op, ' ')
	line = append(line, id...)
	if rest != "" {
		line = append(line, ' ')
		line = append(line, rest...)
	}
	line = append(line, '\n')
	if _, err := l.f.Write(line); err != nil {
		l.mu.Lock()
		if l.failure == nil {
			l.failure = err
		}
		l.mu.Unlock()
	}
}

func (l *ledger) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failure
}

func (l *ledger) close() { _ = l.f.Close() }

// entry is one parsed ledger line.
type entry struct {
	op      byte
	id      string
	seq     int       // R and H lines; -1 otherwise
	attempt int       // R lines
	at      time.Time // A lines, and X lines that have it
	outcome string    // X lines
}

func parseEntry(line string) (entry, error) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 1 {
		return entry{}, fmt.Errorf("bad ledger line %q", line)
	}
	e := entry{op: f[0][0], id: f[1], seq: -1}
	var err error
	switch e.op {
	case opReceived:
		if len(f) != 4 {
			return entry{}, fmt.Errorf("bad ledger line %q", line)
		}
		if e.seq, err = strconv.Atoi(f[2]); err == nil {
			e.attempt, err = strconv.Atoi(f[3])
		}
	case opHandled, opFailing:
		if len(f) != 3 {
			return entry{}, fmt.Errorf("bad ledger line %q", line)
		}
		e.seq, err = strconv.Atoi(f[2])
	case opAcked:
		if len(f) != 3 {
			return entry{}, fmt.Errorf("bad ledger line %q", line)
		}
		var ns int64
		ns, err = strconv.ParseInt(f[2], 10, 64)
		e.at = time.Unix(0, ns)
	case opOther:
		if len(f) != 3 && len(f) != 4 {
			return entry{}, fmt.Errorf("bad ledger line %q", line)
		}
		e.outcome = f[2]
		if len(f) == 4 {
			var ns int64
			ns, err = strconv.ParseInt(f[3], 10, 64)
			e.at = time.Unix(0, ns)
		}
	default:
		return entry{}, fmt.Errorf("bad ledger line %q", line)
	}
	if err != nil {
		return entry{}, fmt.Errorf("bad ledger line %q: %v", line, err)
	}
	return e, nil
}

// tail reads a ledger file while its process writes it: each call returns
// the complete lines appended since the last call.
type tail struct {
	path    string
	off     int64
	partial []byte
}

func (t *tail) read() ([]entry, error) {
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil, nil // the child has not created it yet
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t.off += int64(len(b))
	b = append(t.partial, b...)
	cut := bytes.LastIndexByte(b, '\n')
	if cut < 0 {
		t.partial = b
		return nil, nil
	}
	t.partial = slices.Clone(b[cut+1:])
	var out []entry
	for line := range strings.SplitSeq(string(b[:cut]), "\n") {
		e, err := parseEntry(line)
		if err != nil {
			return out, fmt.Errorf("%s: %w", t.path, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// incarnation is one run of one worker process (or the test's own drain),
// with everything its ledger holds.
type incarnation struct {
	name     string
	killedAt time.Time // when the test sent SIGKILL; zero for a process that was not killed
	entries  []entry
}

// killInFlight is what one killed process had in flight at its kill.
type killInFlight struct {
	unacked int // received by a handler, no ack stored
	// lateAcks are messages acked within the ack grace before the kill:
	// on RabbitMQ an ack is a frame written to the socket with no answer,
	// and a process killed right after writing it can die before the
	// broker read it (the kernel resets the connection), so the broker
	// redelivers a message whose Ack returned nil.
	lateAcks int
	// retrying are messages whose Retry was under way at the kill (an F
	// line and no outcome), counted only where a retry stores a copy
	// before it settles the original (RabbitMQ): a process killed between
	// the two leaves both, at the same attempt.
	retrying int
}

// crashReport holds the figures of one worker-crash run.
type crashReport struct {
	messages   int
	kills      int
	inFlight   []killInFlight // per kill
	deliveries int            // R lines: messages handed to a handler
	// retries counts stored retries (X retry lines): each brings its
	// message back once more, so it explains one more delivery.
	retries int
	// duplicates counts deliveries beyond each message's first and beyond
	// those its stored retries explain.
	duplicates int
	// unexplained counts duplicates not covered by the message being in
	// flight in a killed process: a message delivered n times must have
	// been in flight at n-1 kills.
	unexplained     int
	unexplainedSeqs []string // the first few, with where they were delivered
	// lateAckUsed is the oldest ack (time before its kill) that a
	// duplicate needed to be explained.
	lateAckUsed  time.Duration
	handledTwice int   // messages whose handler finished (H) more than once
	lost         []int // sequence numbers never handled (no H line)
	others       map[string]int
	inconsistent []string // ledger lines that contradict each other
}

func (r crashReport) sumInFlight() int {
	n := 0
	for _, x := range r.inFlight {
		n += x.unacked + x.lateAcks + x.retrying
	}
	return n
}

// analyze checks the ledgers of a run of n messages (sequence numbers 0 to
// n-1). It needs nothing but the ledgers and the kill times: each message
// delivered more than once must have been in flight in a killed process
// (received by a handler there, and neither acked nor retried, or acked or
// retried less than ackGrace before the kill) as many times as it was
// delivered again, beyond the deliveries its stored retries explain (a
// retry stored less than ackGrace before a kill explains one delivery as a
// retry and may explain one more as in flight: on RabbitMQ the retry's copy
// is confirmed but the ack of the original is an unanswered frame). With
// retryCopies (RabbitMQ, whose Retry publishes a copy and then acks the
// original), a Retry under way at a kill (F line, no outcome) may have
// stored its copy, which explains one more delivery.
func analyze(n int, incs []incarnation, ackGrace time.Duration, retryCopies bool) crashReport {
	r := crashReport{messages: n, others: map[string]int{}}
	received := make([]int, n)  // R lines per seq, all processes
	handled := make([]int, n)   // H lines per seq
	allowed := make([]int, n)   // in flight at kills, per seq
	unackedAt := make([]int, n) // of which received and not acked
	retried := make([]int, n)   // stored retries per seq
	lateAge := make([]time.Duration, n)
	idOf := make(map[int]string, n) // seq -> message id
	// Per incarnation, for the account of unexplained duplicates.
	recvBy := make([]map[int]int, len(incs))
	ackBy := make([]map[int][]time.Time, len(incs))
	retryBy := make([]map[int][]time.Time, len(incs))
	for i, inc := range incs {
		seqOf := map[string]int{}
		recv := map[int]int{}
		acks := map[int][]time.Time{}
		retries := map[int][]time.Time{} // stored retries, by seq
		failing := map[int]int{}         // F lines, by seq
		for _, e := range inc.entries {
			switch e.op {
			case opReceived, opHandled:
				if e.seq < 0 || e.seq >= n {
					r.inconsistent = append(r.inconsistent, fmt.Sprintf("%s: seq %d out of range", inc.name, e.seq))
					continue
				}
				if id, ok := idOf[e.seq]; ok && id != e.id {
					r.inconsistent = append(r.inconsistent, fmt.Sprintf("%s: seq %d has ids %s and %s", inc.name, e.seq, id, e.id))
				}
				idOf[e.seq] = e.id
				seqOf[e.id] = e.seq
				if e.op == opReceived {
					recv[e.seq]++
					received[e.seq]++
				} else {
					handled[e.seq]++
				}
			case opFailing:
				if e.seq >= 0 && e.seq < n {
					failing[e.seq]++
				}
			case opAcked:
				seq, ok := seqOf[e.id]
				if !ok {
					r.inconsistent = append(r.inconsistent, fmt.Sprintf("%s: ack of %s before its receipt", inc.name, e.id))
					continue
				}
				acks[seq] = append(acks[seq], e.at)
			case opOther:
				r.others[e.outcome]++
				if e.outcome != string(worker.OutcomeRetry) {
					continue
				}
				seq, ok := seqOf[e.id]
				if !ok {
					r.inconsistent = append(r.inconsistent, fmt.Sprintf("%s: retry of %s before its receipt", inc.name, e.id))
					continue
				}
				retries[seq] = append(retries[seq], e.at)
				retried[seq]++
				r.retries++
			}
		}
		recvBy[i], ackBy[i], retryBy[i] = recv, acks, retries
		if inc.killedAt.IsZero() {
			continue
		}
		r.kills++
		var k killInFlight
		for seq, c := range recv {
			settled := 0
			late := 0
			// An ack or a retry ends a delivery; within the grace
			// before the kill, the broker may not have applied it. (An
			// X line without a time is never late.)
			ends := slices.Concat(acks[seq], retries[seq])
			for _, at := range ends {
				if !at.IsZero() && inc.killedAt.Sub(at) < ackGrace {
					late++
				} else {
					settled++
				}
			}
			if d := c - settled - late; d > 0 {
				k.unacked += d
				allowed[seq] += d
				unackedAt[seq] += d
			}
			if d := min(late, c-settled); d > 0 {
				k.lateAcks += d
				allowed[seq] += d
				for _, at := range ends {
					if age := inc.killedAt.Sub(at); !at.IsZero() && age < ackGrace {
						lateAge[seq] = max(lateAge[seq], age)
					}
				}
			}
		}
		if retryCopies {
			for seq, f := range failing {
				if d := f - len(retries[seq]); d > 0 {
					k.retrying += d
					allowed[seq] += d
				}
			}
		}
		r.inFlight = append(r.inFlight, k)
	}
	for seq := range n {
		r.deliveries += received[seq]
		if handled[seq] == 0 {
			r.lost = append(r.lost, seq)
		}
		if handled[seq] > 1 {
			r.handledTwice++
		}
		extra := received[seq] - 1 - retried[seq]
		if extra <= 0 {
			continue
		}
		r.duplicates += extra
		if extra > unackedAt[seq] {
			r.lateAckUsed = max(r.lateAckUsed, lateAge[seq])
		}
		if u := extra - allowed[seq]; u > 0 {
			r.unexplained += u
			if len(r.unexplainedSeqs) < 10 {
				var where []string
				for i, inc := range incs {
					if recvBy[i][seq] == 0 {
						continue
					}
					w := fmt.Sprintf("%s %dx", inc.name, recvBy[i][seq])
					if n := len(retryBy[i][seq]); n > 0 {
						w += fmt.Sprintf(" retried %dx", n)
					}
					if !inc.killedAt.IsZero() {
						w += " (killed"
						for _, at := range ackBy[i][seq] {
							w += fmt.Sprintf(", acked %v before", inc.killedAt.Sub(at).Round(time.Millisecond))
						}
						for _, at := range retryBy[i][seq] {
							w += fmt.Sprintf(", retried %v before", inc.killedAt.Sub(at).Round(time.Millisecond))
						}
						w += ")"
					}
					where = append(where, w)
				}
				r.unexplainedSeqs = append(r.unexplainedSeqs, fmt.Sprintf("seq %d (id %s) received by %s; in flight at %d kill(s), %d stored retries",
					seq, idOf[seq], strings.Join(where, ", "), allowed[seq], retried[seq]))
			}
		}
	}
	return r
}

// summary is the one-paragraph account of a run for the test log.
func (r crashReport) summary() string {
	others := make([]string, 0, len(r.others))
	for k, v := range r.others {
		others = append(others, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(others)
	kills := make([]string, len(r.inFlight))
	for i, k := range r.inFlight {
		kills[i] = strconv.Itoa(k.unacked)
		if k.lateAcks > 0 {
			kills[i] += "+" + strconv.Itoa(k.lateAcks)
		}
		if k.retrying > 0 {
			kills[i] += "+" + strconv.Itoa(k.retrying) + "r"
		}
	}
	return fmt.Sprintf("messages=%d kills=%d in-flight-at-kills=[%s] (sum %d; +N: acked just before the kill, +Nr: a Retry under way that may have stored a copy) deliveries=%d retries=%d duplicates=%d (oldest lost ack %v before its kill) unexplained=%d handled-twice=%d lost=%d other-outcomes=[%s]",
		r.messages, r.kills, strings.Join(kills, " "), r.sumInFlight(), r.deliveries, r.retries, r.duplicates, r.lateAckUsed.Round(time.Millisecond), r.unexplained, r.handledTwice, len(r.lost), strings.Join(others, " "))
}
