package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/linger"
	"github.com/fila-go/fila/internal/uuidtext"
)

// Receive claims up to p.Max messages of queue, blocking until there is
// one or ctx ends. After an empty claim it waits for the first of: a
// wake-up from this driver (an enqueue, a replay, a retry), the queue's
// next due time (a delay ending, a lease expiring), or the poll interval,
// which starts at MinPollInterval and doubles up to fila_poll_interval
// while the queue stays empty. A poll reads the queue's next due time
// (one index probe per level) and claims only when a message is due, so
// idle receivers only read. A claim sent runs to its end (see claimTx)
// and what it claimed is returned with a nil error even when ctx ended
// meanwhile.
func (d *Driver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	poll := MinPollInterval
	claimNow := true
	for {
		if d.isClosed() {
			return nil, backend.ErrClosed
		}
		woken := d.wake.Sub(queue)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var until time.Duration
		known := false
		if !claimNow {
			var err error
			if until, known, err = d.nextDue(ctx, queue); err != nil {
				return nil, mapErr(ctx, "receive", err)
			}
			claimNow = known && until <= 0
		}
		if claimNow {
			ds, err := d.claim(ctx, d.q.claim, queue, p)
			if len(ds) > 0 {
				return ds, nil
			}
			if err != nil {
				return nil, mapErr(ctx, "receive", err)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if until, known, err = d.nextDue(ctx, queue); err != nil {
				return nil, mapErr(ctx, "receive", err)
			}
		}
		wait, atDue := poll, false
		if known && until < wait {
			// +1ms: the next due time is a microsecond count and the
			// claim's now must have passed it.
			wait, atDue = max(until+time.Millisecond, 0), true
		}
		timer := time.NewTimer(wait)
		d.waits.Add(1)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-d.done:
			timer.Stop()
			return nil, backend.ErrClosed
		case <-woken:
			timer.Stop()
			poll, claimNow = MinPollInterval, true
		case <-timer.C:
			claimNow = atDue
			if !atDue {
				poll = min(poll*2, d.poll)
			}
		}
	}
}

// nextDue returns how long until the queue's next message becomes
// claimable (negative when one already is); known is false when the queue
// holds no message.
func (d *Driver) nextDue(ctx context.Context, queue string) (until time.Duration, known bool, err error) {
	d.polls.Add(1)
	var first, nowUS int64
	if err := d.db.QueryRowContext(ctx, d.q.nextDue, queue, queue, queue, queue).Scan(&first, &nowUS); err != nil {
		return 0, false, err
	}
	if first == 1<<63-1 {
		return 0, false, nil
	}
	return time.Duration(first-nowUS) * time.Microsecond, true, nil
}

// ReceiveDelayed claims, without blocking, up to p.Max messages whose
// run-at has not come (earliest first, whatever their level), leasing them
// like Receive. The run-at is kept: if such a lease expires unsettled, the
// message becomes claimable at the later of its deadline and its run-at.
func (d *Driver) ReceiveDelayed(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	ds, err := d.claim(ctx, d.q.claimLate, queue, p)
	if len(ds) > 0 {
		return ds, nil
	}
	return nil, mapErr(ctx, "receive delayed", err)
}

// claimTimeout bounds a claim that Receive has sent once the caller's
// context has ended (see claim).
const claimTimeout = 10 * time.Second

// claimed is a row a claim locked.
type claimed struct {
	d       backend.Delivery
	visible int64
	runAt   sql.NullInt64
	nowUS   int64
}

// claim runs one claim transaction: the locking read (query: the claim or
// ReceiveDelayed's), then one UPDATE that leases the rows it delivers
// (one receipt for the claim: a ref names the message too, so fencing is
// per delivery), and one that turns expired early leases (taken by
// ReceiveDelayed before their run-at) back into delayed messages. The
// transaction runs to its end once sent, for up to claimTimeout after ctx
// ends, so the broker never keeps leases nobody was told about; what it
// claimed is returned even when ctx ended meanwhile (the portable layer
// hands it out, or gives it back after Close).
func (d *Driver) claim(ctx context.Context, query, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	var out []backend.Delivery
	err := d.claimTx(ctx, query, queue, p, nil, &out)
	return out, err
}

// claimTx runs claim's transaction, with before run first in it
// (AckReceive's acks), and sets *outp to the deliveries.
func (d *Driver) claimTx(ctx context.Context, query, queue string, p backend.ReceiveParams, before func(tx *sql.Tx) error, outp *[]backend.Delivery) error {
	cctx, cancel := linger.Context(ctx, claimTimeout)
	defer cancel()
	var out []backend.Delivery
	delayed := query == d.q.claimLate
	err := d.inTx(cctx, "claim", func(tx *sql.Tx) error {
		out = out[:0]
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		rs, err := tx.QueryContext(cctx, query, queue, p.Max)
		if err != nil {
			return err
		}
		var got []claimed
		for rs.Next() {
			var c claimed
			var headers []byte
			var dedup, lastErr []byte
			var att, maxAtt, prank int
			var enq int64
			if err := rs.Scan(uidDest{&c.d.ID}, &c.d.Kind, &c.d.Body, &headers, &enq, &att, &maxAtt, &dedup, &lastErr,
				&c.visible, &c.runAt, &prank, &c.nowUS); err != nil {
				rs.Close()
				return err
			}
			c.d.EnqueuedAt = time.UnixMicro(enq)
			got = append(got, c)
			g := &got[len(got)-1]
			g.d.Attempt, g.d.MaxAttempts, g.d.Priority = att, maxAtt, backend.MaxPriority-prank
			g.d.DedupKey, g.d.LastError = string(dedup), string(lastErr)
			if g.d.Headers, err = decodeHeaders(headers); err != nil {
				rs.Close()
				return err
			}
		}
		if err := rs.Close(); err != nil {
			return err
		}
		if err := rs.Err(); err != nil {
			return err
		}
		if len(got) == 0 {
			return nil
		}
		token := newToken()
		deadline := got[0].nowUS + p.Lease.Microseconds()
		if p.Lease%time.Microsecond != 0 {
			deadline++
		}
		var lease, back []any
		for i := range got {
			c := &got[i]
			if !delayed && c.runAt.Valid && c.runAt.Int64 > c.nowUS {
				back = append(back, uid(c.d.ID))
				continue
			}
			lease = append(lease, uid(c.d.ID))
			c.d.Attempt++
			c.d.Receipt = hex.EncodeToString(token[:])
			c.d.Deadline = time.UnixMicro(deadline)
			if delayed {
				due := c.visible
				if c.runAt.Valid {
					due = c.runAt.Int64
				}
				c.d.RunAt = time.UnixMicro(due)
			}
			out = append(out, c.d)
		}
		if len(back) > 0 {
			if _, err := tx.ExecContext(cctx, "UPDATE "+d.q.msgs+" SET visible_at = run_at, run_at = NULL, lease_token = NULL WHERE id IN "+placeholders(len(back)), back...); err != nil {
				return err
			}
		}
		if len(lease) > 0 {
			runAt := "NULL"
			if delayed {
				runAt = "COALESCE(run_at, visible_at)"
			}
			// run_at is assigned before visible_at changes.
			args := append([]any{token[:], deadline}, lease...)
			if _, err := tx.ExecContext(cctx, "UPDATE "+d.q.msgs+" SET attempts = attempts + 1, run_at = "+runAt+
				", lease_token = ?, visible_at = ? WHERE id IN "+placeholders(len(lease)), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	*outp = out
	return nil
}

// newToken returns a fresh lease token.
func newToken() [16]byte {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return b
}

// parseToken decodes a receipt; ok is false for one this driver did not
// make.
func parseToken(s string) ([]byte, bool) {
	if len(s) != 32 {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// uid is a message id, a UUID's text, as its column holds it: 16 bytes
// (BINARY(16)).
type uid string

// Value returns u's 16 bytes.
func (u uid) Value() (driver.Value, error) {
	b, ok := uuidtext.Parse(string(u))
	if !ok {
		return nil, backend.Invalidf("message id %q is not a UUID", string(u))
	}
	return b[:], nil
}

// uidDest scans an id column into *p as a UUID's text.
type uidDest struct{ p *string }

// Scan implements sql.Scanner.
func (d uidDest) Scan(src any) error {
	b, ok := src.([]byte)
	if !ok || len(b) != 16 {
		return fmt.Errorf("fila/mysql: an id column holds %T, not 16 bytes", src)
	}
	*d.p = uuidtext.Format([16]byte(b))
	return nil
}

func validUUID(s string) bool {
	_, ok := uuidtext.Parse(s)
	return ok
}
