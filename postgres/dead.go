package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fila-go/fila/backend"
)

// DeadList pages through queue's dead letters, oldest first, by the keyset
// (dead_at, id); the cursor encodes the last row of the previous page.
func (d *Driver) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	if d.isClosed() {
		return backend.DeadPage{}, backend.ErrClosed
	}
	var (
		after   pgtype.Timestamptz
		afterID pgtype.Text
	)
	if p.Cursor != "" {
		t, id, err := decodeCursor(p.Cursor)
		if err != nil {
			return backend.DeadPage{}, err
		}
		after = pgtype.Timestamptz{Time: t, Valid: true}
		afterID = pgtype.Text{String: id, Valid: true}
	}
	limit := max(p.Limit, 1)
	ids, none := filterIDs(backend.DeadFilter{IDs: p.IDs})
	if none {
		return backend.DeadPage{}, nil // no id given is a UUID: no such dead letter
	}
	rows, err := d.pool.Query(ctx, d.q.deadList, queue, p.Kind, after, afterID, limit+1, ids, p.WithoutBodies)
	if err != nil {
		return backend.DeadPage{}, mapErr(ctx, "dead list", err)
	}
	var (
		page    backend.DeadPage
		l       backend.DeadLetter
		headers []byte
		att     int32
		maxAtt  int32
		prio    int16
	)
	_, err = pgx.ForEachRow(rows, []any{&l.ID, &l.Kind, &l.Body, &headers, &l.EnqueuedAt, &att, &maxAtt,
		&l.DedupKey, &l.Reason, &l.DeadAt, &prio}, func() error {
		l.Queue = queue
		l.Attempts, l.MaxAttempts, l.Priority = int(att), int(maxAtt), int(prio)
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &l.Headers); err != nil {
				return err
			}
		}
		page.Letters = append(page.Letters, l)
		l = backend.DeadLetter{}
		return nil
	})
	if err != nil {
		return backend.DeadPage{}, mapErr(ctx, "dead list", err)
	}
	if len(page.Letters) > limit {
		page.Letters = page.Letters[:limit]
		last := page.Letters[limit-1]
		page.Next = encodeCursor(last.DeadAt, last.ID)
	}
	return page, nil
}

// DeadReplay moves the selected dead letters back to the hot table, ready at
// once at their levels with attempts reset and dedup keys dropped, in one statement, and
// wakes the queue's receivers.
func (d *Driver) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	if d.isClosed() {
		return 0, backend.ErrClosed
	}
	ids, none := filterIDs(f)
	if none {
		return 0, nil
	}
	b := &pgx.Batch{}
	b.Queue(d.q.deadReplay, queue, f.Kind, ids)
	b.Queue(d.q.notify, d.q.channel, queue)
	br := d.pool.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, mapErr(ctx, "dead replay", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeadPurge deletes the selected dead letters.
func (d *Driver) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	if d.isClosed() {
		return 0, backend.ErrClosed
	}
	ids, none := filterIDs(f)
	if none {
		return 0, nil
	}
	tag, err := d.pool.Exec(ctx, d.q.deadPurge, queue, f.Kind, ids)
	if err != nil {
		return 0, mapErr(ctx, "dead purge", err)
	}
	return int(tag.RowsAffected()), nil
}

// filterIDs returns the filter's ids for a uuid[] parameter: nil (no id
// filter) when f.IDs is nil, and none=true when ids were given but none is a
// UUID, so nothing can match.
func filterIDs(f backend.DeadFilter) (ids []string, none bool) {
	if f.IDs == nil {
		return nil, false
	}
	ids = make([]string, 0, len(f.IDs))
	for _, id := range f.IDs {
		if validUUID(id) {
			ids = append(ids, id)
		}
	}
	return ids, len(ids) == 0
}

// encodeCursor makes an opaque cursor from the last row of a page.
func encodeCursor(t time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t.UnixMicro(), 10) + "." + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		us, id, ok := strings.Cut(string(b), ".")
		n, perr := strconv.ParseInt(us, 10, 64)
		if ok && perr == nil && validUUID(id) {
			return time.UnixMicro(n), id, nil
		}
	}
	return time.Time{}, "", backend.Invalidf("dead-letter cursor %q is not one this driver returned", c)
}
