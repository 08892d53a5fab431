package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errNoBatch is returned by systems without a batch enqueue API (asynq).
var errNoBatch = errors.New("no batch enqueue API")

// System is one way of running a queue on a broker: Fila through its driver
// and worker package, a raw-client loop, or a peer library (River, asynq).
// Every scenario drives systems only through this interface, so each does
// the same work: the same bodies, the same concurrency, and a message counts
// as done only once its acknowledgement is stored.
type System interface {
	// Name is shown in the tables, e.g. "fila" or "river (FetchCooldown 1ms)".
	Name() string
	// Setup prepares a fresh, empty queue for one run.
	Setup(ctx context.Context) error
	// Enqueue stores bodies: one body uses the single-message call, several
	// the batch call (errNoBatch where the system has none).
	Enqueue(ctx context.Context, bodies [][]byte) error
	// Start runs consumers with the given concurrency until Stop. onStart is
	// called with the body at the start of each handler (the job itself is a
	// no-op).
	Start(ctx context.Context, concurrency int, onStart func(body []byte)) (Consumer, error)
	// Teardown removes what the run left in the broker.
	Teardown(ctx context.Context) error
	// Close releases the system's connections and removes its schema,
	// database or keys.
	Close(ctx context.Context) error
}

// Consumer is a running set of consumers.
type Consumer interface {
	// Done is how many messages have been acked with the ack stored.
	Done() int64
	// Stop ends the consumers and waits for them.
	Stop() error
}

// body layout: 8 bytes of intended send time (Unix ns, big endian) and
// padding to bodySize, the same for every system.
const bodySize = 64

func makeBody(intended time.Time) []byte {
	b := make([]byte, bodySize)
	binary.BigEndian.PutUint64(b, uint64(intended.UnixNano()))
	for i := 8; i < bodySize; i++ {
		b[i] = 'x'
	}
	return b
}

func bodyTime(b []byte) (time.Time, bool) {
	if len(b) < 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))), true
}

func randSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// slotLoop is the consumer shape shared by the raw baselines, mirroring
// Fila's worker: one fetcher asks for as many messages as it has free slots
// (at most maxFetch) and runs each in its own goroutine, which acks it.
// fetch may return no items (it should wait briefly itself when the queue is
// empty).
type slotLoop[T any] struct {
	done   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startSlotLoop[T any](parent context.Context, concurrency, maxFetch int,
	fetch func(ctx context.Context, n int) ([]T, error), handle func(ctx context.Context, item T) bool) *slotLoop[T] {
	ctx, cancel := context.WithCancel(parent)
	l := &slotLoop[T]{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		slots := make(chan struct{}, concurrency)
		var jobs sync.WaitGroup
		defer jobs.Wait()
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			n := min(1+concurrency-len(slots), maxFetch)
			items, err := fetch(ctx, n)
			if err != nil || len(items) == 0 {
				<-slots
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					logf("fetch: %v", err)
					sleepCtx(ctx, 10*time.Millisecond)
				}
				continue
			}
			for range len(items) - 1 {
				slots <- struct{}{}
			}
			for _, it := range items {
				jobs.Add(1)
				go func() {
					defer func() { <-slots; jobs.Done() }()
					if handle(ctx, it) {
						l.done.Add(1)
					}
				}()
			}
		}
	}()
	return l
}

func (l *slotLoop[T]) Done() int64 { return l.done.Load() }

func (l *slotLoop[T]) Stop() error {
	l.cancel()
	l.wg.Wait()
	return nil
}

// goLoop runs concurrency goroutines each calling step until ctx ends; step
// reports whether it completed a message.
type goLoop struct {
	done   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startGoLoop(parent context.Context, concurrency int, step func(ctx context.Context) (bool, error)) *goLoop {
	ctx, cancel := context.WithCancel(parent)
	l := &goLoop{cancel: cancel}
	for range concurrency {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				ok, err := step(ctx)
				if err != nil && ctx.Err() == nil {
					logf("consume: %v", err)
					sleepCtx(ctx, 10*time.Millisecond)
				}
				if ok {
					l.done.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *goLoop) Done() int64 { return l.done.Load() }

func (l *goLoop) Stop() error {
	l.cancel()
	l.wg.Wait()
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
