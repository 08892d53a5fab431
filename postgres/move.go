package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fila-go/fila/backend"
)

// Capabilities for moving queues between brokers.
var (
	_ backend.DelayedReceiver = (*Driver)(nil)
	_ backend.DeadImporter    = (*Driver)(nil)
)

// ReceiveDelayed claims, without blocking, up to p.Max messages whose run-at
// has not come (earliest first, whatever their level), leasing them like
// Receive, with their levels. The run-at is
// kept: if such a lease expires unsettled, the message becomes claimable at
// the later of its deadline and its run-at, and ReceiveDelayed may take it
// again before then.
func (d *Driver) ReceiveDelayed(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	return d.claim(ctx, d.q.claimDelayed, queue, p, true, nil, nil)
}

// DeadImport stores dead letters taken from another broker with one INSERT;
// ids the dead-letter table already holds are skipped, so an import can be
// repeated.
func (d *Driver) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if len(letters) == 0 {
		return nil
	}
	n := len(letters)
	var (
		ids, kinds, reasons []string
		bodies              = make([][]byte, 0, n)
		headers             = make([]pgtype.Text, 0, n)
		enq                 = make([]time.Time, 0, n)
		attempts, maxAtt    = make([]int32, 0, n), make([]int32, 0, n)
		dedup               = make([]pgtype.Text, 0, n)
		deadAt              = make([]pgtype.Timestamptz, 0, n)
		priorities          = make([]int16, 0, n)
	)
	for i := range letters {
		l := &letters[i]
		if !validUUID(l.ID) {
			return backend.Invalidf("dead letter id %q is not a UUID", l.ID)
		}
		if strings.IndexByte(l.DedupKey, 0) >= 0 {
			return backend.Invalidf("dead letter %s: dedup key contains U+0000, which PostgreSQL text cannot store", l.ID)
		}
		ids = append(ids, l.ID)
		kinds = append(kinds, l.Kind)
		reasons = append(reasons, textSafe(l.Reason))
		bodies = append(bodies, l.Body)
		var h pgtype.Text
		if len(l.Headers) > 0 {
			b, err := json.Marshal(l.Headers)
			if err != nil {
				return backend.Invalidf("dead letter %s headers: %v", l.ID, err)
			}
			h = pgtype.Text{String: string(b), Valid: true}
		}
		headers = append(headers, h)
		e := l.EnqueuedAt
		if e.IsZero() {
			e = time.Now()
		}
		enq = append(enq, e)
		attempts = append(attempts, int32(max(l.Attempts, 0)))
		maxAtt = append(maxAtt, int32(max(l.MaxAttempts, 0)))
		dedup = append(dedup, pgtype.Text{String: l.DedupKey, Valid: l.DedupKey != ""})
		deadAt = append(deadAt, pgtype.Timestamptz{Time: l.DeadAt, Valid: !l.DeadAt.IsZero()})
		priorities = append(priorities, int16(min(max(l.Priority, 0), backend.MaxPriority)))
	}
	args := []any{queue, ids, kinds, bodies, headers, enq, attempts, maxAtt, dedup, reasons, deadAt}
	if d.Priorities() { // the log mode's statement stores no level
		args = append(args, priorities)
	}
	_, err := d.pool.Exec(ctx, d.q.deadImport, args...)
	return mapErr(ctx, "dead import", err)
}
