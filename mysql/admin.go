package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/fila-go/fila/backend"
)

// QueueStats counts queue's messages by state, its dead letters by kind and
// its ready messages by level, and finds its oldest ready message.
func (d *Driver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	if d.isClosed() {
		return backend.Stats{}, backend.ErrClosed
	}
	var s backend.Stats
	var oldest sql.NullInt64
	s.ReadyByPriority = make([]int64, backend.MaxPriority+1)
	byLevel := s.ReadyByPriority
	if err := d.db.QueryRowContext(ctx, d.q.stats, queue).Scan(&s.Ready, &s.Delayed, &s.Leased, &oldest,
		&byLevel[0], &byLevel[1], &byLevel[2], &byLevel[3]); err != nil {
		return backend.Stats{}, mapErr(ctx, "stats", err)
	}
	if oldest.Valid {
		s.OldestReadyAt = time.UnixMicro(oldest.Int64)
	}
	rs, err := d.db.QueryContext(ctx, d.q.deadCounts, queue)
	if err != nil {
		return backend.Stats{}, mapErr(ctx, "stats", err)
	}
	defer rs.Close()
	s.DeadByKind = map[string]int64{}
	for rs.Next() {
		var kind string
		var n int64
		if err := rs.Scan(&kind, &n); err != nil {
			return backend.Stats{}, mapErr(ctx, "stats", err)
		}
		s.DeadByKind[kind] = n
		s.Dead += n
	}
	return s, mapErr(ctx, "stats", rs.Err())
}

// QueueList returns the names of the queues that hold a message or a dead
// letter, sorted bytewise.
func (d *Driver) QueueList(ctx context.Context) ([]string, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	rs, err := d.db.QueryContext(ctx, d.q.queueList)
	if err != nil {
		return nil, mapErr(ctx, "queue list", err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var q string
		if err := rs.Scan(&q); err != nil {
			return nil, mapErr(ctx, "queue list", err)
		}
		out = append(out, q)
	}
	return out, mapErr(ctx, "queue list", rs.Err())
}

// QueueDelete deletes queue's messages, dead letters and marks in one
// transaction.
func (d *Driver) QueueDelete(ctx context.Context, queue string) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	return d.inTx(ctx, "queue delete", func(tx *sql.Tx) error {
		for _, t := range []string{d.q.msgs, d.q.dead, d.q.marks} {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+t+" WHERE queue = ?", queue); err != nil {
				return err
			}
		}
		return nil
	})
}

// expiry returns a mark's expiry for the table: NULL for never.
func expiry(until time.Time) any {
	if until.IsZero() {
		return nil
	}
	return until.UnixMicro()
}

// MarkSet creates or replaces the mark. With onlyNew it inserts the mark
// and, when a row of that name exists, takes it over only if it has
// expired, under the row's lock: of concurrent callers exactly one gets
// true.
func (d *Driver) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	if d.isClosed() {
		return false, backend.ErrClosed
	}
	exp := expiry(until)
	if !onlyNew {
		err := d.execStatement(ctx, d.q.markSet, queue, name, exp, exp)
		return err == nil, mapErr(ctx, "mark set", err)
	}
	for try := 0; try < 3; try++ {
		err := d.execStatement(ctx, d.q.markInsert, queue, name, exp)
		if err == nil {
			return true, nil
		}
		if !isDuplicate(err) {
			return false, mapErr(ctx, "mark set", err)
		}
		var stored, gone bool
		err = d.inTx(ctx, "mark set", func(tx *sql.Tx) error {
			stored, gone = false, false
			var expired bool
			err := tx.QueryRowContext(ctx, d.q.markLock, queue, name).Scan(&expired)
			if errors.Is(err, sql.ErrNoRows) {
				gone = true // deleted since the INSERT: insert again
				return nil
			}
			if err != nil || !expired {
				return err
			}
			stored = true
			_, err = tx.ExecContext(ctx, d.q.markRenew, exp, queue, name)
			return err
		})
		if err != nil {
			return false, err
		}
		if !gone {
			return stored, nil
		}
	}
	return false, fmt.Errorf("fila/mysql: mark set: %w: mark %q of queue %q kept appearing and vanishing", ErrUnavailable, name, queue)
}

// isDuplicate reports MySQL's error 1062, a duplicate key.
func isDuplicate(err error) bool {
	var me *mysqlError
	return errors.As(err, &me) && me.Number == 1062
}

// MarkGet reports whether an unexpired mark of that name exists.
func (d *Driver) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	if d.isClosed() {
		return false, backend.ErrClosed
	}
	var ok bool
	err := d.db.QueryRowContext(ctx, d.q.markGet, queue, name).Scan(&ok)
	return ok, mapErr(ctx, "mark get", err)
}

// MarkDelete deletes the mark.
func (d *Driver) MarkDelete(ctx context.Context, queue, name string) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	return mapErr(ctx, "mark delete", d.execStatement(ctx, d.q.markDelete, queue, name))
}

// execStatement runs one statement in a transaction of its own
// (autocommit), again (up to three times in all) after a deadlock or a
// lock wait timeout, which roll it back. Inserting and deleting the same
// mark keys from many clients at once, as concurrency slots do, deadlocks
// now and then on InnoDB's gap and insert-intention locks: the conformance
// test of concurrency limits saw it under load. It returns the last error
// unmapped.
func (d *Driver) execStatement(ctx context.Context, query string, args ...any) error {
	var err error
	for try := 0; try < 3; try++ {
		if _, err = d.db.ExecContext(ctx, query, args...); err == nil || !transient(err) {
			return err
		}
	}
	return err
}

// MarkList returns the names of queue's unexpired marks that start with
// prefix, sorted bytewise, and deletes up to 100 of its expired marks on
// the way.
func (d *Driver) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	if _, err := d.db.ExecContext(ctx, d.q.markSweep, queue); err != nil && !transient(err) {
		return nil, mapErr(ctx, "mark list", err)
	}
	rs, err := d.db.QueryContext(ctx, d.q.markList, queue, prefix, prefix, prefix)
	if err != nil {
		return nil, mapErr(ctx, "mark list", err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var n string
		if err := rs.Scan(&n); err != nil {
			return nil, mapErr(ctx, "mark list", err)
		}
		out = append(out, n)
	}
	return out, mapErr(ctx, "mark list", rs.Err())
}

// EnqueueMulti stores every queue's batch in one transaction, so a topic
// publish is one commit however many subscriptions it copies to, and all
// or nothing. Messages must not carry dedup keys (the portable layer sends
// those one queue at a time).
func (d *Driver) EnqueueMulti(ctx context.Context, batches []backend.QueueBatch) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if err := checkMulti(batches); err != nil {
		return err
	}
	err := d.inTx(ctx, "enqueue", func(tx *sql.Tx) error { return d.insertMulti(ctx, tx, batches) })
	if err == nil {
		for _, b := range batches {
			d.wake.Wake(b.Queue)
		}
	}
	return err
}

// EnqueueMultiTx is EnqueueMulti inside the caller's transaction.
func (d *Driver) EnqueueMultiTx(ctx context.Context, tx any, batches []backend.QueueBatch) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	q, err := querierOf("EnqueueMultiTx", tx)
	if err != nil {
		return err
	}
	if err := checkMulti(batches); err != nil {
		return err
	}
	if err := d.insertMulti(ctx, q, batches); err != nil {
		return mapErr(ctx, "enqueue", err)
	}
	for _, b := range batches {
		d.wake.Wake(b.Queue) // as EnqueueTx does
	}
	return nil
}

func checkMulti(batches []backend.QueueBatch) error {
	for _, b := range batches {
		for i := range b.Msgs {
			if !validUUID(b.Msgs[i].ID) {
				return backend.Invalidf("message id %q is not a UUID", b.Msgs[i].ID)
			}
			if b.Msgs[i].DedupKey != "" {
				return backend.Invalidf("EnqueueMulti cannot store dedup keys; enqueue such messages queue by queue")
			}
		}
	}
	return nil
}

func (d *Driver) insertMulti(ctx context.Context, q Querier, batches []backend.QueueBatch) error {
	for _, b := range batches {
		which := make([]int, len(b.Msgs))
		for i := range which {
			which[i] = i
		}
		if err := d.insert(ctx, q, b.Queue, b.Msgs, which, false); err != nil {
			return err
		}
	}
	return nil
}
