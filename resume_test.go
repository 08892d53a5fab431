package fila_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// TestResumeWithinOneInterval: a Receive waiting out a pause made by
// another client receives within one control interval (plus a read of the
// marks) of the resume. It used to sleep an interval between looks at a
// view that could be an interval old itself: up to about three intervals
// (issue 38, item 5). Six queues at once, so that the phases of their
// refreshers and sleeps vary.
func TestResumeWithinOneInterval(t *testing.T) {
	const (
		interval = 400 * time.Millisecond
		queues   = 6
		// One interval, and room for a loaded machine: far less than the
		// two intervals the old loop could take.
		bound = interval + 250*time.Millisecond
	)
	broker := memory.NewBroker(memory.BrokerOptions{})
	open := func() *fila.Client {
		c, err := fila.New(broker.Open(), fila.WithControlInterval(interval))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	admin, cons := open(), open()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	late := make(chan string, queues)
	for i := range queues {
		q := fmt.Sprint("resume-", i)
		if err := admin.QueuePause(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Enqueue(ctx, q, fila.Message{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make(chan time.Time, 1)
			go func() {
				if _, err := cons.Receive(ctx, q, fila.ReceiveParams{}); err != nil {
					t.Errorf("Receive(%s): %v", q, err)
				}
				got <- time.Now()
			}()
			// Let the Receive see the pause and wait (two intervals; a
			// Receive that has not seen it yet would get the message at
			// once, which the check below reports).
			time.Sleep(2*interval + time.Duration(i)*interval/queues)
			resumed := time.Now()
			if err := admin.QueueResume(ctx, q); err != nil {
				t.Error(err)
				return
			}
			at := <-got
			if at.Before(resumed) {
				t.Errorf("%s: received before the resume", q)
			}
			if d := at.Sub(resumed); d > bound {
				late <- fmt.Sprintf("%s: received %v after the resume, want at most %v", q, d.Round(time.Millisecond), bound)
			}
		}()
	}
	wg.Wait()
	close(late)
	for msg := range late {
		t.Error(msg)
	}
}
