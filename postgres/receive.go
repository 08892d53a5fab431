package postgres

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
)

// minWait is the shortest sleep between two claims of a blocked receive
// that has no due time to wait for, and its sleep when a message is due but
// the claim skipped it: it is locked by a concurrent claim or settlement that
// is about to finish. A receive waiting for a known run-at or deadline wakes
// at it instead.
const minWait = 10 * time.Millisecond

// claimTimeout bounds a claim statement, which runs on to its end when the
// caller's context ends (see claim).
const claimTimeout = 30 * time.Second

// Receive claims up to p.Max messages in one statement; when none is ready
// it waits for a notification of queue, for the queue's next run-at or lease
// deadline, or for the poll interval, whichever comes first, and claims
// again. The claim and the look-up of the next run-at go in one round trip.
func (d *Driver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	if d.listen {
		d.startListener()
	}
	wt := d.waiters.join(queue)
	passOn := false
	defer func() { d.waiters.leave(queue, wt, passOn) }()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	woken := false
	// The previous claim of the queue took less than it could, and no
	// notification came since, nor is anything due: a claim now would find
	// nothing (quietMark). Wait instead.
	quiet, skip := d.waiters.quietWait(queue, time.Now())
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // before a claim is sent: nothing to complete
		}
		var wait time.Duration
		if skip {
			skip = false
			d.skipped.Add(1)
			wait = max(d.poll, minWait)
			if quiet > 0 {
				wait = min(wait, quiet+time.Millisecond)
			}
		} else {
			var next *int64
			mark := d.waiters.claimStarting(queue)
			ds, err := d.claim(ctx, d.q.claim, queue, p, false, &next, nil)
			if err != nil {
				d.waiters.claimEnded(queue, mark, false, time.Time{})
				passOn = woken // let another receive use the wake-up
				return nil, err
			}
			d.claimDone(queue, mark, len(ds), p.Max, next)
			if len(ds) > 0 {
				passOn = len(ds) == p.Max // more may be waiting
				return ds, nil
			}
			wait = d.nextWait(next)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		d.sleeping.Add(1)
		woken = false
		select {
		case <-ctx.Done():
			d.sleeping.Add(-1)
			return nil, ctx.Err()
		case <-d.done:
			d.sleeping.Add(-1)
			return nil, backend.ErrClosed
		case <-wt.ch:
			woken = true
		case <-timer.C:
		}
		d.sleeping.Add(-1)
		if !timer.Stop() {
			select { // drain a fired timer (harmless with Go 1.23+ timers)
			case <-timer.C:
			default:
			}
		}
	}
}

// claimDone records the end of a claim of queue that took got of max, with
// next, the microseconds until the queue's next due time when the claim
// said (waiters.claimEnded): the queue is quiet when the claim took less
// than it could and a due time is known where there may be one (the
// skip-locked mode's claim tells it always, the log mode's when it took
// less than max).
func (d *Driver) claimDone(queue string, mark *quietMark, got, max int, next *int64) {
	var due time.Time
	if next != nil {
		due = time.Now().Add(time.Duration(*next) * time.Microsecond)
	}
	d.waiters.claimEnded(queue, mark, got < max && (next != nil || got == 0), due)
}

// AckReceive acks refs and claims what of queue is ready now, in one round
// trip and one transaction (backend.AckReceiver): the ack statement Ack
// would send, then the claim Receive would make. Either failing undoes
// both. It claims only while the queue has a backlog: when the last claim
// of the queue by this driver took all it asked for, or none is known.
// After a claim that took less, it only acks, and the caller's Receive
// claims once a notification or a due time says there is more, by then
// with more to take at once (see waiters.backlogged). When the log mode's
// whole-claim ack finds the claim changed, the members' ack follows in a
// second round trip, as in Ack.
func (d *Driver) AckReceive(ctx context.Context, refs []backend.Ref, queue string, p backend.ReceiveParams) ([]error, []backend.Delivery, error) {
	if d.isClosed() {
		return nil, nil, backend.ErrClosed
	}
	a := d.planAck(refs)
	if !d.waiters.backlogged(queue) {
		if err := d.runAck(ctx, a); err != nil {
			return nil, nil, err
		}
		return a.errs, nil, nil
	}
	if d.listen {
		d.startListener()
	}
	var next *int64
	mark := d.waiters.claimStarting(queue)
	ds, err := d.claim(ctx, d.q.claim, queue, p, false, &next, a)
	if err != nil {
		d.waiters.claimEnded(queue, mark, false, time.Time{})
		return nil, nil, err
	}
	d.claimDone(queue, mark, len(ds), p.Max, next)
	if err := d.runAck(ctx, a); err != nil {
		// What was claimed comes back when its leases expire.
		return nil, nil, err
	}
	return a.errs, ds, nil
}

// claim runs a claim statement once. Its twelfth column is the row's due
// time before the claim; early (ReceiveDelayed) deliveries report it as
// RunAt. The message's level is a thirteenth (Driver.Priorities).
// With next non-nil, the same round trip (and transaction, after the claim)
// also reads how long until the queue's next message is due into *next (in
// microseconds; nil when the queue is empty), for a claim that comes back
// empty. With ack non-nil, its statement goes first in the same round trip
// and transaction (AckReceive), and its result is read into it; an error
// of either leaves neither done.
//
// A claim is not abandoned when ctx ends: it runs under a context of its
// own (claimTimeout, or Close), because a cancelled statement may still
// commit its leases on the server, and the client gives back what a claim
// returns after the caller's context ended (contract: cancellation).
func (d *Driver) claim(ctx context.Context, sql, queue string, p backend.ReceiveParams, early bool, next **int64, ack *ackPlan) ([]backend.Delivery, error) {
	d.claims.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	stop := context.AfterFunc(d.doneCtx, cancel)
	defer stop()
	var (
		rows pgx.Rows
		br   pgx.BatchResults
		err  error
	)
	acking := ack != nil && ack.sql != ""
	if next == nil && !acking {
		rows, err = d.pool.Query(ctx, sql, queue, p.Max, p.Lease.Microseconds())
	} else {
		// One round trip: a batch is one implicit transaction.
		b := &pgx.Batch{}
		if acking {
			b.Queue(ack.sql, ack.args...)
		}
		b.Queue(sql, queue, p.Max, p.Lease.Microseconds())
		if next != nil {
			b.Queue(d.q.nextDue, queue)
		}
		br = d.pool.SendBatch(ctx, b)
		defer func() {
			if br != nil {
				_ = br.Close()
			}
		}()
		if acking {
			if rows, err = br.Query(); err == nil {
				err = d.readAck(ack, rows)
			}
			if err != nil {
				return nil, mapErr(ctx, "ack", err)
			}
		}
		rows, err = br.Query()
	}
	if err != nil {
		return nil, mapErr(ctx, "receive", err)
	}
	type claimed struct {
		backend.Delivery
		was time.Time
	}
	// Room for a small claim: a receive of up to 1,000 that finds a few
	// (most, on a consumer that keeps up) zeroed 1,000 of them each time.
	out := make([]claimed, 0, min(p.Max, 64))
	var (
		c       claimed
		headers []byte
		att     int32
		maxAtt  int32
		prio    int16
	)
	dest := []any{&c.ID, &c.Kind, &c.Body, &headers, &c.EnqueuedAt, &att, &maxAtt,
		&c.DedupKey, &c.Receipt, &c.Deadline, &c.LastError, &c.was}
	if d.Priorities() {
		dest = append(dest, &prio)
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		c.Attempt, c.MaxAttempts, c.Priority = int(att), int(maxAtt), int(prio)
		if len(c.Receipt) < 36 {
			c.Receipt = memberReceipt(c.Receipt)
		}
		if strings.HasPrefix(c.ID, "~") {
			// The log mode's topic row, read by subscription queue: the
			// copy's id is computed here, where it costs a tenth of what
			// it costs in SQL.
			c.ID = backend.CopyID(c.ID[1:], queue)
		}
		c.Headers = nil
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &c.Headers); err != nil {
				return err
			}
		}
		out = append(out, c)
		c = claimed{}
		return nil
	})
	if err == nil && br != nil {
		if next != nil {
			err = br.QueryRow().Scan(next)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		br = nil
	}
	if err != nil {
		// The claim may have committed (a timeout, a lost connection):
		// those leases expire (contract: cancellation).
		return nil, mapErr(ctx, "receive", err)
	}
	// RETURNING has no order: restore the claim order (claim sort: the
	// highest level first, then oldest first). The
	// log mode returns its claim in order already, which sorting would
	// change: a topic's copy ids keep only the millisecond of their event's
	// id, so sorting put the copies of a publish by COPY (one run-at) in
	// the order of their hashes, at about 8% of a fan-out consumer's CPU
	// (BENCHMARKS.md).
	less := func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		if !out[i].was.Equal(out[j].was) {
			return out[i].was.Before(out[j].was)
		}
		return out[i].ID < out[j].ID
	}
	if d.mode != ModeLog && !sort.SliceIsSorted(out, less) {
		sort.Slice(out, less)
	}
	// The log mode's claim hands out the due timers and expired leases it
	// sweeps before the streams, whatever their level: put its
	// deliveries highest level first, keeping the order within a level.
	byLevel := func(i, j int) bool { return out[i].Priority > out[j].Priority }
	if d.mode == ModeLog && !sort.SliceIsSorted(out, byLevel) {
		sort.SliceStable(out, byLevel)
	}
	ds := make([]backend.Delivery, len(out))
	for i := range out {
		ds[i] = out[i].Delivery
		if early {
			ds[i].RunAt = out[i].was
		}
	}
	if d.q.ackWhole != "" {
		d.noteClaims(ds)
	}
	return ds, nil
}

// nextWait is how long a blocked receive sleeps before claiming again: until
// the queue's next run-at or lease deadline (us microseconds from now by the
// server's clock, nil if none), at most the poll interval, or at most a
// second while the LISTEN connection is down.
func (d *Driver) nextWait(us *int64) time.Duration {
	wait := max(d.poll, minWait)
	if d.listen && !d.waiters.listening.Load() {
		wait = min(wait, listenerDownPoll)
	}
	if us != nil {
		if *us <= 0 {
			return minWait // due, yet skipped: locked for a moment
		}
		// +1ms: the server clock must have passed the due time on the next
		// claim. No minWait floor here: it made delayed messages up to
		// 10 ms late.
		wait = min(wait, time.Duration(*us)*time.Microsecond+time.Millisecond)
	}
	return wait
}

// noteClaims records how many members of each claim ds holds (claimSizes).
// A receive's members are of one claim; leases of their own (redeliveries,
// timers) are not members.
func (d *Driver) noteClaims(ds []backend.Delivery) {
	type count struct {
		key      [8]byte
		n        int
		deadline time.Time
	}
	var cs []count
	for i := range ds {
		key, _, ok := memberOf(ds[i].Receipt)
		if !ok {
			continue
		}
		j := 0
		for j < len(cs) && cs[j].key != key {
			j++
		}
		if j == len(cs) {
			cs = append(cs, count{key: key, deadline: ds[i].Deadline})
		}
		cs[j].n++
	}
	for _, c := range cs {
		if c.n > 1 { // a claim of one is acked by log_ack (claimRuns)
			d.sizes.add(c.key, c.n, c.deadline)
		}
	}
}
