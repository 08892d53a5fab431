package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fila-go/fila/backend"
)

var _ backend.MessageLister = (*Driver)(nil)

// The states of a row of the messages table at the statement's now(), as
// the stats statement counts them. Ready: claimable now (an expired lease
// included) and not held back by an early lease's run-at. Delayed: not
// leased and not due, or an expired lease taken early (ReceiveDelayed)
// whose run-at is ahead. Leased: a lease that has not expired.
const (
	condReady   = "visible_at <= now() AND (run_at IS NULL OR run_at <= now())"
	condDelayed = "((lease_token IS NULL AND visible_at > now()) OR (visible_at <= now() AND run_at > now()))"
	condLeased  = "visible_at > now() AND lease_token IS NOT NULL"
)

// messageStateSQL is the state of a row m, as the stats statement counts
// it.
const messageStateSQL = `CASE WHEN m.lease_token IS NOT NULL AND m.visible_at > now() THEN 'leased'
		WHEN (m.lease_token IS NULL AND m.visible_at > now()) OR (m.visible_at <= now() AND m.run_at > now()) THEN 'delayed'
		ELSE 'ready' END`

// messageListCols are the columns a listing returns, of a row m. The state
// is the stats statement's; the due time is the lease deadline or run-at
// (visible_at) of a leased or a delayed message, the run-at an expired
// early lease keeps, or when a ready message became ready (GREATEST skips
// a NULL run_at).
const messageListCols = `m.id::text, m.kind, m.body, m.headers, m.enqueued_at, m.attempts, m.max_attempts,
	COALESCE(m.dedup_key, ''), COALESCE(m.last_error, ''), m.priority, m.visible_at,
	` + messageStateSQL + `,
	CASE WHEN m.visible_at > now() THEN m.visible_at WHEN m.run_at > now() THEN m.run_at
		ELSE GREATEST(m.visible_at, m.run_at) END`

// messageRowCols are the columns the inner reads take from the table: the
// body is not read (a TOASTed one not fetched) when $6 asks for none.
const messageRowCols = `id, kind, CASE WHEN $6::bool THEN NULL ELSE body END AS body, headers, enqueued_at, attempts,
		max_attempts, dedup_key, last_error, priority, visible_at, lease_token, run_at`

// messageListSQL lists the rows of a queue in the state cond, in the claim's
// order: level by level, highest first (levels, the outer side of a nested
// loop), each level's rows one range of messages_claim (queue, priority
// DESC, visible_at, id) in (visible_at, id) order, so no sort. The cursor
// ($3 level, $4 visible_at, $5 id; NULL for the first page) skips the
// levels above its own and starts its own level's range after it (the
// other levels' ranges start at -infinity). The outer LIMIT ($2, a page
// and one more row) stops the loop, so no level is read beyond the page.
// A ready listing's range ends at now() (the claimable rows, filtered by
// run_at); a leased one's starts there and reads past the delayed rows;
// a delayed one's reads past each level's claimable rows too (an expired
// early lease, which no index finds, sorts among them).
func messageListSQL(cond string) string {
	return `SELECT ` + messageListCols + `
FROM ` + levels + ` AS p(l)
CROSS JOIN LATERAL (
	SELECT ` + messageRowCols + `
	FROM {{s}}.messages
	WHERE queue = $1 AND priority = p.l
		AND (visible_at, id) > (
			CASE WHEN p.l = $3::int2 THEN $4::timestamptz ELSE '-infinity'::timestamptz END,
			CASE WHEN p.l = $3::int2 THEN $5::uuid ELSE '00000000-0000-0000-0000-000000000000'::uuid END)
		AND ` + cond + `
	ORDER BY visible_at, id
	LIMIT $2
) m
WHERE $3::int2 IS NULL OR p.l <= $3::int2
LIMIT $2`
}

// messageListIDsSQL finds the queue's messages among the ids $7, each by a
// probe of the primary key (the lateral subquery, kept apart by OFFSET 0,
// can only be a lookup by id: a plan that read the queue through
// messages_claim instead would read all of it), in the state $8 (any when
// empty), and sorts them (at most fila.MaxReceive rows) in the listing's
// order from the cursor on.
const messageListIDsSQL = `SELECT ` + messageListCols + `
FROM (SELECT DISTINCT id FROM unnest($7::uuid[]) AS i(id)) i
CROSS JOIN LATERAL (
	SELECT queue, ` + messageRowCols + `
	FROM {{s}}.messages
	WHERE id = i.id
	OFFSET 0
) m
WHERE m.queue = $1
	AND ($8::text = '' OR $8::text = ` + messageStateSQL + `)
	AND ($3::int2 IS NULL OR m.priority < $3::int2
		OR (m.priority = $3::int2 AND (m.visible_at, m.id) > ($4::timestamptz, $5::uuid)))
ORDER BY m.priority DESC, m.visible_at, m.id
LIMIT $2`

// MessageList lists queue's pending messages in one state (or those p.IDs
// names) in the claim's order: highest level first, then by visible_at
// (for ready messages, the order Receive takes them; for leased ones the
// lease deadline; for delayed ones the run-at, an expired early lease's
// old deadline), then by id. A page is one plain read, which locks
// nothing; the cursor is the last row's (level, visible_at, id). The log
// mode keeps no row per pending message and lists nothing
// (ErrUnsupported).
func (d *Driver) MessageList(ctx context.Context, queue string, p backend.MessageListParams) (backend.MessagePage, error) {
	if d.isClosed() {
		return backend.MessagePage{}, backend.ErrClosed
	}
	if d.mode == ModeLog {
		return backend.MessagePage{}, fmt.Errorf("%w: postgres: message listing is available in the skip-locked mode only: the log mode (fila_mode=log) keeps no row per pending message, whose state it derives from its streams' read positions, leases, claims and timers", backend.ErrUnsupported)
	}
	var sql string
	switch p.State {
	case backend.StateReady:
		sql = d.q.listReady
	case backend.StateDelayed:
		sql = d.q.listDelayed
	case backend.StateLeased:
		sql = d.q.listLeased
	case "":
		if p.IDs == nil {
			return backend.MessagePage{}, backend.Invalidf("message list: name a state or ids")
		}
	default:
		return backend.MessagePage{}, backend.Invalidf("message list: unknown state %q", p.State)
	}
	var (
		afterLevel pgtype.Int2
		afterAt    pgtype.Timestamptz
		afterID    pgtype.Text
	)
	if p.Cursor != "" {
		l, at, id, err := decodeListCursor(p.Cursor)
		if err != nil {
			return backend.MessagePage{}, err
		}
		afterLevel = pgtype.Int2{Int16: l, Valid: true}
		afterAt = pgtype.Timestamptz{Time: at, Valid: true}
		afterID = pgtype.Text{String: id, Valid: true}
	}
	limit := max(p.Limit, 1)
	args := []any{queue, limit + 1, afterLevel, afterAt, afterID, p.WithoutBodies}
	if p.IDs != nil {
		ids, none := filterIDs(backend.DeadFilter{IDs: p.IDs})
		if none {
			return backend.MessagePage{}, nil // no id given is a UUID: no such message
		}
		sql = d.q.listIDs
		args = append(args, ids, string(p.State))
	}
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return backend.MessagePage{}, mapErr(ctx, "message list", err)
	}
	type key struct {
		level int16
		at    time.Time
	}
	var (
		page    backend.MessagePage
		keys    []key
		m       backend.PendingMessage
		headers []byte
		att     int32
		maxAtt  int32
		level   int16
		visible time.Time
		state   string
	)
	_, err = pgx.ForEachRow(rows, []any{&m.ID, &m.Kind, &m.Body, &headers, &m.EnqueuedAt, &att, &maxAtt,
		&m.DedupKey, &m.LastError, &level, &visible, &state, &m.Due}, func() error {
		m.Attempts, m.MaxAttempts, m.Priority = int(att), int(maxAtt), int(level)
		m.State = backend.MessageState(state)
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &m.Headers); err != nil {
				return err
			}
		}
		page.Messages = append(page.Messages, m)
		keys = append(keys, key{level, visible})
		m, headers = backend.PendingMessage{}, nil
		return nil
	})
	if err != nil {
		return backend.MessagePage{}, mapErr(ctx, "message list", err)
	}
	if len(page.Messages) > limit {
		page.Messages = page.Messages[:limit]
		last := keys[limit-1]
		page.Next = encodeListCursor(last.level, last.at, page.Messages[limit-1].ID)
	}
	return page, nil
}

// encodeListCursor makes an opaque cursor from a page's last row: its
// level, visible_at (to the microsecond, PostgreSQL's precision) and id.
func encodeListCursor(level int16, at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(int(level)) + "." +
		strconv.FormatInt(at.UnixMicro(), 10) + "." + id))
}

func decodeListCursor(c string) (int16, time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		parts := strings.SplitN(string(b), ".", 3)
		if len(parts) == 3 {
			l, lerr := strconv.ParseInt(parts[0], 10, 16)
			us, uerr := strconv.ParseInt(parts[1], 10, 64)
			if lerr == nil && uerr == nil && l >= 0 && l <= backend.MaxPriority && validUUID(parts[2]) {
				return int16(l), time.UnixMicro(us), parts[2], nil
			}
		}
	}
	return 0, time.Time{}, "", backend.Invalidf("message cursor %q is not one this driver returned", c)
}
