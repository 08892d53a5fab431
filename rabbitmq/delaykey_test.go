package rabbitmq

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSlowDelayDeclarationIsNotLate: a delay queue's TTL runs from the
// publish, so when declaring the queue of a message's delay takes long (here
// the control channel is held for 80 ms), delayKey picks the queue again for
// the time left instead of making the message late by the declaration.
func TestSlowDelayDeclarationIsNotLate(t *testing.T) {
	d := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	queue := fmt.Sprintf("delaykey-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.QueueDelete(ctx, queue)
	})
	n, s, err := d.queueSession(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.declare(ctx, queue, n); err != nil {
		t.Fatal(err)
	}
	const hold = 80 * time.Millisecond
	due := time.Now().Add(time.Second)
	s.ctl.turn <- struct{}{} // another control call holds the channel
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(hold)
		<-s.ctl.turn
	}()
	key, err := s.delayKey(ctx, queue, n, due)
	left := time.Until(due)
	<-released
	if err != nil {
		t.Fatal(err)
	}
	var ms int64
	if _, err := fmt.Sscanf(key, n.main+delayInfix+"%d", &ms); err != nil {
		t.Fatalf("delayKey = %q, want a delay queue of %s: %v", key, n.main, err)
	}
	// The declarations after the held one are quick but not instant on a
	// busy broker: the message must not be late by the held one.
	if late := time.Duration(ms)*time.Millisecond - left; late > hold/2 {
		t.Errorf("delayKey = %q with %v left: the message would be %v late", key, left, late)
	}
	if ms == bucketMS(time.Second) {
		t.Errorf("delayKey = %q: the bucket was not picked again after an %v declaration", key, hold)
	}
}

// TestRunAtMilli: the fila-run header rounds a run-at up to the
// millisecond, so a consumer comparing it with the clock's whole
// milliseconds never hands a message out before its run-at.
func TestRunAtMilli(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_123)
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{base, 1_700_000_000_123},
		{base.Add(time.Nanosecond), 1_700_000_000_124},
		{base.Add(999 * time.Microsecond), 1_700_000_000_124},
	} {
		got := runAtMilli(tc.at)
		if got != tc.want {
			t.Errorf("runAtMilli(%v) = %d; want %d", tc.at, got, tc.want)
		}
		// A consumer hands the message out once now.UnixMilli() >= got:
		// the earliest such now is never before the run-at.
		if earliest := time.UnixMilli(got); earliest.Before(tc.at) {
			t.Errorf("runAtMilli(%v) lets it out at %v, before its run-at", tc.at, earliest)
		}
	}
}
