package mysql

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/fila-go/fila/backend"
)

var _ backend.MessageLister = (*Driver)(nil)

// The conditions of each state on a row of the messages table, at the
// statement's now (n), as QueueStats counts them.
const (
	condReady   = "(m.visible_at <= n AND (m.run_at IS NULL OR m.run_at <= n))"
	condDelayed = "((m.lease_token IS NULL AND m.visible_at > n) OR (m.visible_at <= n AND m.run_at > n))"
	condLeased  = "(m.lease_token IS NOT NULL AND m.visible_at > n)"
)

// MessageList lists queue's pending messages in one state (or those p.IDs
// names) in the order of the claim index: highest level first, then by
// visible_at (for ready messages, the order Receive takes them), then by
// id. The cursor is the last row's (level, visible_at, id). Nothing is
// locked: the read is a plain consistent read.
func (d *Driver) MessageList(ctx context.Context, queue string, p backend.MessageListParams) (backend.MessagePage, error) {
	if d.isClosed() {
		return backend.MessagePage{}, backend.ErrClosed
	}
	var where strings.Builder
	args := []any{p.WithoutBodies, queue}
	where.WriteString("m.queue = ?")
	switch p.State {
	case backend.StateReady:
		where.WriteString(" AND " + condReady)
	case backend.StateDelayed:
		where.WriteString(" AND " + condDelayed)
	case backend.StateLeased:
		where.WriteString(" AND " + condLeased)
	case "":
	default:
		return backend.MessagePage{}, backend.Invalidf("message list: unknown state %q", p.State)
	}
	if p.Cursor != "" {
		prank, visible, id, err := decodeListCursor(p.Cursor)
		if err != nil {
			return backend.MessagePage{}, err
		}
		where.WriteString(" AND (m.prank > ? OR (m.prank = ? AND (m.visible_at > ? OR (m.visible_at = ? AND m.id > ?))))")
		args = append(args, prank, prank, visible, visible, uid(id))
	}
	ids, none := filterIDs(p.IDs)
	if none {
		return backend.MessagePage{}, nil
	}
	if ids != nil {
		where.WriteString(" AND m.id IN " + placeholders(len(ids)))
		args = append(args, ids...)
	}
	limit := max(p.Limit, 1)
	args = append(args, limit+1)
	rs, err := d.db.QueryContext(ctx, `SELECT m.id, m.kind, IF(?, NULL, m.body), m.headers, m.enqueued_at, m.attempts,
	m.max_attempts, m.dedup_key, m.last_error, m.prank, m.visible_at,
	CASE WHEN `+condLeased+` THEN 'leased' WHEN `+condDelayed+` THEN 'delayed' ELSE 'ready' END,
	CASE WHEN `+condLeased+` THEN m.visible_at WHEN m.lease_token IS NULL OR m.run_at IS NULL THEN m.visible_at
		ELSE GREATEST(m.visible_at, m.run_at) END
FROM `+d.q.msgs+` m FORCE INDEX (messages_claim) CROSS JOIN (SELECT `+now+` AS n) t
WHERE `+where.String()+`
ORDER BY m.prank, m.visible_at, m.id LIMIT ?`, args...)
	if err != nil {
		return backend.MessagePage{}, mapErr(ctx, "message list", err)
	}
	defer rs.Close()
	var page backend.MessagePage
	var lastPrank int
	var lastVisible int64
	for rs.Next() {
		var (
			m                       backend.PendingMessage
			headers, dedup, lastErr []byte
			enq, visible, due       int64
			prank                   int
			state                   string
		)
		if err := rs.Scan(uidDest{&m.ID}, &m.Kind, &m.Body, &headers, &enq, &m.Attempts, &m.MaxAttempts, &dedup, &lastErr,
			&prank, &visible, &state, &due); err != nil {
			return backend.MessagePage{}, mapErr(ctx, "message list", err)
		}
		if len(page.Messages) == limit {
			last := page.Messages[limit-1]
			page.Next = encodeListCursor(lastPrank, lastVisible, last.ID)
			break
		}
		m.DedupKey, m.LastError = string(dedup), string(lastErr)
		m.Priority = backend.MaxPriority - prank
		m.EnqueuedAt, m.Due = time.UnixMicro(enq), time.UnixMicro(due)
		m.State = backend.MessageState(state)
		if m.Headers, err = decodeHeaders(headers); err != nil {
			return backend.MessagePage{}, mapErr(ctx, "message list", err)
		}
		page.Messages = append(page.Messages, m)
		lastPrank, lastVisible = prank, visible
	}
	return page, mapErr(ctx, "message list", rs.Err())
}

func encodeListCursor(prank int, visible int64, id string) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d.%s", prank, visible, id))
}

func decodeListCursor(c string) (int, int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		var prank int
		var visible int64
		var id string
		if _, serr := fmt.Sscanf(string(b), "%d.%d.%s", &prank, &visible, &id); serr == nil && validUUID(id) {
			return prank, visible, id, nil
		}
	}
	return 0, 0, "", backend.Invalidf("message cursor %q is not one this driver returned", c)
}
