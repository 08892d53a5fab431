package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
)

// markUntil is the until column of a mark expiring at t: NULL for the zero
// time (never), else t rounded up to the microsecond, the precision of
// timestamptz, so a mark never expires early.
func markUntil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	r := t.Truncate(time.Microsecond)
	if r.Before(t) {
		r = r.Add(time.Microsecond)
	}
	return &r
}

// MarkSet creates or replaces mark name of queue, expiring at until (the
// zero time: never), with one INSERT ... ON CONFLICT statement
// (backend.Marker). With onlyNew the conflicting row is only taken over
// when its mark has expired by the server's clock, so of concurrent callers
// exactly one gets true. The statement also deletes a few of the queue's
// other expired marks.
func (d *Driver) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	if d.isClosed() {
		return false, backend.ErrClosed
	}
	sql := d.q.markSet
	if onlyNew {
		sql = d.q.markSetNew
	}
	tag, err := d.pool.Exec(ctx, sql, queue, name, markUntil(until))
	if err != nil {
		return false, mapErr(ctx, "mark set", err)
	}
	return tag.RowsAffected() == 1, nil
}

// MarkGet reports whether mark name of queue exists and has not expired by
// the server's clock (backend.Marker).
func (d *Driver) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	if d.isClosed() {
		return false, backend.ErrClosed
	}
	var live bool
	if err := d.pool.QueryRow(ctx, d.q.markGet, queue, name).Scan(&live); err != nil {
		return false, mapErr(ctx, "mark get", err)
	}
	return live, nil
}

// MarkDelete deletes mark name of queue; deleting a mark that does not
// exist is not an error (backend.Marker).
func (d *Driver) MarkDelete(ctx context.Context, queue, name string) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if _, err := d.pool.Exec(ctx, d.q.markDelete, queue, name); err != nil {
		return mapErr(ctx, "mark delete", err)
	}
	return nil
}

// MarkList returns the names of queue's unexpired marks that start with
// prefix, bytewise sorted, read from a range of the primary key
// (backend.MarkLister). The same statement deletes the queue's expired
// marks.
func (d *Driver) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.q.markList, queue, prefix)
	if err != nil {
		return nil, mapErr(ctx, "mark list", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(ctx, "mark list", err)
	}
	if names == nil {
		names = []string{}
	}
	return names, nil
}
