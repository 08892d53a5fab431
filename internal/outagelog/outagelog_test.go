package outagelog

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/fila-go/fila/internal/testenv"
)

// TestBoundedLines: an outage of an hour with a failure every second logs
// one Warn at the start, a Warn at 1, 2, 4, 8, 16 and 32 minutes, one Info
// at the end, and every other failure at Debug.
func TestBoundedLines(t *testing.T) {
	rec := testenv.NewLogRecorder()
	o := New(rec.Logger())
	now := time.Unix(0, 0)
	o.now = func() time.Time { return now }
	o.Up("up") // no outage: nothing
	const failures = 3600
	for i := 0; i < failures; i++ {
		o.Down("down", slog.Any("error", errors.New("refused")))
		now = now.Add(time.Second)
	}
	o.Up("up")
	if got := rec.Count(slog.LevelWarn); got != 7 {
		t.Errorf("%d Warn lines for an hour-long outage, want 7:\n%s", got, rec)
	}
	if got := rec.Count(slog.LevelInfo) - rec.Count(slog.LevelWarn); got != 1 {
		t.Errorf("%d Info lines, want 1 (recovered)", got)
	}
	if got := len(rec.Records()); got != failures+1 {
		t.Errorf("%d lines in all, want one per failure plus the recovery", got)
	}
	// A second outage starts over.
	o.Down("down")
	if got := rec.Count(slog.LevelWarn); got != 8 {
		t.Errorf("a new outage did not warn at once: %d Warn lines", got)
	}
}
