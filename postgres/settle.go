package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fila-go/fila/backend"
)

// Ack deletes the messages whose receipts are current, all refs in one
// statement (one round trip). A ref whose receipt no longer matches (the
// lease was taken over, or the message was already settled) gets
// ErrLeaseLost.
func (d *Driver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	errs := make([]error, len(refs))
	ids := make([]string, 0, len(refs))
	tokens := make([]string, 0, len(refs))
	for i, r := range refs {
		if !validUUID(r.ID) || !validUUID(r.Receipt) {
			errs[i] = backend.ErrLeaseLost
			continue
		}
		ids = append(ids, r.ID)
		tokens = append(tokens, r.Receipt)
	}
	if len(ids) == 0 {
		return errs, nil
	}
	var (
		rows  pgx.Rows
		err   error
		token pgtype.UUID
		runs  []int64
		claim bool
	)
	if d.q.ackClaim != "" && len(ids) == len(refs) {
		token, runs, claim = claimRuns(tokens)
	}
	if claim {
		// All the members a receive of this driver returned: the token and
		// the runs say it, when nothing about the claim changed since.
		key := [8]byte(token.Bytes[:8])
		if d.sizes.whole(key, len(ids)) {
			var whole bool
			if err := d.pool.QueryRow(ctx, d.q.ackWhole, token, runs).Scan(&whole); err != nil {
				return nil, mapErr(ctx, "ack", err)
			}
			d.sizes.forget(key)
			if whole {
				d.wholeAcks.Add(1)
				return errs, nil
			}
		}
	}
	if claim {
		// The log mode, the members of one claim: settled with one row
		// when they are all of it ("*"), else as log_ack settles.
		rows, err = d.pool.Query(ctx, d.q.ackClaim, token, runs, pgUUIDs(ids), pgUUIDs(tokens))
	} else {
		rows, err = d.pool.Query(ctx, d.q.ack, pgUUIDs(ids), pgUUIDs(tokens))
	}
	if err != nil {
		return nil, mapErr(ctx, "ack", err)
	}
	deleted := make(map[string]bool, len(ids))
	whole := false
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		if id == "*" {
			whole = true
		}
		deleted[id] = true
		return nil
	}); err != nil {
		return nil, mapErr(ctx, "ack", err)
	}
	if whole {
		return errs, nil
	}
	for i, r := range refs {
		if errs[i] != nil {
			continue
		}
		// The server returns ids in canonical lower case.
		key := lower(r.ID)
		if deleted[key] {
			delete(deleted, key) // a repeated ref is a second settlement
		} else {
			errs[i] = backend.ErrLeaseLost
		}
	}
	return errs, nil
}

// Retry ends the lease and makes the message claimable after delay; an
// empty reason keeps the previous last error. It notifies the queue, so a
// receive blocked elsewhere until the old lease deadline wakes and sees the
// new run-at.
func (d *Driver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if !validUUID(ref.ID) || !validUUID(ref.Receipt) {
		return backend.ErrLeaseLost
	}
	tag, err := d.pool.Exec(ctx, d.q.retry, pgUUID(ref.ID), pgUUID(ref.Receipt), delay.Microseconds(), textSafe(reason), d.q.channel)
	if err != nil {
		return mapErr(ctx, "retry", err)
	}
	if tag.RowsAffected() == 0 {
		return backend.ErrLeaseLost
	}
	return nil
}

// Dead moves the message to the dead-letter table in one statement.
func (d *Driver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if !validUUID(ref.ID) || !validUUID(ref.Receipt) {
		return backend.ErrLeaseLost
	}
	tag, err := d.pool.Exec(ctx, d.q.dead, pgUUID(ref.ID), pgUUID(ref.Receipt), textSafe(reason), int32(attempts))
	if err != nil {
		return mapErr(ctx, "dead", err)
	}
	if tag.RowsAffected() == 0 {
		return backend.ErrLeaseLost
	}
	return nil
}

// Extend moves the deadline of a current lease (not yet expired) to now +
// lease by the server's clock.
func (d *Driver) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	if d.isClosed() {
		return time.Time{}, backend.ErrClosed
	}
	if !validUUID(ref.ID) || !validUUID(ref.Receipt) {
		return time.Time{}, backend.ErrLeaseLost
	}
	var deadline time.Time
	err := d.pool.QueryRow(ctx, d.q.extend, pgUUID(ref.ID), pgUUID(ref.Receipt), lease.Microseconds()).Scan(&deadline)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, backend.ErrLeaseLost
	}
	if err != nil {
		return time.Time{}, mapErr(ctx, "extend", err)
	}
	// A lease made shorter may be due before the queue's quiet mark says:
	// the next receive of the queue claims. (One blocked already wakes at
	// the due time it knew, as before.)
	d.waiters.noisy(ref.Queue)
	return deadline, nil
}

// lower returns s in ASCII lower case.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// textSafe replaces U+0000, which PostgreSQL text cannot store, with U+FFFD,
// so a reason carrying it does not fail the settlement.
func textSafe(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
