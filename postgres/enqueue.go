package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila/backend"
)

// Querier is what EnqueueTx accepts: anything that runs pgx queries. pgx.Tx
// (from pool.Begin or conn.Begin) is the usual value; *pgx.Conn,
// *pgxpool.Conn and *pgxpool.Pool also satisfy it, and then the enqueue
// commits on its own.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Enqueue stores msgs in one round trip: one INSERT of the whole batch (a
// transaction of its own, so the batch is atomic). The Enqueue that leads
// its queue's notifications pipelines, in the same round trip, the
// pg_notify that wakes the queue's receivers, in a second transaction that
// starts after the INSERT committed; concurrent enqueues of the queue leave
// it out and have one sent after they commit, coalesced (see notify.go).
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	if !d.notifier.lead(queue) {
		res, err := d.enqueue(ctx, d.pool, queue, msgs, notifyNone)
		if err == nil {
			d.notifier.kick(queue)
		}
		return res, err
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		d.notifier.leadDone(queue, true) // nothing stored
		return nil, mapErr(ctx, "enqueue", err)
	}
	lq := &leadQuerier{Conn: conn}
	defer func() {
		releaseIdle(conn)
		d.notifier.leadDone(queue, !lq.unnotified)
	}()
	return d.enqueue(ctx, lq, queue, msgs, notifyAfterCommit)
}

// leadQuerier is the connection of a leading Enqueue. unnotified is set when
// its batches may have committed messages that no notification sent after
// the commit covers (the notification failed, or the connection failed
// with the outcome unknown): then the notifier sends one more.
type leadQuerier struct {
	*pgxpool.Conn
	unnotified bool
}

// releaseIdle returns conn to the pool, first rolling back a transaction a
// failed batch left open (BEGIN … COMMIT of a leading Enqueue), so the pool
// keeps the connection instead of closing it.
func releaseIdle(conn *pgxpool.Conn) {
	if s := conn.Conn().PgConn().TxStatus(); s == 'E' || s == 'T' {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	conn.Release()
}

// EnqueueTx stores msgs inside the caller's transaction: tx must be a
// Querier, typically a pgx.Tx. The messages, and the notification that wakes
// receivers, take effect when the caller commits and vanish on rollback.
// A dedup key taken by a pending message of another transaction that has not
// committed yet makes this call wait for that transaction to end.
func (d *Driver) EnqueueTx(ctx context.Context, tx any, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	q, ok := tx.(Querier)
	if !ok || q == nil {
		return nil, backend.Invalidf("postgres EnqueueTx: tx is %T; want a pgx.Tx (or anything with pgx's Exec, Query, QueryRow and SendBatch methods, such as *pgx.Conn or *pgxpool.Conn)", tx)
	}
	return d.enqueue(ctx, q, queue, msgs, notifyInTx)
}

// notifyMode says how an INSERT's batch sends the wake-up notification.
type notifyMode int

const (
	// notifyNone: the batch sends none (the caller has one sent after it
	// returns).
	notifyNone notifyMode = iota
	// notifyInTx: pg_notify in the INSERT's transaction, delivered at its
	// commit (EnqueueTx, where the caller commits).
	notifyInTx
	// notifyAfterCommit: BEGIN, INSERT, COMMIT, then pg_notify in a
	// transaction of its own that does not wait for the WAL flush, all in
	// one round trip. The INSERT's commit, which waits for the flush, holds
	// no notification lock (see notify.go).
	notifyAfterCommit
)

// enqueueArgs are the column arrays of a batch, unnested by the INSERT.
type enqueueArgs struct {
	ids         []pgtype.UUID
	kinds       []string
	bodies      [][]byte
	headers     []pgtype.Text
	enqueuedAt  []time.Time
	runAt       []pgtype.Timestamptz
	delayMicros []int64
	maxAttempts []int32
	dedup       []pgtype.Text
	attempts    []int32
	priorities  []int16
	hasDedup    bool
}

func buildArgs(msgs []backend.Message) (*enqueueArgs, error) {
	n := len(msgs)
	a := &enqueueArgs{
		ids: make([]pgtype.UUID, n), kinds: make([]string, n), bodies: make([][]byte, n),
		headers: make([]pgtype.Text, n), enqueuedAt: make([]time.Time, n), runAt: make([]pgtype.Timestamptz, n),
		delayMicros: make([]int64, n), maxAttempts: make([]int32, n), dedup: make([]pgtype.Text, n),
		attempts: make([]int32, n), priorities: make([]int16, n),
	}
	for i := range msgs {
		m := &msgs[i]
		a.ids[i] = pgUUID(m.ID)
		a.kinds[i] = m.Kind
		a.bodies[i] = m.Body // never nil (backend.Message)
		if len(m.Headers) > 0 {
			b, err := json.Marshal(m.Headers)
			if err != nil {
				return nil, backend.Invalidf("headers: %v", err)
			}
			a.headers[i] = pgtype.Text{String: string(b), Valid: true}
		}
		a.enqueuedAt[i] = m.EnqueuedAt
		if m.EnqueuedAt.IsZero() {
			a.enqueuedAt[i] = time.Now()
		}
		if !m.RunAt.IsZero() {
			a.runAt[i] = pgtype.Timestamptz{Time: m.RunAt, Valid: true}
		}
		a.delayMicros[i] = m.Delay.Microseconds()
		a.maxAttempts[i] = int32(m.MaxAttempts)
		a.attempts[i] = int32(max(m.Attempts, 0))
		a.priorities[i] = int16(min(max(m.Priority, 0), backend.MaxPriority))
		if m.DedupKey != "" {
			a.dedup[i] = pgtype.Text{String: m.DedupKey, Valid: true}
			a.hasDedup = true
		}
	}
	return a, nil
}

// params returns the parameters of the enqueue statements. The levels are
// the twelfth, with levels (the skip-locked mode); the log mode's
// statements store none and take the first eleven: PostgreSQL refuses a
// parameter a statement does not reference when it cannot tell its type.
func (a *enqueueArgs) params(queue string, levels bool) []any {
	var ps []any
	if len(a.ids) == 1 { // scalar parameters of the single-row statements
		ps = []any{queue, a.ids[0], a.kinds[0], a.bodies[0], a.headers[0], a.enqueuedAt[0], a.runAt[0],
			a.delayMicros[0], a.maxAttempts[0], a.dedup[0], a.attempts[0], a.priorities[0]}
	} else {
		ps = []any{queue, a.ids, a.kinds, a.bodies, a.headers, a.enqueuedAt, a.runAt, a.delayMicros, a.maxAttempts, a.dedup, a.attempts, a.priorities}
	}
	if !levels {
		ps = ps[:len(ps)-1]
	}
	return ps
}

// enqueue stores msgs through q, sending the wake-up notification as notify
// says.
func (d *Driver) enqueue(ctx context.Context, q Querier, queue string, msgs []backend.Message, notify notifyMode) ([]backend.EnqueueResult, error) {
	for i := range msgs {
		if !validUUID(msgs[i].ID) {
			return nil, backend.Invalidf("message id %q is not a UUID", msgs[i].ID)
		}
		if strings.IndexByte(msgs[i].DedupKey, 0) >= 0 {
			return nil, backend.Invalidf("dedup key contains U+0000, which PostgreSQL text cannot store")
		}
	}
	res := make([]backend.EnqueueResult, len(msgs))
	pending := make([]int, len(msgs)) // indexes of msgs still to store
	for i := range pending {
		pending[i] = i
	}
	// A duplicate whose holder is acked between our INSERT and the holder
	// lookup frees its key: store it on the next round.
	err := backend.StoreRounds(pending, func(pending []int) ([]int, error) {
		batch := make([]backend.Message, len(pending))
		for j, i := range pending {
			batch[j] = msgs[i]
		}
		sub, err := d.insertBatch(ctx, q, queue, batch, notify)
		if err != nil {
			return nil, err
		}
		var next []int
		for j, i := range pending {
			if sub[j].ID == "" { // duplicate of a holder that is gone: retry
				next = append(next, i)
				continue
			}
			res[i] = sub[j]
		}
		return next, nil
	})
	if err != nil {
		return nil, fmt.Errorf("fila/postgres: enqueue: %w", err)
	}
	return res, nil
}

// insertBatch inserts one batch and returns a result per message; a
// duplicate whose holder could not be found has an empty ID.
func (d *Driver) insertBatch(ctx context.Context, q Querier, queue string, msgs []backend.Message, notify notifyMode) ([]backend.EnqueueResult, error) {
	a, err := buildArgs(msgs)
	if err != nil {
		return nil, err
	}
	res := make([]backend.EnqueueResult, len(msgs))
	b := &pgx.Batch{}
	if notify == notifyAfterCommit {
		b.Queue("BEGIN")
	}
	ps := a.params(queue, d.Priorities())
	switch {
	case len(msgs) == 1 && !a.hasDedup:
		b.Queue(d.q.enqueueOne, ps...)
	case len(msgs) == 1:
		b.Queue(d.q.enqueueOneDe, ps...)
	case !a.hasDedup:
		b.Queue(d.q.enqueue, ps...)
	default:
		b.Queue(d.q.enqueueDedup, ps...)
	}
	switch notify {
	case notifyInTx:
		b.Queue(d.q.notify, d.q.channel, queue)
	case notifyAfterCommit:
		b.Queue("COMMIT")
		b.Queue(d.q.notifyAsync, d.q.channel, queue)
	}
	// lq tracks whether committed messages lack a notification: from the
	// send on until this batch's notification went through, unless the
	// server refused the batch before its COMMIT (nothing committed).
	var lq *leadQuerier
	var before bool
	if notify == notifyAfterCommit {
		lq = q.(*leadQuerier)
		before, lq.unnotified = lq.unnotified, true
	}
	refused := func(err error) {
		var pe *pgconn.PgError
		if lq != nil && errors.As(err, &pe) {
			lq.unnotified = before
		}
	}
	br := q.SendBatch(ctx, b)
	if notify == notifyAfterCommit {
		if _, err := br.Exec(); err != nil { // BEGIN
			refused(err)
			_ = br.Close()
			return nil, mapErr(ctx, "enqueue", err)
		}
	}
	inserted := map[string]bool{}
	if !a.hasDedup {
		tag, err := br.Exec()
		if err != nil {
			refused(err)
			_ = br.Close()
			return nil, mapErr(ctx, "enqueue", err)
		}
		if tag.RowsAffected() != int64(len(msgs)) {
			_ = br.Close()
			return nil, fmt.Errorf("fila/postgres: enqueue stored %d of %d messages", tag.RowsAffected(), len(msgs))
		}
	} else {
		rows, err := br.Query()
		if err == nil {
			var id string
			_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
				inserted[id] = true
				return nil
			})
		}
		if err != nil {
			refused(err)
			_ = br.Close()
			return nil, mapErr(ctx, "enqueue", err)
		}
	}
	if notify == notifyAfterCommit {
		if _, err := br.Exec(); err != nil { // COMMIT
			refused(err)
			_ = br.Close()
			return nil, mapErr(ctx, "enqueue", err)
		}
		// Committed: a failed notification only costs the wake-up, which
		// the caller then has sent another way.
		_, err := br.Exec()
		if err == nil {
			err = br.Close()
		} else {
			_ = br.Close()
		}
		d.notifier.sent.Add(1)
		if err == nil { // sent after this commit, so after every earlier one
			lq.unnotified = false
		}
	} else if err := br.Close(); err != nil {
		return nil, mapErr(ctx, "enqueue", err)
	}
	if !a.hasDedup || len(inserted) == len(msgs) {
		for i := range msgs {
			res[i].ID = msgs[i].ID
		}
		return res, nil
	}
	// Some keys were taken: by an earlier message of this batch, or by a
	// pending message stored before.
	dupOf := backend.BatchDuplicates(msgs)
	var missing []string
	for i := range msgs {
		m := &msgs[i]
		if inserted[lower(m.ID)] {
			res[i].ID = m.ID
			continue
		}
		res[i].Duplicate = true
		if j, ok := dupOf[i]; ok && inserted[lower(msgs[j].ID)] {
			res[i].ID = msgs[j].ID
		} else {
			missing = append(missing, m.DedupKey)
		}
	}
	if len(missing) > 0 {
		holders := map[string]string{}
		rows, err := q.Query(ctx, d.q.holders, queue, missing)
		if err == nil {
			var key, id string
			_, err = pgx.ForEachRow(rows, []any{&key, &id}, func() error {
				holders[key] = id
				return nil
			})
		}
		if err != nil {
			return nil, mapErr(ctx, "enqueue: find dedup holders", err)
		}
		for i := range msgs {
			if res[i].Duplicate && res[i].ID == "" {
				if id, ok := holders[msgs[i].DedupKey]; ok {
					res[i].ID = id
				} else {
					res[i].Duplicate = false // holder gone: the caller retries it
				}
			}
		}
	}
	return res, nil
}
