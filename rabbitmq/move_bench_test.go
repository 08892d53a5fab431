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

// BenchmarkReceiveDelayed measures taking delayed messages early (what a
// relay does when it moves a queue): ReceiveDelayed(Max 100) and Ack of each
// batch, against raw basic.get + ack of the same number of messages from a
// classic queue. The driver's extra cost is the probe of every possible
// delay queue name per call. One op is one message of each.
func BenchmarkReceiveDelayed(b *testing.B) {
	const batch = 100
	raw := testenv.RabbitMQURL(b)
	conn, err := amqp.Dial(raw)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	rq := fmt.Sprintf("bench-rawget-%d", time.Now().UnixNano())
	if _, err := ch.QueueDeclare(rq, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = ch.QueueDelete(rq, false, false, false) }()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	rawPublish(b, ch, rq, b.N, batch)

	u, err := url.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	drv, err := rabbitmq.Open(context.Background(), u, backend.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	d := drv.(*rabbitmq.Driver)
	ctx := context.Background()
	fq := fmt.Sprintf("bench-delayed-%d", time.Now().UnixNano())
	c, err := fila.New(d)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = d.QueueDelete(ctx, fq)
		_ = c.Close()
	}()
	msgs := make([]fila.Message, batch)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "bench", Body: benchBody, Delay: time.Hour}
	}
	for sent := 0; sent < b.N; sent += batch {
		if _, err := c.EnqueueBatch(ctx, fq, msgs[:min(batch, b.N-sent)]); err != nil {
			b.Fatal(err)
		}
	}

	b.ResetTimer()
	start := time.Now()
	for got := 0; got < b.N; {
		dv, ok, err := ch.Get(rq, false)
		if err != nil || !ok {
			b.Fatalf("raw get: %v %v", ok, err)
		}
		if err := dv.Ack(false); err != nil {
			b.Fatal(err)
		}
		got++
	}
	rawTime := time.Since(start)
	start = time.Now()
	for got := 0; got < b.N; {
		ds, err := d.ReceiveDelayed(ctx, fq, backend.ReceiveParams{Max: batch, Lease: time.Minute})
		if err != nil || len(ds) == 0 {
			b.Fatalf("ReceiveDelayed: %d, %v", len(ds), err)
		}
		refs := make([]backend.Ref, len(ds))
		for i, dl := range ds {
			refs[i] = backend.Ref{Queue: fq, ID: dl.ID, Receipt: dl.Receipt}
		}
		if _, err := d.Ack(ctx, refs); err != nil {
			b.Fatal(err)
		}
		got += len(ds)
	}
	filaTime := time.Since(start)
	b.StopTimer()
	rawRate := float64(b.N) / rawTime.Seconds()
	filaRate := float64(b.N) / filaTime.Seconds()
	b.ReportMetric(rawRate, "raw-msgs/s")
	b.ReportMetric(filaRate, "fila-msgs/s")
	b.ReportMetric(filaRate/rawRate, "fila/raw")
}
