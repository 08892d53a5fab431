package mysql

import (
	"context"
	"database/sql"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/fila-go/fila/backend"
)

// DeadList pages through queue's dead letters, oldest first, by the keyset
// (dead_at, id) of the dead_list index; the cursor encodes the last row of
// the previous page.
func (d *Driver) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	if d.isClosed() {
		return backend.DeadPage{}, backend.ErrClosed
	}
	limit := max(p.Limit, 1)
	var where strings.Builder
	args := []any{p.WithoutBodies, queue}
	where.WriteString("queue = ?")
	if p.Kind != "" {
		where.WriteString(" AND kind = ?")
		args = append(args, p.Kind)
	}
	if p.Cursor != "" {
		t, id, err := decodeCursor(p.Cursor)
		if err != nil {
			return backend.DeadPage{}, err
		}
		where.WriteString(" AND (dead_at > ? OR (dead_at = ? AND id > ?))")
		args = append(args, t, t, uid(id))
	}
	ids, none := filterIDs(p.IDs)
	if none {
		return backend.DeadPage{}, nil
	}
	if ids != nil {
		where.WriteString(" AND id IN " + placeholders(len(ids)))
		args = append(args, ids...)
	}
	args = append(args, limit+1)
	rs, err := d.db.QueryContext(ctx, `SELECT id, kind, IF(?, NULL, body), headers, enqueued_at, attempts, max_attempts,
	dedup_key, reason, dead_at, priority FROM `+d.q.dead+` FORCE INDEX (dead_list) WHERE `+where.String()+`
ORDER BY dead_at, id LIMIT ?`, args...)
	if err != nil {
		return backend.DeadPage{}, mapErr(ctx, "dead list", err)
	}
	defer rs.Close()
	var page backend.DeadPage
	for rs.Next() {
		var (
			l                   backend.DeadLetter
			headers, dedup, why []byte
			enq, deadAt         int64
		)
		if err := rs.Scan(uidDest{&l.ID}, &l.Kind, &l.Body, &headers, &enq, &l.Attempts, &l.MaxAttempts, &dedup, &why, &deadAt, &l.Priority); err != nil {
			return backend.DeadPage{}, mapErr(ctx, "dead list", err)
		}
		l.Queue, l.DedupKey, l.Reason = queue, string(dedup), string(why)
		l.EnqueuedAt, l.DeadAt = time.UnixMicro(enq), time.UnixMicro(deadAt)
		if l.Headers, err = decodeHeaders(headers); err != nil {
			return backend.DeadPage{}, mapErr(ctx, "dead list", err)
		}
		page.Letters = append(page.Letters, l)
	}
	if err := rs.Err(); err != nil {
		return backend.DeadPage{}, mapErr(ctx, "dead list", err)
	}
	if len(page.Letters) > limit {
		page.Letters = page.Letters[:limit]
		last := page.Letters[limit-1]
		page.Next = encodeCursor(last.DeadAt.UnixMicro(), last.ID)
	}
	return page, nil
}

// deadWhere returns the WHERE clause and arguments that select f's dead
// letters of queue; none is true when f names ids and none is a UUID.
func deadWhere(queue string, f backend.DeadFilter) (string, []any, bool) {
	where := "queue = ?"
	args := []any{queue}
	if f.Kind != "" {
		where += " AND kind = ?"
		args = append(args, f.Kind)
	}
	ids, none := filterIDs(f.IDs)
	if none {
		return "", nil, true
	}
	if ids != nil {
		where += " AND id IN " + placeholders(len(ids))
		args = append(args, ids...)
	}
	return where, args, false
}

// DeadReplay moves the selected dead letters back to the messages table,
// ready at once at their levels with attempts reset, dedup keys dropped
// and no last error, in one transaction, and wakes this driver's
// receivers of the queue.
func (d *Driver) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	if d.isClosed() {
		return 0, backend.ErrClosed
	}
	where, args, none := deadWhere(queue, f)
	if none {
		return 0, nil
	}
	var n int
	err := d.inTx(ctx, "dead replay", func(tx *sql.Tx) error {
		n = 0
		// Lock the letters first, so a concurrent replay or purge of the
		// same letters waits and then finds them gone.
		rs, err := tx.QueryContext(ctx, "SELECT id FROM "+d.q.dead+" WHERE "+where+" FOR UPDATE", args...)
		if err != nil {
			return err
		}
		var ids []any
		for rs.Next() {
			var id []byte // as the column holds it
			if err := rs.Scan(&id); err != nil {
				rs.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rs.Close(); err != nil {
			return err
		}
		if err := rs.Err(); err != nil {
			return err
		}
		for start := 0; start < len(ids); start += chunkRows {
			part := ids[start:min(start+chunkRows, len(ids))]
			in := placeholders(len(part))
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+d.q.msgs+` (id, queue, kind, body, headers, enqueued_at, visible_at, attempts, max_attempts, prank)
SELECT id, queue, kind, body, headers, enqueued_at, `+now+`, 0, max_attempts, 3 - priority FROM `+d.q.dead+" WHERE id IN "+in, part...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+d.q.dead+" WHERE id IN "+in, part...); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		d.wake.Wake(queue)
	}
	return n, nil
}

// DeadPurge deletes the selected dead letters.
func (d *Driver) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	if d.isClosed() {
		return 0, backend.ErrClosed
	}
	where, args, none := deadWhere(queue, f)
	if none {
		return 0, nil
	}
	res, err := d.db.ExecContext(ctx, "DELETE FROM "+d.q.dead+" WHERE "+where, args...)
	if err != nil {
		return 0, mapErr(ctx, "dead purge", err)
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(ctx, "dead purge", err)
}

// DeadImport stores dead letters taken from another broker; ids the
// dead-letter table already holds are skipped, so an import can be
// repeated. All of them or none: one transaction.
func (d *Driver) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if len(letters) == 0 {
		return nil
	}
	args := make([]any, 0, 12*len(letters))
	for i := range letters {
		l := &letters[i]
		if !validUUID(l.ID) {
			return backend.Invalidf("dead letter id %q is not a UUID", l.ID)
		}
		headers, err := encodeHeaders(l.Headers)
		if err != nil {
			return err
		}
		var dedup, deadAt any
		if l.DedupKey != "" {
			dedup = l.DedupKey
		}
		if !l.DeadAt.IsZero() {
			deadAt = l.DeadAt.UnixMicro()
		}
		body := l.Body
		if body == nil {
			body = []byte{}
		}
		args = append(args, uid(l.ID), queue, l.Kind, body, headers, l.EnqueuedAt.UnixMicro(), l.Attempts, l.MaxAttempts,
			dedup, l.Reason, deadAt, l.Priority)
	}
	return d.inTx(ctx, "dead import", func(tx *sql.Tx) error {
		for start := 0; start < len(letters); start += chunkRows {
			end := min(start+chunkRows, len(letters))
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+d.q.dead+" "+deadCols+" VALUES "+rows(deadRow, end-start)+
				" ON DUPLICATE KEY UPDATE id = id", args[12*start:12*end]...); err != nil {
				return err
			}
		}
		return nil
	})
}

// filterIDs returns ids as arguments: nil (no id filter) when ids is nil,
// and none=true when ids were given but none is a UUID, so nothing can
// match.
func filterIDs(ids []string) (out []any, none bool) {
	if ids == nil {
		return nil, false
	}
	out = make([]any, 0, len(ids))
	for _, id := range ids {
		if validUUID(id) {
			out = append(out, uid(id))
		}
	}
	return out, len(out) == 0
}

// encodeCursor makes an opaque cursor from the last row of a page.
func encodeCursor(us int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(us, 10) + "." + id))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		us, id, ok := strings.Cut(string(b), ".")
		n, perr := strconv.ParseInt(us, 10, 64)
		if ok && perr == nil && validUUID(id) {
			return n, id, nil
		}
	}
	return 0, "", backend.Invalidf("dead-letter cursor %q is not one this driver returned", c)
}
