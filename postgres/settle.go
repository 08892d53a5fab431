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
	a := d.planAck(refs)
	if err := d.runAck(ctx, a); err != nil {
		return nil, err
	}
	return a.errs, nil
}

// ackPlan is the statement that acks a batch of refs, chosen before it is
// sent (planAck), and the per-ref outcome its result fills in (read).
type ackPlan struct {
	refs []backend.Ref
	errs []error
	sql  string // "": every ref was refused before a statement
	args []any
	// whole: sql is log_ack_whole, which settles a claim from its token
	// and runs alone and says whether it could; when it could not, retry
	// is the statement that settles the members one by one.
	whole bool
	key   [8]byte
	retry []any
}

// planAck validates refs and picks the statement that acks them: the
// log mode's whole-claim ack when refs are every member of one claim this
// driver received, its claim ack when they are members of one claim, else
// the ack of each ref.
func (d *Driver) planAck(refs []backend.Ref) *ackPlan {
	a := &ackPlan{refs: refs, errs: make([]error, len(refs))}
	ids := make([]pgtype.UUID, 0, len(refs))
	tokens := make([]pgtype.UUID, 0, len(refs))
	for i, r := range refs {
		id, ok := parseUUID(r.ID)
		token, ok2 := parseUUID(r.Receipt)
		if !ok || !ok2 {
			a.errs[i] = backend.ErrLeaseLost
			continue
		}
		ids = append(ids, id)
		tokens = append(tokens, token)
	}
	if len(ids) == 0 {
		return a
	}
	if d.q.ackClaim != "" && len(ids) == len(refs) {
		if token, runs, ok := claimRuns(tokens); ok {
			// The log mode, the members of one claim: settled with one
			// row when they are all of it ("*"), else as log_ack settles.
			a.sql, a.args = d.q.ackClaim, []any{token, runs, ids, tokens}
			// All the members a receive of this driver returned: the
			// token and the runs say it, when nothing about the claim
			// changed since.
			if key := [8]byte(token.Bytes[:8]); d.sizes.whole(key, len(ids)) {
				a.retry, a.key, a.whole = a.args, key, true
				a.sql, a.args = d.q.ackWhole, []any{token, runs}
			}
			return a
		}
	}
	a.sql, a.args = d.q.ack, []any{ids, tokens}
	return a
}

// runAck sends a's statement and reads its result, and sends the members'
// ack when the whole-claim ack could not settle the claim.
func (d *Driver) runAck(ctx context.Context, a *ackPlan) error {
	for a.sql != "" {
		rows, err := d.pool.Query(ctx, a.sql, a.args...)
		if err != nil {
			return mapErr(ctx, "ack", err)
		}
		if err := d.readAck(a, rows); err != nil {
			return mapErr(ctx, "ack", err)
		}
	}
	return nil
}

// readAck reads the result of a's statement into a.errs and clears a.sql,
// or, when the whole-claim ack could not settle the claim, sets a.sql to
// the members' ack, to be sent next.
func (d *Driver) readAck(a *ackPlan, rows pgx.Rows) error {
	if a.whole {
		whole, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
		if err != nil {
			return err
		}
		d.sizes.forget(a.key)
		a.whole = false
		if whole {
			d.wholeAcks.Add(1)
			a.sql = ""
		} else {
			a.sql, a.args = d.q.ackClaim, a.retry
		}
		return nil
	}
	a.sql = ""
	deleted := make(map[string]bool, len(a.refs))
	whole := false
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		if id == "*" {
			whole = true
		}
		deleted[id] = true
		return nil
	}); err != nil {
		return err
	}
	if whole {
		return nil
	}
	for i, r := range a.refs {
		if a.errs[i] != nil {
			continue
		}
		// The server returns ids in canonical lower case.
		key := lower(r.ID)
		if deleted[key] {
			delete(deleted, key) // a repeated ref is a second settlement
		} else {
			a.errs[i] = backend.ErrLeaseLost
		}
	}
	return nil
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
