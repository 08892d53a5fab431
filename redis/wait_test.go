package redis_test

import (
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/redis"
)

// TestWaitEndsAtDueTime: a wait shorter than Options.Block (a known due
// time) ends on its own timer, not when Redis ends the blocked read (an idle
// server does that only on its cron, every 100 ms by default); later waits
// share the read still in flight instead of piling up more; and an entry
// wakes a long wait.
func TestWaitEndsAtDueTime(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t, redis.Options{Block: 20 * time.Second})
	ctx := testCtx(t)
	stream := redis.QueueKeys(e.prefix, "q")[redis.KeyStream]
	id, err := e.raw.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"x", "1"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if due, err := d.Wait(ctx, stream, id, 10*time.Millisecond); err != nil || !due {
		t.Fatalf("a 10 ms wait on a stream without new entries: due %v, %v", due, err)
	}
	w := d.Watch(stream)
	if w == nil {
		t.Fatal("the blocked read ended with the wait")
	}
	// The read blocks for 20 s: getting here well before shows that the
	// timer ended the wait.
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("a 10 ms wait took %v", el)
	}
	if _, err := d.Wait(ctx, stream, id, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d.Watch(stream) != w {
		t.Fatal("a second wait started another blocked read")
	}
	errc := make(chan error, 1)
	go func() {
		due, err := d.Wait(ctx, stream, id, time.Hour)
		if err == nil && due {
			err = errors.New("a wait without a due time reported one")
		}
		errc <- err
	}()
	if err := e.raw.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"x", "2"}}).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a new entry did not end the wait")
	}
}
