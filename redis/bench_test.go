package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/redis"
)

// The benchmarks compare the driver (through fila.Client) with raw go-redis
// doing the bare minimum on the same server. Each iteration runs one raw
// round and one driver round, timed apart, so both see the same load on a
// shared machine; the metrics are raw-msgs/s, driver-msgs/s and their ratio
// (driver/raw):
//
//	go test -run '^$' -bench . ./redis/
//
// Batched enqueue and batched receive+ack should reach a ratio of at least
// 0.5.

const benchBatch = 100

var benchBody = make([]byte, 100)

// pair times the raw and driver halves of a benchmark and reports them.
type pair struct {
	raw, drv   time.Duration
	nRaw, nDrv int
}

func (p *pair) timeRaw(n int, f func()) {
	t := time.Now()
	f()
	p.raw += time.Since(t)
	p.nRaw += n
}

func (p *pair) timeDriver(n int, f func()) {
	t := time.Now()
	f()
	p.drv += time.Since(t)
	p.nDrv += n
}

func (p *pair) report(b *testing.B) {
	raw := float64(p.nRaw) / p.raw.Seconds()
	drv := float64(p.nDrv) / p.drv.Seconds()
	b.ReportMetric(raw, "raw-msgs/s")
	b.ReportMetric(drv, "driver-msgs/s")
	b.ReportMetric(drv/raw, "ratio")
}

func rawXAdd(ctx context.Context, c goredis.Cmdable, stream string) *goredis.StringCmd {
	return c.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"k", "bench", "b", benchBody}})
}

func benchEnqueue(b *testing.B, batch int) {
	e := newEnv(b)
	ctx := context.Background()
	c := e.client(b, redis.Options{})
	stream := "{" + e.prefix + ":raw}:stream"
	msgs := make([]fila.Message, batch)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "bench", Body: benchBody}
	}
	var p pair
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.timeRaw(batch, func() {
			if batch == 1 {
				if err := rawXAdd(ctx, e.raw, stream).Err(); err != nil {
					b.Fatal(err)
				}
				return
			}
			pipe := e.raw.Pipeline()
			for j := 0; j < batch; j++ {
				rawXAdd(ctx, pipe, stream)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		})
		p.timeDriver(batch, func() {
			if _, err := c.EnqueueBatch(ctx, "enq", msgs); err != nil {
				b.Fatal(err)
			}
		})
	}
	p.report(b)
}

// BenchmarkEnqueueBatch: pipelined XADD of 100 vs EnqueueBatch of 100.
func BenchmarkEnqueueBatch(b *testing.B) { benchEnqueue(b, benchBatch) }

// BenchmarkEnqueueSingle: one XADD vs one Enqueue.
func BenchmarkEnqueueSingle(b *testing.B) { benchEnqueue(b, 1) }

func benchReadAck(b *testing.B, count int) {
	e := newEnv(b)
	ctx := context.Background()
	c := e.client(b, redis.Options{})
	stream := "{" + e.prefix + ":raw}:stream"
	const queue = "read"
	n := b.N * count
	// Fill both outside the timer.
	if err := e.raw.XGroupCreateMkStream(ctx, stream, "g", "$").Err(); err != nil {
		b.Fatal(err)
	}
	msgs := make([]fila.Message, 0, 1000)
	for done := 0; done < n; {
		pipe := e.raw.Pipeline()
		msgs = msgs[:0]
		for j := 0; j < 1000 && done < n; j++ {
			rawXAdd(ctx, pipe, stream)
			msgs = append(msgs, fila.Message{Kind: "bench", Body: benchBody})
			done++
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := c.EnqueueBatch(ctx, queue, msgs); err != nil {
			b.Fatal(err)
		}
	}
	var p pair
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.timeRaw(count, func() {
			res, err := e.raw.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{stream, ">"}, Count: int64(count), Block: -1}).Result()
			if err != nil || len(res[0].Messages) != count {
				b.Fatalf("XREADGROUP: %v", err)
			}
			ids := make([]string, len(res[0].Messages))
			for j, m := range res[0].Messages {
				ids[j] = m.ID
			}
			if err := e.raw.XAck(ctx, stream, "g", ids...).Err(); err != nil {
				b.Fatal(err)
			}
		})
		p.timeDriver(count, func() {
			ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: count, Lease: time.Minute})
			if err != nil || len(ds) != count {
				b.Fatalf("Receive: %d, %v", len(ds), err)
			}
			if count == 1 {
				err = ds[0].Ack(ctx)
			} else {
				err = c.AckBatch(ctx, ds)
			}
			if err != nil {
				b.Fatal(err)
			}
		})
	}
	p.report(b)
}

// BenchmarkReceiveAckBatch: XREADGROUP COUNT 100 + XACK of 100 vs Receive of
// 100 + AckBatch.
func BenchmarkReceiveAckBatch(b *testing.B) { benchReadAck(b, benchBatch) }

// BenchmarkReceiveAckSingle: XREADGROUP COUNT 1 + XACK vs Receive + Ack.
func BenchmarkReceiveAckSingle(b *testing.B) { benchReadAck(b, 1) }
