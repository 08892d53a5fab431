package mysql_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// BenchmarkWakeup measures how late a Receive blocked on an empty queue
// returns after an Enqueue returned: through the same driver (woken at
// once), through the same driver's EnqueueTx and a commit (its
// receivers poll again from 10ms), and through another driver, as another process would (the
// receiver polls, every fila_poll_interval at most). The receiver has
// waited a second or more before each enqueue, which comes at a random
// point of its poll period, so its poll has backed off to the
// interval. It reports the median and the worst lateness.
//
//	go test -run '^$' -bench Wakeup -benchtime 20x ./mysql
func BenchmarkWakeup(b *testing.B) {
	db := testDB(b)
	prefix := freshPrefix(b, db)
	for _, c := range []struct {
		name  string
		other bool
		poll  string
		tx    bool
	}{
		{"same-driver", false, "250ms", false},
		{"same-driver-tx", false, "250ms", true},
		{"other-driver/poll=250ms", true, "250ms", false},
		{"other-driver/poll=50ms", true, "50ms", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			recv := openDriver(b, prefix, "fila_poll_interval", c.poll)
			send := recv
			if c.other {
				send = openDriver(b, prefix)
			}
			ctx := context.Background()
			queue := fmt.Sprintf("wake-%d", time.Now().UnixNano())
			late := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				got := make(chan time.Time, 1)
				go func() {
					ds, err := recv.Receive(ctx, queue, backend.ReceiveParams{Max: 1, Lease: time.Minute})
					if err != nil || len(ds) != 1 {
						b.Errorf("receive: %v, %d deliveries", err, len(ds))
					} else if _, err := recv.Ack(ctx, []backend.Ref{{Queue: queue, ID: ds[0].ID, Receipt: ds[0].Receipt}}); err != nil {
						b.Error(err)
					}
					got <- time.Now()
				}()
				// Let the receiver's poll back off, and enqueue at a
				// random point of its poll period.
				time.Sleep(time.Second + rand.N(300*time.Millisecond))
				msgs := []backend.Message{{ID: uuidFor(i, queue), Kind: "k", Body: []byte("x"), EnqueuedAt: time.Now()}}
				if c.tx {
					// EnqueueTx, then the commit.
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := send.EnqueueTx(ctx, tx, queue, msgs); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				} else if _, err := send.Enqueue(ctx, queue, msgs); err != nil {
					b.Fatal(err)
				}
				sent := time.Now()
				late = append(late, (<-got).Sub(sent))
			}
			sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
			b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-ms")
		})
	}
}
