package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"

	"github.com/fila-go/fila/backend"
)

// Querier is what EnqueueTx and PublishTx accept: a *sql.Tx from the
// application's own transaction is the usual value; *sql.Conn and *sql.DB
// also satisfy it, and then the enqueue commits on its own.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Bounds of one INSERT: MySQL takes at most 65,535 placeholders a
// statement, and a batch's rows go in statements of at most chunkRows rows
// and about chunkBytes of bodies, in one transaction.
const (
	chunkRows  = 500
	chunkBytes = 8 << 20
)

// Enqueue stores msgs: one INSERT (a transaction of its own) when the
// batch fits one statement and carries no dedup key, else the statements
// of the batch in one transaction, so a batch is stored whole or not at
// all. Receivers of this driver wake at once; those of other processes at
// their next poll.
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	res, err := d.enqueue(ctx, nil, queue, msgs)
	if err == nil {
		d.wake.Wake(queue)
	}
	return res, err
}

// EnqueueTx stores msgs inside the caller's transaction: tx must be a
// Querier, typically a *sql.Tx. The messages take effect when the caller
// commits and vanish on rollback. This driver's receivers of the queue
// start polling again from MinPollInterval (10ms, doubling), so they find
// the messages soon after a prompt commit; other processes' receivers at
// their next poll. A dedup key held by a message of
// another transaction that has not committed yet makes EnqueueTx wait for
// that transaction.
func (d *Driver) EnqueueTx(ctx context.Context, tx any, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	q, err := querierOf("EnqueueTx", tx)
	if err != nil {
		return nil, err
	}
	res, err := d.enqueue(ctx, q, queue, msgs)
	if err == nil {
		// The caller commits soon, usually: this driver's receivers start
		// polling again from MinPollInterval, so they find the messages
		// within milliseconds of the commit, not a whole poll interval.
		d.wake.Wake(queue)
	}
	return res, err
}

func querierOf(op string, tx any) (Querier, error) {
	q, ok := tx.(Querier)
	if !ok || q == nil {
		return nil, backend.Invalidf("mysql %s: tx is %T; want a *sql.Tx (or anything with database/sql's ExecContext and QueryContext, such as *sql.Conn)", op, tx)
	}
	return q, nil
}

// enqueue stores msgs through q, or in a transaction of its own when q is
// nil (a single statement needs none).
func (d *Driver) enqueue(ctx context.Context, q Querier, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	for i := range msgs {
		if !validUUID(msgs[i].ID) {
			return nil, backend.Invalidf("message id %q is not a UUID", msgs[i].ID)
		}
	}
	res := make([]backend.EnqueueResult, len(msgs))
	dups := backend.BatchDuplicates(msgs)
	pending := make([]int, 0, len(msgs))
	hasDedup := false
	for i := range msgs {
		if _, dup := dups[i]; dup {
			continue
		}
		pending = append(pending, i)
		hasDedup = hasDedup || msgs[i].DedupKey != ""
	}
	if !hasDedup {
		for i := range msgs {
			res[i].ID = msgs[i].ID
		}
		if q != nil {
			return res, d.insert(ctx, q, queue, msgs, pending, false)
		}
		if len(pending) <= chunkRows && bodyBytes(msgs) <= chunkBytes {
			return res, mapErr(ctx, "enqueue", d.insert(ctx, d.db, queue, msgs, pending, false))
		}
		return res, d.inTx(ctx, "enqueue", func(tx *sql.Tx) error {
			return d.insert(ctx, tx, queue, msgs, pending, false)
		})
	}
	store := func(q Querier) error {
		return backend.StoreRounds(pending, func(pending []int) ([]int, error) {
			return d.storeDedup(ctx, q, queue, msgs, pending, res)
		})
	}
	var err error
	if q != nil {
		err = store(q)
	} else {
		err = d.inTx(ctx, "enqueue", func(tx *sql.Tx) error { return store(tx) })
	}
	if err != nil {
		return nil, mapErr(ctx, "enqueue", err)
	}
	for i, j := range dups {
		res[i] = backend.EnqueueResult{ID: res[j].ID, Duplicate: true}
	}
	return res, nil
}

// storeDedup inserts the messages pending, skipping those whose dedup key a
// pending message holds, then reads the keys' holders: a message is stored
// when it holds its key, a duplicate of the holder otherwise, and returned
// for another round when its key has no holder (the holder was settled
// between the two statements).
func (d *Driver) storeDedup(ctx context.Context, q Querier, queue string, msgs []backend.Message, pending []int, res []backend.EnqueueResult) ([]int, error) {
	if err := d.insert(ctx, q, queue, msgs, pending, true); err != nil {
		return nil, err
	}
	var keys []any
	for _, i := range pending {
		if k := msgs[i].DedupKey; k != "" {
			keys = append(keys, k)
		}
	}
	holders := make(map[string]string, len(keys))
	for start := 0; start < len(keys); start += chunkRows {
		part := keys[start:min(start+chunkRows, len(keys))]
		rs, err := q.QueryContext(ctx, d.q.holders+placeholders(len(part)), append([]any{queue}, part...)...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var k, id string
			if err := rs.Scan(&k, uidDest{&id}); err != nil {
				rs.Close()
				return nil, err
			}
			holders[k] = id
		}
		if err := rs.Close(); err != nil {
			return nil, err
		}
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	var again []int
	for _, i := range pending {
		m := &msgs[i]
		if m.DedupKey == "" {
			res[i].ID = m.ID
			continue
		}
		switch h, ok := holders[m.DedupKey]; {
		case !ok:
			again = append(again, i)
		case h == m.ID:
			res[i] = backend.EnqueueResult{ID: m.ID}
		default:
			res[i] = backend.EnqueueResult{ID: h, Duplicate: true}
		}
	}
	return again, nil
}

// insert stores msgs[i] for each i of which through q, in statements of at
// most chunkRows rows and about chunkBytes of bodies. With dedup, a
// message whose dedup key a pending message holds is skipped (and any
// id collision with it).
func (d *Driver) insert(ctx context.Context, q Querier, queue string, msgs []backend.Message, which []int, dedup bool) error {
	for start := 0; start < len(which); {
		end, size := start, 0
		for end < len(which) && end-start < chunkRows && (end == start || size+len(msgs[which[end]].Body) <= chunkBytes) {
			size += len(msgs[which[end]].Body)
			end++
		}
		args := make([]any, 0, 11*(end-start))
		var stmt strings.Builder
		stmt.WriteString(d.q.insert)
		for k, i := range which[start:end] {
			a, row, err := rowArgs(queue, &msgs[i])
			if err != nil {
				return err
			}
			if k > 0 {
				stmt.WriteString(", ")
			}
			stmt.WriteString(row)
			args = append(args, a...)
		}
		if dedup {
			stmt.WriteString(" ON DUPLICATE KEY UPDATE id = id")
		}
		if _, err := q.ExecContext(ctx, stmt.String(), args...); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// rowArgs returns m's row of an INSERT and its placeholders' values.
func rowArgs(queue string, m *backend.Message) ([]any, string, error) {
	headers, err := encodeHeaders(m.Headers)
	if err != nil {
		return nil, "", err
	}
	var dedup any
	if m.DedupKey != "" {
		dedup = m.DedupKey
	}
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	a := []any{uid(m.ID), queue, m.Kind, body, headers, m.EnqueuedAt.UnixMicro()}
	row := insertRowNow
	switch {
	case !m.RunAt.IsZero():
		a, row = append(a, m.RunAt.UnixMicro()), insertRowAt
	case m.Delay > 0:
		a, row = append(a, m.Delay.Microseconds()), insertRowDelay
	}
	return append(a, m.MaxAttempts, dedup, m.Attempts, backend.MaxPriority-m.Priority), row, nil
}

func bodyBytes(msgs []backend.Message) int {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Body)
	}
	return n
}

// encodeHeaders returns headers as JSON, nil (NULL) when there are none.
func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, backend.Invalidf("headers: %v", err)
	}
	return b, nil
}

// decodeHeaders is encodeHeaders' inverse.
func decodeHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// inTx runs fn in a READ COMMITTED transaction of its own and commits,
// running it again (up to three times in all) after a deadlock or a lock
// wait timeout, which roll the transaction back.
func (d *Driver) inTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	var err error
	for try := 0; try < 3; try++ {
		var tx *sql.Tx
		tx, err = d.db.BeginTx(ctx, d.txOpts)
		if err != nil {
			return mapErr(ctx, op, err)
		}
		if err = fn(tx); err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		if err == nil || !transient(err) {
			break
		}
	}
	return mapErr(ctx, op, err)
}
