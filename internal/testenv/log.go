package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record at every level, for
// tests that check what a client logs and through which logger.
type LogRecorder struct {
	mu    *sync.Mutex
	recs  *[]slog.Record
	attrs []slog.Attr
}

// NewLogRecorder returns an empty recorder.
func NewLogRecorder() *LogRecorder {
	return &LogRecorder{mu: &sync.Mutex{}, recs: &[]slog.Record{}}
}

// Logger returns a logger writing to the recorder.
func (r *LogRecorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled reports true for every level.
func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of rec with the handler's attributes.
func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.recs = append(*r.recs, rec)
	return nil
}

// WithAttrs returns a handler sharing the records that adds attrs.
func (r *LogRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogRecorder{mu: r.mu, recs: r.recs, attrs: append(append([]slog.Attr(nil), r.attrs...), attrs...)}
}

// WithGroup is not supported: attributes stay flat.
func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Records returns the records so far.
func (r *LogRecorder) Records() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), *r.recs...)
}

// Count returns how many records are at min or above.
func (r *LogRecorder) Count(min slog.Level) int {
	n := 0
	for _, rec := range r.Records() {
		if rec.Level >= min {
			n++
		}
	}
	return n
}

// Has reports whether a record's message contains s.
func (r *LogRecorder) Has(s string) bool {
	for _, rec := range r.Records() {
		if strings.Contains(rec.Message, s) {
			return true
		}
	}
	return false
}

// String lists the records, one a line, with their attributes.
func (r *LogRecorder) String() string {
	var b strings.Builder
	for _, rec := range r.Records() {
		fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		b.WriteByte('\n')
	}
	return b.String()
}
