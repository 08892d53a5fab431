package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fila-go/fila/backend"
)

var _ backend.MessageLister = (*Driver)(nil)

// browseKey orders a listing: highest level first, then due time, then
// enqueue order (the order Receive hands out ready messages).
type browseKey struct {
	prio int
	at   int64
	seq  int64
}

func (k browseKey) compare(o browseKey) int {
	if c := cmp.Compare(o.prio, k.prio); c != 0 {
		return c
	}
	if c := cmp.Compare(k.at, o.at); c != 0 {
		return c
	}
	return cmp.Compare(k.seq, o.seq)
}

// stateAt returns m's state at now and its due time: when it became
// or becomes ready, or its lease deadline.
func (m *msg) stateAt(now time.Time) (backend.MessageState, time.Time) {
	at := m.receivableAt()
	switch {
	case m.token != "" && m.deadline.After(now):
		return backend.StateLeased, m.deadline
	case at.After(now):
		return backend.StateDelayed, at
	default:
		return backend.StateReady, at
	}
}

// MessageList lists the queue's pending messages in one state (or those p.IDs
// names), highest level first, then by due time, then in enqueue order;
// the cursor is the last message's place in that order.
func (d *Driver) MessageList(ctx context.Context, queue string, p backend.MessageListParams) (backend.MessagePage, error) {
	if err := d.check(ctx); err != nil {
		return backend.MessagePage{}, err
	}
	var after *browseKey
	if p.Cursor != "" {
		var k browseKey
		if _, err := fmt.Sscanf(p.Cursor, "%d.%d.%d", &k.prio, &k.at, &k.seq); err != nil {
			return backend.MessagePage{}, backend.Invalidf("message cursor %q is not one this driver returned", p.Cursor)
		}
		after = &k
	}
	var want map[string]bool
	if p.IDs != nil {
		want = make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			want[id] = true
		}
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return backend.MessagePage{}, nil
	}
	now := b.clock.Now()
	type item struct {
		key browseKey
		pm  backend.PendingMessage
	}
	var items []item
	for _, m := range q.msgs {
		if want != nil && !want[m.ID] {
			continue
		}
		state, due := m.stateAt(now)
		if p.State != "" && state != p.State {
			continue
		}
		k := browseKey{prio: m.Priority, at: due.UnixNano(), seq: m.seq}
		if after != nil && k.compare(*after) <= 0 {
			continue
		}
		pm := backend.PendingMessage{Message: m.Message, State: state, Due: due, LastError: m.lastError}
		pm.Attempts = m.attempts
		items = append(items, item{k, pm})
	}
	slices.SortFunc(items, func(a, b item) int { return a.key.compare(b.key) })
	var page backend.MessagePage
	for i, it := range items {
		if i == p.Limit {
			last := items[i-1].key
			page.Next = fmt.Sprintf("%d.%d.%d", last.prio, last.at, last.seq)
			break
		}
		pm := it.pm
		pm.Message = cloneMessage(pm.Message)
		if p.WithoutBodies {
			pm.Body = nil
		}
		page.Messages = append(page.Messages, pm)
	}
	return page, nil
}
