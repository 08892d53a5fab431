package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
)

var (
	_ backend.MultiEnqueuer   = (*Driver)(nil)
	_ backend.TxMultiEnqueuer = (*Driver)(nil)
)

// EnqueueMulti stores every queue's batch in one transaction, sent as one
// round trip (BEGIN, one INSERT per queue, COMMIT), so a topic publish is
// one commit however many subscriptions it copies to, and all or nothing.
// Messages must not carry dedup keys (the portable layer sends those one
// queue at a time). Wake-up notifications follow the commit, as for a
// non-leading Enqueue.
func (d *Driver) EnqueueMulti(ctx context.Context, batches []backend.QueueBatch) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return mapErr(ctx, "enqueue", err)
	}
	defer releaseIdle(conn)
	if err := d.insertMulti(ctx, conn, batches, true); err != nil {
		return err
	}
	queues := make([]string, len(batches))
	for i, b := range batches {
		queues[i] = b.Queue
	}
	d.notifier.kick(queues...)
	return nil
}

// EnqueueMultiTx is EnqueueMulti inside the caller's transaction, with the
// notifications sent at its commit (as EnqueueTx sends them).
func (d *Driver) EnqueueMultiTx(ctx context.Context, tx any, batches []backend.QueueBatch) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	q, ok := tx.(Querier)
	if !ok || q == nil {
		return backend.Invalidf("postgres EnqueueMultiTx: tx is %T; want a pgx.Tx (or anything with pgx's Exec, Query, QueryRow and SendBatch methods, such as *pgx.Conn or *pgxpool.Conn)", tx)
	}
	return d.insertMulti(ctx, q, batches, false)
}

// insertMulti sends the INSERTs of batches in one round trip, wrapped in
// BEGIN and COMMIT when own, else followed by a notification per queue in
// the caller's transaction.
func (d *Driver) insertMulti(ctx context.Context, q Querier, batches []backend.QueueBatch, own bool) error {
	b := &pgx.Batch{}
	if own {
		b.Queue("BEGIN")
	}
	want := make([]int, 0, len(batches))
	for _, qb := range batches {
		for i := range qb.Msgs {
			if !validUUID(qb.Msgs[i].ID) {
				return backend.Invalidf("message id %q is not a UUID", qb.Msgs[i].ID)
			}
			if qb.Msgs[i].DedupKey != "" {
				return backend.Invalidf("EnqueueMulti cannot store dedup keys; enqueue such messages queue by queue")
			}
		}
		a, err := buildArgs(qb.Msgs)
		if err != nil {
			return err
		}
		if len(qb.Msgs) == 1 {
			b.Queue(d.q.enqueueOne, a.params(qb.Queue, d.Priorities())...)
		} else {
			b.Queue(d.q.enqueue, a.params(qb.Queue, d.Priorities())...)
		}
		want = append(want, len(qb.Msgs))
		if !own {
			b.Queue(d.q.notify, d.q.channel, qb.Queue)
		}
	}
	if own {
		b.Queue("COMMIT")
	}
	br := q.SendBatch(ctx, b)
	fail := func(err error) error {
		_ = br.Close()
		return mapErr(ctx, "enqueue", err)
	}
	if own {
		if _, err := br.Exec(); err != nil { // BEGIN
			return fail(err)
		}
	}
	for i, n := range want {
		tag, err := br.Exec()
		if err != nil {
			return fail(err)
		}
		if tag.RowsAffected() != int64(n) {
			_ = br.Close()
			return fmt.Errorf("fila/postgres: enqueue to %s stored %d of %d messages", batches[i].Queue, tag.RowsAffected(), n)
		}
		if !own {
			if _, err := br.Exec(); err != nil { // notify
				return fail(err)
			}
		}
	}
	if own {
		if _, err := br.Exec(); err != nil { // COMMIT
			return fail(err)
		}
	}
	if err := br.Close(); err != nil {
		return mapErr(ctx, "enqueue", err)
	}
	return nil
}
