// Package delaybench_test measures how late a delayed message reaches a
// receiver that is already waiting for it, on every broker: the figure
// behind "Delay: 1s" in a job system. Run it with a fixed count, since each
// sample waits a second:
//
//	go test -run '^$' -bench DelayLateness -benchtime 20x ./internal/delaybench
//
// It reports p50 and max lateness in milliseconds: the time from the
// message's run-at (its EnqueuedAt plus the delay) to the moment Receive
// returned it. Tests in the package run nothing of their own.
package delaybench_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filatest"
	"github.com/fila-go/fila/internal/testenv"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// delay is the delay of every message, as in #22's figure.
const delay = time.Second

func BenchmarkDelayLateness(b *testing.B) {
	for _, broker := range []string{filatest.Memory, filatest.Postgres, filatest.Redis, filatest.RabbitMQ, filatest.Mongo, filatest.MySQL} {
		b.Run(broker, func(b *testing.B) {
			c := filatest.Open(b, broker)
			q := filatest.Queue(b, c)
			ctx := context.Background()
			// A first message sets the queue up (RabbitMQ declares its
			// delay queue on the first delayed enqueue), outside the
			// samples.
			lateness(b, ctx, c, q)
			var late []time.Duration
			for b.Loop() {
				late = append(late, lateness(b, ctx, c, q))
			}
			slices.Sort(late)
			b.ReportMetric(ms(late[len(late)/2]), "p50-late-ms")
			b.ReportMetric(ms(late[len(late)-1]), "max-late-ms")
			b.ReportMetric(0, "ns/op") // the wall time is the delay
		})
	}
}

// lateness enqueues one message with the delay while a receiver waits and
// returns how long after its run-at the receiver had it.
func lateness(b *testing.B, ctx context.Context, c *fila.Client, q string) time.Duration {
	b.Helper()
	type got struct {
		d  *fila.Delivery
		at time.Time
	}
	ch := make(chan got, 1)
	errc := make(chan error, 1)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		ds, err := c.Receive(rctx, q, fila.ReceiveParams{})
		if err != nil {
			errc <- err
			return
		}
		ch <- got{ds[0], time.Now()}
	}()
	// Let the receiver start waiting before the message exists.
	time.Sleep(100 * time.Millisecond)
	if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "late", Delay: delay}); err != nil {
		b.Fatal(err)
	}
	select {
	case g := <-ch:
		if err := g.d.Ack(ctx); err != nil {
			b.Fatal(err)
		}
		return g.at.Sub(g.d.EnqueuedAt.Add(delay))
	case err := <-errc:
		b.Fatal(err)
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
