package rabbitmq

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestLockWithin: Close's shutdown of a puller takes its ensureMu only while
// its context lasts, so a holder stuck on a broker that stopped answering
// cannot hold Close.
func TestLockWithin(t *testing.T) {
	var mu sync.Mutex
	if !lockWithin(context.Background(), &mu) {
		t.Fatal("a free mutex was not locked")
	}
	// Held: given up when the context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if lockWithin(ctx, &mu) {
		t.Fatal("a held mutex was locked")
	}
	// Released while waiting: locked.
	released := make(chan struct{})
	go func() {
		<-released
		mu.Unlock()
	}()
	got := make(chan bool, 1)
	go func() { got <- lockWithin(context.Background(), &mu) }()
	close(released)
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("a mutex released meanwhile was not locked")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lockWithin did not lock a released mutex within 10s")
	}
}
