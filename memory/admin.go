package memory

import (
	"context"
	"slices"
	"strconv"

	"github.com/fila-go/fila/backend"
)

func deadMatches(e *deadEntry, f backend.DeadFilter) bool {
	if f.Kind != "" && e.Kind != f.Kind {
		return false
	}
	if f.IDs == nil {
		return true
	}
	for _, id := range f.IDs {
		if id == e.ID {
			return true
		}
	}
	return false
}

// DeadList lists dead letters oldest first; the cursor is an internal
// sequence number.
func (d *Driver) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	if err := d.check(ctx); err != nil {
		return backend.DeadPage{}, err
	}
	var after int64
	if p.Cursor != "" {
		n, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil {
			return backend.DeadPage{}, backend.Invalidf("dead-letter cursor %q is not one this driver returned", p.Cursor)
		}
		after = n
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var page struct {
		backend.DeadPage
		lastSeq int64
	}
	q := b.queues[queue]
	if q == nil {
		return page.DeadPage, nil
	}
	var want map[string]bool
	if p.IDs != nil {
		want = make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			want[id] = true
		}
	}
	for _, e := range q.dead {
		if e.seq <= after || (p.Kind != "" && e.Kind != p.Kind) || (want != nil && !want[e.ID]) {
			continue
		}
		if len(page.Letters) == p.Limit {
			page.Next = strconv.FormatInt(page.lastSeq, 10)
			break
		}
		l := e.DeadLetter
		if p.WithoutBodies {
			l.Body = nil
		}
		l.Message = cloneMessage(l.Message)
		page.Letters = append(page.Letters, l)
		page.lastSeq = e.seq
	}
	return page.DeadPage, nil
}

// DeadReplay moves the selected dead letters back to ready.
func (d *Driver) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	return d.deadTake(ctx, queue, f, true)
}

// DeadPurge deletes the selected dead letters.
func (d *Driver) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	return d.deadTake(ctx, queue, f, false)
}

func (d *Driver) deadTake(ctx context.Context, queue string, f backend.DeadFilter, replay bool) (int, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	now := b.clock.Now()
	keep := q.dead[:0]
	n := 0
	for _, e := range q.dead {
		if !deadMatches(e, f) {
			keep = append(keep, e)
			continue
		}
		n++
		if replay {
			m := e.Message
			m.DedupKey = ""
			b.seq++
			q.msgs[m.ID] = &msg{Message: m, seq: b.seq, due: now}
		}
	}
	for i := len(keep); i < len(q.dead); i++ {
		q.dead[i] = nil
	}
	q.dead = keep
	if replay && n > 0 {
		b.wakeLocked()
	}
	return n, nil
}

// QueueStats counts the queue's messages. A message whose lease expired
// counts as ready.
func (d *Driver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	if err := d.check(ctx); err != nil {
		return backend.Stats{}, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var s backend.Stats
	q := b.queues[queue]
	if q == nil {
		return s, nil
	}
	now := b.clock.Now()
	s.ReadyByPriority = make([]int64, backend.MaxPriority+1)
	for _, m := range q.msgs {
		at := m.receivableAt()
		switch {
		case m.token != "" && m.deadline.After(now):
			s.Leased++
		case at.After(now):
			s.Delayed++
		default:
			s.Ready++
			s.ReadyByPriority[m.Priority]++
			if s.OldestReadyAt.IsZero() || at.Before(s.OldestReadyAt) {
				s.OldestReadyAt = at
			}
		}
	}
	s.Dead = int64(len(q.dead))
	s.DeadByKind = map[string]int64{}
	for _, e := range q.dead {
		s.DeadByKind[e.Kind]++
	}
	return s, nil
}

// QueueList names the queues that hold a message or a dead letter.
func (d *Driver) QueueList(ctx context.Context) ([]string, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.queues))
	for name, q := range b.queues {
		if len(q.msgs) > 0 || len(q.dead) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// QueueDelete forgets queue with its messages, dedup keys and dead letters.
func (d *Driver) QueueDelete(ctx context.Context, queue string) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.queues, queue)
	delete(b.marks, queue)
	return nil
}
