package wake

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestBoard: a wake-up closes the channels handed out for its queue only,
// once; later subscribers wait for the next one; WakeAll wakes every queue.
func TestBoard(t *testing.T) {
	var b Board
	a1, a2, other := b.Sub("a"), b.Sub("a"), b.Sub("b")
	if a1 != a2 {
		t.Error("two waiters of one queue got different channels")
	}
	b.Wake("a")
	if !closed(a1) || closed(other) {
		t.Errorf("after Wake(a): a closed %v, b closed %v; want true, false", closed(a1), closed(other))
	}
	next := b.Sub("a")
	if closed(next) {
		t.Error("a channel taken after the wake-up is already closed")
	}
	b.Wake("nobody") // no waiter: nothing happens
	b.WakeAll()
	if !closed(next) || !closed(other) {
		t.Error("WakeAll left a waiter asleep")
	}
}
