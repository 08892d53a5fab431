package memory

import (
	"context"
	"sort"
	"strconv"

	"github.com/fila-go/fila/backend"
)

// ReceiveDelayed claims up to p.Max messages whose run-at is still in the
// future, without waiting; each delivery's RunAt is the run-at it had.
func (d *Driver) ReceiveDelayed(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	now := b.clock.Now()
	var delayed []*msg
	for _, m := range q.msgs {
		leased := m.token != "" && m.deadline.After(now)
		if !leased && m.due.After(now) {
			delayed = append(delayed, m)
		}
	}
	sort.Slice(delayed, func(i, j int) bool {
		if !delayed[i].due.Equal(delayed[j].due) {
			return delayed[i].due.Before(delayed[j].due)
		}
		return delayed[i].seq < delayed[j].seq
	})
	if len(delayed) > p.Max {
		delayed = delayed[:p.Max]
	}
	out := make([]backend.Delivery, len(delayed))
	for i, m := range delayed {
		runAt := m.due
		b.tokens++
		m.token = strconv.FormatInt(b.tokens, 36)
		m.deadline = now.Add(p.Lease)
		m.attempts++
		out[i] = m.delivery()
		out[i].RunAt, out[i].Delay = runAt, 0
	}
	return out, nil
}

// DeadImport stores dead letters from elsewhere; ids already present are
// skipped.
func (d *Driver) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queueLocked(queue)
	have := make(map[string]bool, len(q.dead))
	for _, e := range q.dead {
		have[e.ID] = true
	}
	for _, l := range letters {
		if have[l.ID] {
			continue
		}
		have[l.ID] = true
		l.Queue = queue
		l.Message = cloneMessage(l.Message)
		b.seq++
		q.dead = append(q.dead, &deadEntry{DeadLetter: l, seq: b.seq})
	}
	return nil
}
