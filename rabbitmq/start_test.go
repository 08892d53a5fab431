package rabbitmq

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// TestReceiveCancelledWhileConsumerStarts: a Receive whose context ends
// while its consumer is still starting (declaring a quorum queue on a
// loaded cluster takes seconds) returns at once; the start goes on, and the
// next Receive gets the message through the consumer it made.
func TestReceiveCancelledWhileConsumerStarts(t *testing.T) {
	d := openTest(t)
	q := "rmqtest-start-" + d.nonce
	defer func() { _ = d.QueueDelete(context.Background(), q) }()
	bg, cancelBG := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelBG()
	if _, err := d.Enqueue(bg, q, []backend.Message{testMsg("a")}); err != nil {
		t.Fatal(err)
	}
	reached := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	releaseStart := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseStart) // before Close, which waits for the start
	d.beforeConsume = func() {
		close(reached)
		<-release
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		done <- err
	}()
	select {
	case <-reached:
	case <-bg.Done():
		t.Fatal("the consumer start did not reach basic.consume")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Receive returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Receive cancelled while its consumer was starting did not return")
	}
	releaseStart()
	ds, err := d.Receive(bg, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Message.ID != "a" {
		t.Fatalf("next Receive got %v, want message a", ds)
	}
}
