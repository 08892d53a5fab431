package memory

import (
	"context"
	"slices"
	"strings"
	"time"
)

// liveLocked reports whether mark name of queue exists and has not expired.
func (b *Broker) liveLocked(queue, name string, now time.Time) bool {
	until, ok := b.marks[queue][name]
	return ok && (until.IsZero() || now.Before(until))
}

// MarkSet stores a mark (backend.Marker).
func (d *Driver) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if onlyNew && b.liveLocked(queue, name, b.clock.Now()) {
		return false, nil
	}
	m := b.marks[queue]
	if m == nil {
		m = map[string]time.Time{}
		b.marks[queue] = m
	}
	m[name] = until
	return true, nil
}

// MarkGet reports whether an unexpired mark exists (backend.Marker).
func (d *Driver) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.liveLocked(queue, name, b.clock.Now()), nil
}

// MarkDelete deletes a mark (backend.Marker).
func (d *Driver) MarkDelete(ctx context.Context, queue, name string) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.marks[queue], name)
	if len(b.marks[queue]) == 0 {
		delete(b.marks, queue)
	}
	return nil
}

// MarkList lists a queue's unexpired marks by prefix (backend.MarkLister).
// It forgets the expired ones it passes.
func (d *Driver) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	var names []string
	for name := range b.marks[queue] {
		if !b.liveLocked(queue, name, now) {
			delete(b.marks[queue], name)
			continue
		}
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
