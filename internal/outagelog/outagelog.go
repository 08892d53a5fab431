// Package outagelog reports the failures of something Fila retries in the
// background (a reconnection, a consumer, a change stream, a receive loop)
// with a bounded number of log lines, whatever the length of the outage and
// the speed of the retries: one Warn when the failures start, each further
// failure at Debug, a Warn again when the outage has lasted one minute, two,
// four and so on (doubling), and one Info when it ends. An outage of length
// T therefore logs 2 + log2(T/1min) lines at Info and above.
package outagelog

import (
	"log/slog"
	"sync"
	"time"
)

// FirstReminder is how long an outage lasts before the first repeated Warn.
const FirstReminder = time.Minute

// Log tracks one retried thing. The zero value is not usable; use New. It
// is safe for concurrent use.
type Log struct {
	log *slog.Logger

	mu       sync.Mutex
	start    time.Time // zero while up
	failures int
	remind   time.Duration // elapsed time of the next repeated Warn
	now      func() time.Time
}

// New returns a Log writing to l.
func New(l *slog.Logger) *Log { return &Log{log: l, now: time.Now} }

// Down records a failure. The first failure of an outage is logged at Warn
// with msg and attrs; the following ones at Debug, except those that find
// the outage older than the next reminder (1min, 2min, 4min, …), logged at
// Warn with how long it has lasted and how many failures it has seen.
func (o *Log) Down(msg string, attrs ...any) {
	o.mu.Lock()
	now := o.now()
	first := o.start.IsZero()
	if first {
		o.start, o.failures, o.remind = now, 0, FirstReminder
	}
	o.failures++
	elapsed, failures := now.Sub(o.start), o.failures
	remind := !first && elapsed >= o.remind
	if remind {
		for o.remind <= elapsed {
			o.remind *= 2
		}
	}
	o.mu.Unlock()
	switch {
	case first:
		o.log.Warn(msg, attrs...)
	case remind:
		o.log.Warn(msg, append(attrs, slog.Duration("down_for", elapsed.Round(time.Second)), slog.Int("failures", failures))...)
	default:
		o.log.Debug(msg, append(attrs, slog.Int("failures", failures))...)
	}
}

// Up records a success. It logs msg at Info, with how long the outage
// lasted and how many failures it saw, if Down was called since the last
// Up; otherwise nothing.
func (o *Log) Up(msg string, attrs ...any) {
	o.mu.Lock()
	if o.start.IsZero() {
		o.mu.Unlock()
		return
	}
	elapsed, failures := o.now().Sub(o.start), o.failures
	o.start, o.failures = time.Time{}, 0
	o.mu.Unlock()
	o.log.Info(msg, append(attrs, slog.Duration("down_for", elapsed.Round(time.Millisecond)), slog.Int("failures", failures))...)
}
