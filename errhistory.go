package fila

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fila-go/fila/backend"
)

// A message's error history is kept in the portable layer, so that every
// driver has it without storing anything new: the reason the client passes
// to backend.Driver.Retry and Driver.Dead, which every driver stores
// verbatim (contract: retry, dead-letters), is the history encoded, and the
// client decodes what the driver returns as Delivery.LastError,
// PendingMessage.LastError and DeadLetter.Reason.
//
// The encoding is a magic first line and one length-prefixed entry per
// error, oldest first:
//
//	fila-errors/1\n
//	ATTEMPT SP UNIXMICROS SP RUNES \n REASON \n
//	…
//
// ATTEMPT, UNIXMICROS and RUNES are unsigned decimals (0 for an unknown
// attempt or time); RUNES counts the characters (runes) of REASON, which
// follows unescaped. Counting runes rather than bytes keeps the history
// readable where a broker replaces a character with another of a different
// width: PostgreSQL's text cannot hold NUL, and the postgres driver stores
// it as U+FFFD, as it always did for a reason with a NUL. The reasons are
// valid UTF-8 (cleanReason), so the whole string is; it holds a NUL only
// where a reason did. A stored reason without the magic line (one stored
// before histories existed, or imported from another tool) or one that does
// not parse is read as a single plain reason of unknown attempt and time.

// The bounds of a message's error history.
const (
	// MaxErrorHistory is the most errors a message keeps, the latest
	// included: a Retry or Dead past it drops the oldest.
	MaxErrorHistory = 5
	// MaxEarlierReasonBytes bounds the reason of every error but the
	// latest: it is cut to this many bytes of valid UTF-8 when a newer
	// error is recorded. The latest keeps up to MaxReasonBytes.
	MaxEarlierReasonBytes = 1 << 10
	// MaxErrorHistoryBytes is the longest string the client passes a
	// driver as a Retry or Dead reason: the encoded history of at most
	// MaxErrorHistory errors, the latest up to MaxReasonBytes and the
	// others up to MaxEarlierReasonBytes, with their attempts and times.
	// Drivers store it verbatim (see backend.MaxErrorHistoryBytes).
	MaxErrorHistoryBytes = backend.MaxErrorHistoryBytes
)

// AttemptError is one error in a message's history: the reason one
// delivery of it was retried or dead-lettered with, the attempt and when.
type AttemptError struct {
	// Attempt is the delivery's attempt (Delivery.Attempt); for a message
	// the client dead-lettered on max attempts or on a cancel before
	// handing it out, the attempts it had. 0 when unknown: a reason
	// stored by an older version or imported from elsewhere.
	Attempt int
	// At is when the client recorded the error, by its clock, to the
	// microsecond; zero when unknown.
	At time.Time
	// Reason is the reason given, cleaned as Retry and Dead clean it: the
	// latest error's is whole (up to MaxReasonBytes), the earlier ones are
	// cut to MaxEarlierReasonBytes.
	Reason string
}

// errorsMagic is the first line of an encoded error history.
const errorsMagic = "fila-errors/1\n"

// maxEntryHeader bounds an entry's header and its reason's closing
// newline: an attempt of at most 10 digits (clamped to MaxInt32), a time
// of at most 19 (a non-negative int64), a rune count of at most 5
// (MaxReasonBytes), two spaces and two newlines.
const maxEntryHeader = 10 + 1 + 19 + 1 + 5 + 1 + 1

// The bound the drivers are told (backend.MaxErrorHistoryBytes) is this
// encoding's; a change of either fails to compile here.
var _ [MaxErrorHistoryBytes - (len(errorsMagic) + MaxErrorHistory*maxEntryHeader +
	MaxReasonBytes + (MaxErrorHistory-1)*MaxEarlierReasonBytes)]struct{}
var _ [(len(errorsMagic) + MaxErrorHistory*maxEntryHeader +
	MaxReasonBytes + (MaxErrorHistory-1)*MaxEarlierReasonBytes) - MaxErrorHistoryBytes]struct{}

// encodeErrors encodes h, oldest first, keeping its last MaxErrorHistory
// errors: the latest's reason cut to MaxReasonBytes, the others' to
// MaxEarlierReasonBytes, all made valid UTF-8. An empty h is "".
func encodeErrors(h []AttemptError) string {
	if len(h) == 0 {
		return ""
	}
	if len(h) > MaxErrorHistory {
		h = h[len(h)-MaxErrorHistory:]
	}
	var b strings.Builder
	b.Grow(len(errorsMagic) + len(h)*maxEntryHeader + MaxReasonBytes/4)
	b.WriteString(errorsMagic)
	var num [20]byte
	for i, e := range h {
		limit := MaxEarlierReasonBytes
		if i == len(h)-1 {
			limit = MaxReasonBytes
		}
		reason := cutReason(e.Reason, limit)
		attempt := int64(min(max(e.Attempt, 0), math.MaxInt32))
		var us int64
		if !e.At.IsZero() {
			us = max(e.At.UnixMicro(), 0)
		}
		b.Write(strconv.AppendInt(num[:0], attempt, 10))
		b.WriteByte(' ')
		b.Write(strconv.AppendInt(num[:0], us, 10))
		b.WriteByte(' ')
		b.Write(strconv.AppendInt(num[:0], int64(utf8.RuneCountInString(reason)), 10))
		b.WriteByte('\n')
		b.WriteString(reason)
		b.WriteByte('\n')
	}
	return b.String()
}

// decodeErrors decodes a stored reason into its history, oldest first:
// nil for "", one entry of unknown attempt and time for a plain reason or
// anything that does not parse. It never fails.
func decodeErrors(s string) []AttemptError {
	if s == "" {
		return nil
	}
	if h, ok := parseErrors(s); ok {
		return h
	}
	return []AttemptError{{Reason: s}}
}

// parseErrors parses an encoded history; ok is false when s is not one.
func parseErrors(s string) (h []AttemptError, ok bool) {
	rest, ok := strings.CutPrefix(s, errorsMagic)
	if !ok || rest == "" {
		return nil, false
	}
	for rest != "" {
		line, after, found := strings.Cut(rest, "\n")
		if !found || len(line) > maxEntryHeader {
			return nil, false
		}
		f1, line, _ := strings.Cut(line, " ")
		f2, f3, _ := strings.Cut(line, " ")
		attempt, ok1 := decimal(f1, 10)
		us, ok2 := decimal(f2, 19)
		runes, ok3 := decimal(f3, 7)
		if !ok1 || !ok2 || !ok3 || attempt > math.MaxInt32 {
			return nil, false
		}
		n := 0
		for ; runes > 0; runes-- {
			if n >= len(after) {
				return nil, false
			}
			_, size := utf8.DecodeRuneInString(after[n:])
			n += size
		}
		if n >= len(after) || after[n] != '\n' {
			return nil, false
		}
		e := AttemptError{Attempt: int(attempt), Reason: after[:n]}
		if us > 0 {
			e.At = time.UnixMicro(us)
		}
		h = append(h, e)
		rest = after[n+1:]
	}
	return h, true
}

// decimal parses 1 to digits ASCII digits, nothing else, as an int64.
func decimal(s string, digits int) (int64, bool) {
	if s == "" || len(s) > digits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// withError returns the stored history stored with one more error: what
// Retry and Dead hand their driver. reason is cleaned (cleanReason).
func withError(stored string, attempt int, at time.Time, reason string) string {
	h := decodeErrors(stored)
	if len(h) >= MaxErrorHistory {
		h = h[len(h)-MaxErrorHistory+1:]
	}
	return encodeErrors(append(h, AttemptError{Attempt: attempt, At: at, Reason: reason}))
}

// splitErrors decodes a stored history into its latest reason and the
// whole history, oldest first (the latest included); "" and nil for "".
func splitErrors(stored string) (latest string, h []AttemptError) {
	h = decodeErrors(stored)
	if len(h) == 0 {
		return "", nil
	}
	return h[len(h)-1].Reason, h
}

// latestError is the latest reason of a stored history.
func latestError(stored string) string {
	latest, _ := splitErrors(stored)
	return latest
}
