// Package wake wakes the goroutines that wait for news of a queue: a
// driver instance's blocked receivers, woken when the instance itself
// enqueues, replays or releases a message of the queue.
package wake

import "sync"

// Board hands out, per queue, a channel that is closed at the queue's next
// wake-up. The zero value is ready to use; it is safe for concurrent use.
// A waiter takes its channel before it looks at the queue, so a wake-up
// that comes while it looks is not missed.
type Board struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

// Sub returns a channel closed at the next wake-up of queue.
func (b *Board) Sub(queue string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.chans[queue]
	if !ok {
		if b.chans == nil {
			b.chans = map[string]chan struct{}{}
		}
		ch = make(chan struct{})
		b.chans[queue] = ch
	}
	return ch
}

// Wake wakes the waiters of queue.
func (b *Board) Wake(queue string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.chans[queue]; ok {
		close(ch)
		delete(b.chans, queue)
	}
}

// WakeAll wakes every waiter.
func (b *Board) WakeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for q, ch := range b.chans {
		close(ch)
		delete(b.chans, q)
	}
}
