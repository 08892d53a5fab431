package conformance

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fila-go/fila"
)

// wantError is an entry expected in a message's error history: its
// attempt, its reason and the window in which the client recorded it.
type wantError struct {
	attempt        int
	reason         string
	after, before  time.Time
	nulReplaceable bool // the reason holds a NUL the broker may store as U+FFFD
}

// checkErrors compares a history with what is expected of it, oldest first.
func checkErrors(t *testing.T, what string, got []fila.AttemptError, want []wantError) {
	t.Helper()
	if len(got) != len(want) {
		attempts := make([]string, len(got))
		for i, e := range got {
			attempts[i] = fmt.Sprintf("attempt %d %.40q", e.Attempt, e.Reason)
		}
		t.Errorf("%s: %d errors (%s), want %d", what, len(got), strings.Join(attempts, ", "), len(want))
		return
	}
	for i, w := range want {
		g := got[i]
		if g.Attempt != w.attempt {
			t.Errorf("%s: error %d has attempt %d, want %d", what, i, g.Attempt, w.attempt)
		}
		if !sameReason(g.Reason, w.reason, w.nulReplaceable) {
			t.Errorf("%s: error %d (attempt %d) has reason %.60q (%d bytes), want %.60q (%d bytes)",
				what, i, g.Attempt, g.Reason, len(g.Reason), w.reason, len(w.reason))
		}
		// The client records the time by its own clock, to the microsecond.
		if g.At.Before(w.after.Truncate(time.Microsecond)) || g.At.After(w.before) {
			t.Errorf("%s: error %d (attempt %d) recorded at %v, want between %v and %v",
				what, i, g.Attempt, g.At, w.after, w.before)
		}
	}
}

// sameReason: a reason as stored is the reason given, where a broker that
// cannot hold a NUL (PostgreSQL) may store U+FFFD instead when nul is set.
func sameReason(got, want string, nul bool) bool {
	return got == want || nul && got == strings.ReplaceAll(want, "\x00", "\uFFFD")
}

// cutTo is s cut to n bytes of valid UTF-8, as the client cuts an earlier
// error's reason.
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// testErrorHistory: each Retry's reason joins the message's error history,
// with its attempt and time, which every later delivery, its listing and
// its dead letter carry; an empty reason keeps the history; the latest
// MaxErrorHistory errors are kept, the earlier ones' reasons cut to
// MaxEarlierReasonBytes; a dead letter of max attempts keeps the history
// too (contract: error-history). The portable layer encodes the history
// into the reason it gives the driver, so this checks that drivers store
// reasons of up to MaxErrorHistoryBytes verbatim.
func (s *suite) testErrorHistory(t *testing.T) {
	t.Run("RetriesThenDead", s.errorHistoryRetriesThenDead)
	t.Run("KeepsTheLatest", s.errorHistoryKeepsTheLatest)
	t.Run("AtTheBound", s.errorHistoryAtTheBound)
	t.Run("ControlCharacters", s.errorHistoryControlCharacters)
	t.Run("MaxAttempts", s.errorHistoryMaxAttempts)
}

// retryRecorded retries d with reason, returning the entry it expects.
func retryRecorded(t *testing.T, d *fila.Delivery, reason string) wantError {
	t.Helper()
	after := time.Now()
	if err := d.Retry(ctxTimeout(t, 10*time.Second), 0, reason); err != nil {
		t.Fatalf("Retry of attempt %d: %v", d.Attempt, err)
	}
	return wantError{attempt: d.Attempt, reason: reason, after: after, before: time.Now()}
}

// receiveAttempt receives the next delivery of the queue's one message,
// which must be attempt.
func (s *suite) receiveAttempt(t *testing.T, c *fila.Client, q, id string, attempt int) *fila.Delivery {
	t.Helper()
	d := receiveOne(t, c, q, time.Minute, s.h.RedeliveryBound+5*time.Second)
	if d.ID != id || d.Attempt != attempt {
		t.Fatalf("received %s attempt %d, want %s attempt %d", d.ID, d.Attempt, id, attempt)
	}
	return d
}

func (s *suite) errorHistoryRetriesThenDead(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "flaky"})
	reasons := []string{"first: connection refused", "second: timeout\nafter 30s", "third: 503 <b>Service Unavailable</b>"}
	var want []wantError
	for i, r := range reasons {
		d := s.receiveAttempt(t, c, q, id, i+1)
		checkErrors(t, fmt.Sprintf("delivery %d", d.Attempt), d.Errors, want)
		if wantLast := lastReason(want); d.LastError != wantLast {
			t.Errorf("delivery %d: last error %q, want %q", d.Attempt, d.LastError, wantLast)
		}
		want = append(want, retryRecorded(t, d, r))
	}
	if s.has(FeatureMessageList) {
		pg, err := c.MessageList(ctxTimeout(t, 10*time.Second), q, fila.MessageListParams{IDs: []string{id}})
		if err != nil {
			t.Fatalf("MessageList: %v", err)
		}
		if len(pg.Messages) != 1 {
			t.Fatalf("MessageList by id: %d messages, want 1", len(pg.Messages))
		}
		m := pg.Messages[0]
		checkErrors(t, "the listed message", m.Errors, want)
		if m.LastError != reasons[2] {
			t.Errorf("the listed message's last error %q, want %q", m.LastError, reasons[2])
		}
	}
	d := s.receiveAttempt(t, c, q, id, 4)
	checkErrors(t, "delivery 4", d.Errors, want)
	if d.LastError != reasons[2] {
		t.Errorf("delivery 4: last error %q, want %q", d.LastError, reasons[2])
	}
	// Release, like a Retry without a reason, keeps the history as it is.
	if err := d.Release(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	d = s.receiveAttempt(t, c, q, id, 5)
	checkErrors(t, "delivery 5, after a Release", d.Errors, want)
	if err := d.Retry(ctxTimeout(t, 10*time.Second), 0, ""); err != nil {
		t.Fatalf("Retry without a reason: %v", err)
	}
	d = s.receiveAttempt(t, c, q, id, 6)
	checkErrors(t, "delivery 6, after a Retry without a reason", d.Errors, want)
	if d.LastError != reasons[2] {
		t.Errorf("delivery 6: last error %q, want %q", d.LastError, reasons[2])
	}
	const final = "final: the customer does not exist"
	if err := d.Dead(ctxTimeout(t, 10*time.Second), final); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	if !s.has(FeatureDeadLetters) {
		return
	}
	if l := s.findDead(t, c, q, id); l != nil {
		if l.Reason != final || l.Attempts != 6 {
			t.Errorf("dead letter: reason %q attempts %d, want %q and 6", l.Reason, l.Attempts, final)
		}
		checkErrors(t, "the dead letter's earlier errors", l.Errors, want)
	}
}

func lastReason(h []wantError) string {
	if len(h) == 0 {
		return ""
	}
	return h[len(h)-1].reason
}

// keptOf is what the history keeps of want: the last n entries, every
// reason but the last cut to MaxEarlierReasonBytes.
func keptOf(want []wantError, n int) []wantError {
	if len(want) > n {
		want = want[len(want)-n:]
	}
	kept := append([]wantError(nil), want...)
	for i := range kept[:len(kept)-1] {
		kept[i].reason = cutTo(kept[i].reason, fila.MaxEarlierReasonBytes)
	}
	return kept
}

func (s *suite) errorHistoryKeepsTheLatest(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "flaky", MaxAttempts: 100})
	retries := fila.MaxErrorHistory + 2
	var want []wantError
	for attempt := 1; attempt <= retries; attempt++ {
		d := s.receiveAttempt(t, c, q, id, attempt)
		reason := fmt.Sprintf("retry %d", attempt)
		if attempt == retries-1 {
			// Longer than an earlier error keeps: cut where a character ends.
			reason = fmt.Sprintf("retry %d: ", attempt) + utf8Of(fila.MaxEarlierReasonBytes+500, false)
		}
		want = append(want, retryRecorded(t, d, reason))
	}
	d := s.receiveAttempt(t, c, q, id, retries+1)
	checkErrors(t, fmt.Sprintf("delivery %d", d.Attempt), d.Errors, keptOf(want, fila.MaxErrorHistory))
	if d.LastError != lastReason(want) {
		t.Errorf("last error %q, want %q", d.LastError, lastReason(want))
	}
	if err := d.Dead(ctxTimeout(t, 10*time.Second), "given up"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	if !s.has(FeatureDeadLetters) {
		return
	}
	if l := s.findDead(t, c, q, id); l != nil {
		if l.Reason != "given up" {
			t.Errorf("dead letter reason %q, want %q", l.Reason, "given up")
		}
		// The dead reason is the latest error: the earlier ones are the
		// retries before it, MaxErrorHistory-1 of them, all cut.
		earlier := keptOf(append(append([]wantError(nil), want...), wantError{}), fila.MaxErrorHistory)
		checkErrors(t, "the dead letter's earlier errors", l.Errors, earlier[:len(earlier)-1])
	}
}

// errorHistoryAtTheBound stores the largest history the client makes:
// every error's reason as long as it may be, in one-, two- and four-byte
// characters.
func (s *suite) errorHistoryAtTheBound(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "flaky", MaxAttempts: 100})
	long := func(n int) string { return fmt.Sprintf("%d", n) + utf8Of(fila.MaxReasonBytes-1, false) }
	var want []wantError
	for attempt := 1; attempt <= fila.MaxErrorHistory; attempt++ {
		d := s.receiveAttempt(t, c, q, id, attempt)
		want = append(want, retryRecorded(t, d, long(attempt)))
	}
	d := s.receiveAttempt(t, c, q, id, fila.MaxErrorHistory+1)
	checkErrors(t, "delivery after retries with the longest reasons", d.Errors, keptOf(want, fila.MaxErrorHistory))
	if d.LastError != long(fila.MaxErrorHistory) {
		t.Errorf("last error: %d bytes, want the %d given", len(d.LastError), fila.MaxReasonBytes)
	}
	if err := d.Dead(ctxTimeout(t, 10*time.Second), long(0)); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	if !s.has(FeatureDeadLetters) {
		return
	}
	if l := s.findDead(t, c, q, id); l != nil {
		if l.Reason != long(0) {
			t.Errorf("dead letter reason: %d bytes, want the %d given", len(l.Reason), fila.MaxReasonBytes)
		}
		earlier := keptOf(append(append([]wantError(nil), want...), wantError{}), fila.MaxErrorHistory)
		checkErrors(t, "the dead letter's earlier errors", l.Errors, earlier[:len(earlier)-1])
	}
}

// errorHistoryControlCharacters: reasons are stored unescaped, newlines,
// escapes and NUL included (PostgreSQL stores a NUL as U+FFFD), and the
// history still reads right after them.
func (s *suite) errorHistoryControlCharacters(t *testing.T) {
	c := s.client(t)
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "flaky"})
	reason := "nul \x00, escape \x1b[31mred\x1b[0m, CR \r\nand a line that looks like a history entry:\n1 2 3\nabc\n"
	d := s.receiveAttempt(t, c, q, id, 1)
	first := retryRecorded(t, d, reason)
	first.nulReplaceable = true
	d = s.receiveAttempt(t, c, q, id, 2)
	checkErrors(t, "delivery 2", d.Errors, []wantError{first})
	if !sameReason(d.LastError, reason, true) {
		t.Errorf("last error %q, want %q", d.LastError, reason)
	}
	second := retryRecorded(t, d, "\x00")
	second.nulReplaceable = true
	d = s.receiveAttempt(t, c, q, id, 3)
	checkErrors(t, "delivery 3", d.Errors, []wantError{first, second})
	_ = d.Ack(ctxTimeout(t, 10*time.Second))
}

// errorHistoryMaxAttempts: the dead letter of a message that ran out of
// attempts has ReasonMaxAttempts and, as its earlier errors, its retries.
func (s *suite) errorHistoryMaxAttempts(t *testing.T) {
	s.need(t, FeatureDeadLetters)
	c := s.client(t, fila.WithMaxAttempts(3))
	q := s.queue(t)
	id := enqueue(t, c, q, fila.Message{Kind: "flaky"})
	var want []wantError
	for attempt := 1; attempt <= 3; attempt++ {
		d := s.receiveAttempt(t, c, q, id, attempt)
		want = append(want, retryRecorded(t, d, fmt.Sprintf("failure %d", attempt)))
	}
	s.expectNone(t, c, q, s.h.RedeliveryBound+time.Second, "a message past its max attempts")
	if l := s.findDead(t, c, q, id); l != nil {
		if l.Reason != fila.ReasonMaxAttempts || l.Attempts != 3 {
			t.Errorf("dead letter: reason %q attempts %d, want %q and 3", l.Reason, l.Attempts, fila.ReasonMaxAttempts)
		}
		checkErrors(t, "the max-attempts dead letter's earlier errors", l.Errors, want)
	}
}
