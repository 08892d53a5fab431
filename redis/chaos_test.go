package redis_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/redis"
)

// Competing consumers with short leases ack, retry, extend and abandon
// deliveries at random (abandoned ones are taken over when their lease
// ends, so batches lose entries to other consumers and stale receipts
// abound). Every message must be acked successfully exactly once (a lost
// message shows as none), and no ack may succeed for a delivery whose
// message had already been handed out again with a higher attempt before
// the ack began (a stale receipt stealing the new holder's lease). At the
// end the queue holds nothing, not even a lease.
func TestChaosEveryMessageAckedOnce(t *testing.T) { bothPaths(t, testChaos) }

func testChaos(t *testing.T, e *env) {
	const (
		q       = "chaos"
		n       = 300
		workers = 6
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := e.driver(t, redis.Options{})
	msgs := make([]backend.Message, n)
	for i := range msgs {
		msgs[i] = msg(t, "chaos")
	}
	if _, err := prod.Enqueue(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[string]int{}
		total int
		// newest is the highest attempt of each message handed out so far.
		newest = map[string]int{}
	)
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= n
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		d := e.driver(t, redis.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done() && ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				ds, err := d.Receive(rctx, q, backend.ReceiveParams{Max: 1 + rand.IntN(20), Lease: 150 * time.Millisecond})
				rcancel()
				if errors.Is(err, context.DeadlineExceeded) {
					continue
				}
				if err != nil {
					t.Errorf("Receive: %v", err)
					return
				}
				mu.Lock()
				for _, x := range ds {
					newest[x.ID] = max(newest[x.ID], x.Attempt)
				}
				mu.Unlock()
				var acks []backend.Ref
				var attempts []int
				for _, x := range ds {
					r := backend.Ref{Queue: q, ID: x.ID, Receipt: x.Receipt}
					switch p := rand.IntN(10); {
					case p < 5:
						acks, attempts = append(acks, r), append(attempts, x.Attempt)
					case p < 6:
						if err := d.Retry(ctx, r, 0, "chaos"); err != nil && !errors.Is(err, backend.ErrLeaseLost) {
							t.Errorf("Retry: %v", err)
						}
					case p < 8:
						if _, err := d.Extend(ctx, r, time.Second); err != nil && !errors.Is(err, backend.ErrLeaseLost) {
							t.Errorf("Extend: %v", err)
						}
						acks, attempts = append(acks, r), append(attempts, x.Attempt)
					default: // abandoned: its lease runs out
					}
				}
				if rand.IntN(4) == 0 {
					time.Sleep(400 * time.Millisecond) // let the batch's leases expire, and some be taken over, first
				}
				if len(acks) == 0 {
					continue
				}
				mu.Lock()
				before := make([]int, len(acks))
				for i, r := range acks {
					before[i] = newest[r.ID]
				}
				mu.Unlock()
				errs, err := d.Ack(ctx, acks)
				if err != nil {
					t.Errorf("Ack: %v", err)
					return
				}
				mu.Lock()
				for i, err := range errs {
					switch {
					case err == nil:
						acked[acks[i].ID]++
						total++
						if before[i] > attempts[i] {
							t.Errorf("message %s: the ack of attempt %d succeeded after attempt %d was handed out", acks[i].ID, attempts[i], before[i])
						}
					case !errors.Is(err, backend.ErrLeaseLost):
						t.Errorf("Ack: %v", err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("only %d of %d messages acked within the time limit", total, n)
	}
	for _, m := range msgs {
		if c := acked[m.ID]; c != 1 {
			t.Errorf("message %s acked successfully %d times, want 1", m.ID, c)
		}
	}
	if len(acked) != n {
		t.Errorf("%d distinct messages acked, want %d", len(acked), n)
	}
	k := redis.QueueKeys(e.prefix, q)
	if l, _ := e.raw.XLen(ctx, k[redis.KeyStream]).Result(); l != 0 {
		t.Errorf("%d entries left in the stream", l)
	}
	// Every path that empties a lease consumer deletes it: nothing is left.
	assertNoLeases(t, e, q)
}
