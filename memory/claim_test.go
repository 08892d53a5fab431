package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
)

// A claim hands out the oldest receivable messages first (run-at, then
// enqueue order), whatever Max is and however the queue's messages were
// enqueued, delayed and retried.
func TestClaimOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, max := range []int{1, 2, 7, 64, 1000} {
		t.Run(fmt.Sprint("max=", max), func(t *testing.T) {
			ctx := context.Background()
			clock := memory.NewFakeClock(start)
			d := memory.NewBroker(memory.BrokerOptions{Clock: clock}).Open()
			rng := rand.New(rand.NewPCG(1, uint64(max)))
			// 200 messages, run-ats spread over the past minute in a
			// random order, several sharing one run-at.
			const n = 200
			msgs := make([]backend.Message, n)
			for i := range msgs {
				msgs[i] = backend.Message{
					ID: fmt.Sprintf("m%03d", i), Kind: "k", Body: []byte{},
					RunAt: start.Add(-time.Duration(1+rng.IntN(60)) * time.Second),
				}
			}
			if _, err := d.Enqueue(ctx, "q", msgs); err != nil {
				t.Fatal(err)
			}
			// Retry the first few claimed: they come back after everything
			// already due.
			ds, err := d.Receive(ctx, "q", backend.ReceiveParams{Max: 5, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for _, dl := range ds {
				if err := d.Retry(ctx, backend.Ref{Queue: "q", ID: dl.ID, Receipt: dl.Receipt}, 0, "again"); err != nil {
					t.Fatal(err)
				}
			}
			retried := make([]string, len(ds))
			for i, dl := range ds {
				retried[i] = dl.ID
			}

			want := make([]backend.Message, n)
			copy(want, msgs)
			slices.SortStableFunc(want, func(a, b backend.Message) int { return a.RunAt.Compare(b.RunAt) })
			var wantIDs []string
			for _, m := range want {
				if !slices.Contains(retried, m.ID) {
					wantIDs = append(wantIDs, m.ID)
				}
			}
			// All come back due at the same moment: in enqueue order.
			slices.Sort(retried)
			wantIDs = append(wantIDs, retried...)

			var got []string
			for len(got) < n {
				ds, err := d.Receive(ctx, "q", backend.ReceiveParams{Max: max, Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) > max {
					t.Fatalf("a claim of Max %d returned %d", max, len(ds))
				}
				for _, dl := range ds {
					got = append(got, dl.ID)
				}
			}
			if !slices.Equal(got, wantIDs) {
				t.Errorf("claim order\n got %v\nwant %v", got, wantIDs)
			}
		})
	}
}

// BenchmarkClaimDeepQueue claims and acks one message at a time from a
// queue holding 10,000: the cost of a claim grows with the queue.
func BenchmarkClaimDeepQueue(b *testing.B) {
	ctx := context.Background()
	d := memory.NewBroker(memory.BrokerOptions{}).Open()
	batch := make([]backend.Message, 1000)
	seq := 0
	fill := func(n int) {
		for n > 0 {
			k := min(n, len(batch))
			for i := range batch[:k] {
				seq++
				batch[i] = backend.Message{ID: fmt.Sprint(seq), Kind: "k", Body: []byte{}}
			}
			if _, err := d.Enqueue(ctx, "q", batch[:k]); err != nil {
				b.Fatal(err)
			}
			n -= k
		}
	}
	fill(10_000)
	b.ResetTimer()
	for b.Loop() {
		ds, err := d.Receive(ctx, "q", backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Ack(ctx, []backend.Ref{{Queue: "q", ID: ds[0].ID, Receipt: ds[0].Receipt}}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fill(1) // keep 10,000 queued
		b.StartTimer()
	}
}
