package memory

import (
	"context"
	"errors"
	"sync"

	"github.com/fila-go/fila/backend"
)

// Tx is an in-memory transaction for Client.EnqueueTx: messages enqueued in
// it become visible when it commits and vanish when it rolls back. It stands
// in for a database transaction in unit tests.
type Tx struct {
	b    *Broker
	mu   sync.Mutex
	done bool
	ops  []txOp
}

type txOp struct {
	queue string
	msgs  []backend.Message
}

// ErrTxDone is returned when a Tx is used after Commit or Rollback.
var ErrTxDone = errors.New("memory: transaction already committed or rolled back")

// Begin starts a transaction on b.
func (b *Broker) Begin() *Tx { return &Tx{b: b} }

// Commit makes the transaction's messages visible. A message whose dedup key
// was taken meanwhile is dropped, as a unique index would refuse it.
func (tx *Tx) Commit() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	tx.done = true
	b := tx.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, op := range tx.ops {
		b.insertLocked(op.queue, op.msgs)
	}
	b.wakeLocked()
	return nil
}

// Rollback discards the transaction's messages.
func (tx *Tx) Rollback() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	tx.done = true
	tx.ops = nil
	return nil
}

// EnqueueTx buffers msgs in tx, which must be a *Tx of the same broker.
// Dedup keys are checked against pending messages and the transaction's own.
func (d *Driver) EnqueueTx(ctx context.Context, tx any, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	t, ok := tx.(*Tx)
	if !ok || t == nil || t.b != d.b {
		return nil, backend.Invalidf("memory: EnqueueTx needs a *memory.Tx from the same Broker (Broker.Begin), got %T", tx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil, ErrTxDone
	}
	held := map[string]string{}
	for _, op := range t.ops {
		if op.queue != queue {
			continue
		}
		for _, m := range op.msgs {
			if m.DedupKey != "" {
				held[m.DedupKey] = m.ID
			}
		}
	}
	d.b.mu.Lock()
	if q := d.b.queues[queue]; q != nil {
		for _, m := range msgs {
			if id, ok := q.dedup[m.DedupKey]; ok && m.DedupKey != "" {
				if _, mine := held[m.DedupKey]; !mine {
					held[m.DedupKey] = id
				}
			}
		}
	}
	d.b.mu.Unlock()
	res := make([]backend.EnqueueResult, len(msgs))
	var keep []backend.Message
	for i, m := range msgs {
		if m.DedupKey != "" {
			if id, ok := held[m.DedupKey]; ok {
				res[i] = backend.EnqueueResult{ID: id, Duplicate: true}
				continue
			}
			held[m.DedupKey] = m.ID
		}
		keep = append(keep, m)
		res[i] = backend.EnqueueResult{ID: m.ID}
	}
	t.ops = append(t.ops, txOp{queue: queue, msgs: keep})
	return res, nil
}
