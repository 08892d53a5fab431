package mysql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/fila-go/fila/backend"
)

// ackRef is a ref whose id and receipt are this driver's.
type ackRef struct {
	i     int
	id    string
	token []byte
}

// checkRefs sets ErrLeaseLost for refs this driver cannot have made and
// returns the others.
func checkRefs(refs []backend.Ref, errs []error) []ackRef {
	out := make([]ackRef, 0, len(refs))
	for i, r := range refs {
		token, ok := parseToken(r.Receipt)
		if !ok || !validUUID(r.ID) {
			errs[i] = backend.ErrLeaseLost
			continue
		}
		out = append(out, ackRef{i: i, id: r.ID, token: token})
	}
	return out
}

// Ack deletes the messages whose receipts are current; the others get
// ErrLeaseLost. One ref is one DELETE. Several are one transaction (see
// ackIn): a DELETE of them all, and when one lease was not current, a
// locking read and a DELETE of those that are.
func (d *Driver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	errs := make([]error, len(refs))
	ok := checkRefs(refs, errs)
	switch len(ok) {
	case 0:
		return errs, nil
	case 1:
		res, err := d.db.ExecContext(ctx, d.q.ackOne, uid(ok[0].id), ok[0].token)
		if err != nil {
			return nil, mapErr(ctx, "ack", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, mapErr(ctx, "ack", err)
		} else if n == 0 {
			errs[ok[0].i] = backend.ErrLeaseLost
		}
		return errs, nil
	}
	err := d.inTx(ctx, "ack", func(tx *sql.Tx) error { return d.ackIn(ctx, tx, ok, errs, false) })
	if errors.Is(err, errAckSlow) {
		err = d.inTx(ctx, "ack", func(tx *sql.Tx) error { return d.ackIn(ctx, tx, ok, errs, true) })
	}
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// errAckSlow makes the transaction of a fast ack roll back, to be run
// again with the ack's slow path.
var errAckSlow = errors.New("fila/mysql: a lease of the ack was not current")

// ackIn acks refs inside tx, setting errs for the leases that are not
// current. The fast path is one DELETE naming every (id, receipt): when
// its row count is the number of refs, every lease was current, the usual
// case. Otherwise it returns errAckSlow, the caller rolls the transaction
// back and runs it again with slow: a locking read of the refs' rows tells
// which leases are current, and a DELETE removes those.
func (d *Driver) ackIn(ctx context.Context, tx *sql.Tx, refs []ackRef, errs []error, slow bool) error {
	if !slow {
		args := make([]any, 0, 3*len(refs))
		for _, r := range refs {
			args = append(args, uid(r.id))
		}
		for _, r := range refs {
			args = append(args, uid(r.id), r.token)
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM "+d.q.msgs+" WHERE id IN "+placeholders(len(refs))+
			" AND (id, lease_token) IN ("+rows("(?, ?)", len(refs))+") AND visible_at > "+now, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if int(n) != len(refs) {
			return errAckSlow
		}
		for _, r := range refs {
			errs[r.i] = nil
		}
		return nil
	}
	for _, r := range refs {
		errs[r.i] = backend.ErrLeaseLost
	}
	ids := make([]any, len(refs))
	for i, r := range refs {
		ids[i] = uid(r.id)
	}
	rs, err := tx.QueryContext(ctx, "SELECT id, lease_token, visible_at > "+now+" FROM "+d.q.msgs+
		" WHERE id IN "+placeholders(len(ids))+" FOR UPDATE", ids...)
	if err != nil {
		return err
	}
	type lease struct {
		token []byte
		alive bool
	}
	current := make(map[string]lease, len(refs))
	for rs.Next() {
		var id string
		var l lease
		if err := rs.Scan(uidDest{&id}, &l.token, &l.alive); err != nil {
			rs.Close()
			return err
		}
		current[id] = l
	}
	if err := rs.Close(); err != nil {
		return err
	}
	if err := rs.Err(); err != nil {
		return err
	}
	var del []any
	for _, r := range refs {
		if l, ok := current[r.id]; ok && l.alive && string(l.token) == string(r.token) {
			errs[r.i] = nil
			del = append(del, uid(r.id))
			delete(current, r.id) // a ref given twice is acked once
		}
	}
	if len(del) == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, "DELETE FROM "+d.q.msgs+" WHERE id IN "+placeholders(len(del)), del...)
	return err
}

// AckReceive acks refs as Ack does and claims up to p.Max ready messages
// of queue, without waiting for more, in one transaction: one commit for
// both.
func (d *Driver) AckReceive(ctx context.Context, refs []backend.Ref, queue string, p backend.ReceiveParams) ([]error, []backend.Delivery, error) {
	if d.isClosed() {
		return nil, nil, backend.ErrClosed
	}
	errs := make([]error, len(refs))
	ok := checkRefs(refs, errs)
	var ds []backend.Delivery
	ack := func(slow bool) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			if len(ok) == 0 {
				return nil
			}
			return d.ackIn(ctx, tx, ok, errs, slow)
		}
	}
	err := d.claimTx(ctx, d.q.claim, queue, p, ack(false), &ds)
	if errors.Is(err, errAckSlow) {
		err = d.claimTx(ctx, d.q.claim, queue, p, ack(true), &ds)
	}
	if err != nil {
		return nil, nil, err
	}
	return errs, ds, nil
}

// Retry ends the lease and makes the message claimable after delay,
// keeping reason as its last error, and wakes this driver's receivers of
// the queue.
func (d *Driver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	token, ok := parseToken(ref.Receipt)
	if !ok || !validUUID(ref.ID) {
		return backend.ErrLeaseLost
	}
	res, err := d.db.ExecContext(ctx, d.q.retry, delay.Microseconds(), reason, uid(ref.ID), token)
	if err != nil {
		return mapErr(ctx, "retry", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr(ctx, "retry", err)
	} else if n == 0 {
		return backend.ErrLeaseLost
	}
	d.wake.Wake(ref.Queue)
	return nil
}

// Dead moves the message to the dead-letter table in one transaction: a
// locking read checks the lease, then the row is copied and deleted.
func (d *Driver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	token, ok := parseToken(ref.Receipt)
	if !ok || !validUUID(ref.ID) {
		return backend.ErrLeaseLost
	}
	return d.inTx(ctx, "dead", func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, d.q.deadLock, uid(ref.ID), token).Scan(&one); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return backend.ErrLeaseLost
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, d.q.deadCopy, attempts, reason, uid(ref.ID)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, d.q.deadDelete, uid(ref.ID))
		return err
	})
}

// Extend moves the lease deadline to now + lease on the server's clock and
// returns it: an UPDATE, then a read of the deadline it set.
func (d *Driver) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	if d.isClosed() {
		return time.Time{}, backend.ErrClosed
	}
	token, ok := parseToken(ref.Receipt)
	if !ok || !validUUID(ref.ID) {
		return time.Time{}, backend.ErrLeaseLost
	}
	us := lease.Microseconds()
	if lease%time.Microsecond != 0 {
		us++
	}
	if _, err := d.db.ExecContext(ctx, d.q.extend, us, uid(ref.ID), token); err != nil {
		return time.Time{}, mapErr(ctx, "extend", err)
	}
	// The UPDATE's row count cannot tell a lease it did not find from one
	// it set to the deadline it already had (without CLIENT_FOUND_ROWS):
	// the read says which.
	var deadline int64
	var alive bool
	err := d.db.QueryRowContext(ctx, d.q.leaseOf, uid(ref.ID), token).Scan(&deadline, &alive)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !alive) {
		return time.Time{}, backend.ErrLeaseLost
	}
	if err != nil {
		return time.Time{}, mapErr(ctx, "extend", err)
	}
	return time.UnixMicro(deadline), nil
}
