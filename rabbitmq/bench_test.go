package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
)

// The benchmarks compare the driver with raw amqp091-go on a quorum queue in
// the same run, alternating the two so that both meet the same broker state
// (a quorum queue's throughput drifts with its WAL and segment writes). Each
// reports raw-msgs/s, fila-msgs/s and the ratio fila/raw.
//
//	go test -run '^$' -bench . ./rabbitmq/

var benchBody = []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")

// rawQueue declares a fresh quorum queue on a raw connection and deletes it
// when b ends.
func rawQueue(b *testing.B) (*amqp.Connection, *amqp.Channel, string) {
	b.Helper()
	conn, err := amqp.Dial(testenv.RabbitMQURL(b))
	if err != nil {
		b.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	q := fmt.Sprintf("bench-raw-%d", time.Now().UnixNano())
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			_, _ = c.QueueDelete(q, false, false, false)
		}
		_ = conn.Close()
	})
	return conn, ch, q
}

// rawPublish publishes n messages with confirms, in batches of batch.
func rawPublish(b *testing.B, ch *amqp.Channel, q string, n, batch int) {
	dcs := make([]*amqp.DeferredConfirmation, 0, batch)
	for sent := 0; sent < n; {
		dcs = dcs[:0]
		for i := 0; i < batch && sent < n; i++ {
			dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
				DeliveryMode: amqp.Persistent, Body: benchBody, MessageId: "id", Type: "bench",
			})
			if err != nil {
				b.Fatal(err)
			}
			dcs = append(dcs, dc)
			sent++
		}
		for _, dc := range dcs {
			if !dc.Wait() {
				b.Fatal("nacked")
			}
		}
	}
}

func filaBench(b *testing.B) (*fila.Client, string) {
	b.Helper()
	u, err := url.Parse(testenv.RabbitMQURL(b))
	if err != nil {
		b.Fatal(err)
	}
	drv, err := rabbitmq.Open(context.Background(), u, backend.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	d := drv.(*rabbitmq.Driver)
	q := fmt.Sprintf("bench-fila-%d", time.Now().UnixNano())
	c, err := fila.New(d)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = d.QueueDelete(context.Background(), q)
		_ = c.Close()
	})
	return c, q
}

func filaPublish(b *testing.B, c *fila.Client, q string, n, batch int) {
	msgs := make([]fila.Message, batch)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "bench", Body: benchBody}
	}
	ctx := context.Background()
	for sent := 0; sent < n; {
		k := min(batch, n-sent)
		if _, err := c.EnqueueBatch(ctx, q, msgs[:k]); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
}

// benchPublish alternates raw and fila publishing of b.N messages each, in
// chunks of batch messages (raw: publish the chunk, then wait for its
// confirms; fila: EnqueueBatch of the chunk), so that both see the same
// broker state; it reports both rates and their ratio. One op is one message
// of each.
func benchPublish(b *testing.B, batch int) {
	conn, _, rq := rawQueue(b)
	ch, _ := conn.Channel()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	c, fq := filaBench(b)
	filaPublish(b, c, fq, 1, 1) // declare the topology outside the timing
	var rawTime, filaTime time.Duration
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; r++ {
		n := min(batch, b.N-done)
		raw := func() {
			start := time.Now()
			rawPublish(b, ch, rq, n, batch)
			rawTime += time.Since(start)
		}
		fl := func() {
			start := time.Now()
			filaPublish(b, c, fq, n, batch)
			filaTime += time.Since(start)
		}
		if r%2 == 0 {
			raw()
			fl()
		} else {
			fl()
			raw()
		}
		done += n
	}
	b.ReportMetric(float64(b.N)/rawTime.Seconds(), "raw-msgs/s")
	b.ReportMetric(float64(b.N)/filaTime.Seconds(), "fila-msgs/s")
	b.ReportMetric(rawTime.Seconds()/filaTime.Seconds(), "fila/raw")
}

// BenchmarkPublishBatch100: publish 100 messages then wait for their
// confirms (raw) vs EnqueueBatch of 100 (fila).
func BenchmarkPublishBatch100(b *testing.B) { benchPublish(b, 100) }

// BenchmarkPublishOne: one publish and its confirm at a time (raw) vs one
// Enqueue (fila).
func BenchmarkPublishOne(b *testing.B) { benchPublish(b, 1) }

// BenchmarkConsume100 compares, in alternating rounds of 500 messages from
// queues filled beforehand (untimed), raw consumption with prefetch
// 100 and one multiple-ack per 100 deliveries against the driver's
// Receive(Max 100) plus AckBatch. Alternating keeps the broker's state (WAL,
// segment writes) the same for both; it reports both rates and their ratio.
// One op is one message of each.
func BenchmarkConsume100(b *testing.B) {
	const round = 500
	conn, _, rq := rawQueue(b)
	pub, _ := conn.Channel()
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	ch, _ := conn.Channel()
	if err := ch.Qos(100, 0, false); err != nil {
		b.Fatal(err)
	}
	dl, err := ch.Consume(rq, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	c, fq := filaBench(b)
	ctx := context.Background()
	var rawTime, filaTime time.Duration
	var receives, filaGot int
	rawRound := func(n int) {
		start := time.Now()
		for i := 1; i <= n; i++ {
			d := <-dl
			if i%100 == 0 || i == n {
				if err := d.Ack(true); err != nil {
					b.Fatal(err)
				}
			}
		}
		rawTime += time.Since(start)
	}
	filaRound := func(until int) { // until all of the first until messages are received
		start := time.Now()
		for filaGot < until {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ds, err := c.Receive(rctx, fq, fila.ReceiveParams{Max: 100, Lease: time.Minute})
			cancel()
			if err != nil {
				st, _ := c.QueueStats(ctx, fq)
				b.Fatalf("Receive after %d of %d messages: %v (stats %+v)", filaGot, b.N, err, st)
			}
			if err := c.AckBatch(ctx, ds); err != nil {
				b.Fatal(err)
			}
			filaGot += len(ds)
			receives++
		}
		filaTime += time.Since(start)
	}
	rawPublish(b, pub, rq, b.N, 1000)
	filaPublish(b, c, fq, b.N, 1000)
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; r++ {
		n := min(round, b.N-done)
		if r%2 == 0 {
			rawRound(n)
			filaRound(done + n)
		} else {
			filaRound(done + n)
			rawRound(n)
		}
		done += n
	}
	b.ReportMetric(float64(b.N)/rawTime.Seconds(), "raw-msgs/s")
	b.ReportMetric(float64(b.N)/filaTime.Seconds(), "fila-msgs/s")
	b.ReportMetric(rawTime.Seconds()/filaTime.Seconds(), "fila/raw")
	b.ReportMetric(float64(b.N)/float64(receives), "msgs/receive")
}
