package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
)

// QueueStats counts queue's messages with one query over the hot table
// (FILTER clauses, and the ready ones per level in the default mode) and
// one over the dead-letter table (per kind). A message
// whose lease expired without settlement counts as ready (it is claimable),
// and became ready at its old deadline.
func (d *Driver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	if d.isClosed() {
		return backend.Stats{}, backend.ErrClosed
	}
	var (
		s      backend.Stats
		oldest *time.Time
	)
	b := &pgx.Batch{}
	b.Queue(d.q.stats, queue)
	b.Queue(d.q.deadCounts, queue)
	br := d.pool.SendBatch(ctx, b)
	defer br.Close()
	if err := br.QueryRow().Scan(&s.Ready, &s.Delayed, &s.Leased, &oldest, &s.ReadyByPriority); err != nil {
		return backend.Stats{}, mapErr(ctx, "stats", err)
	}
	if oldest != nil {
		s.OldestReadyAt = *oldest
	}
	rows, err := br.Query()
	if err != nil {
		return backend.Stats{}, mapErr(ctx, "stats: dead letters", err)
	}
	s.DeadByKind = map[string]int64{}
	var (
		kind string
		n    int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&kind, &n}, func() error {
		s.DeadByKind[kind] = n
		s.Dead += n
		return nil
	}); err != nil {
		return backend.Stats{}, mapErr(ctx, "stats: dead letters", err)
	}
	if err := br.Close(); err != nil {
		return backend.Stats{}, mapErr(ctx, "stats", err)
	}
	return s, nil
}
