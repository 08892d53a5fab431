package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestConsumerCancelRacingQueueDelete cancels a puller's consumer while the
// queue is being deleted, many times with the two moved against each other.
// RabbitMQ 3.10 answers such a cancel of a quorum queue's consumer twice,
// and a cancel that waited for its answer left amqp091's reader blocked on
// the second one: every later call on the connection hung, Close too (the
// worker suite hung for 19 minutes in CI when its cleanup deleted a queue
// while the idle puller parked). Each round must end within a bound; the
// driver keeps working after the last.
func TestConsumerCancelRacingQueueDelete(t *testing.T) {
	raw := testenv.RabbitMQURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	drv, err := rabbitmq.Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	d := drv.(*rabbitmq.Driver)
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	del, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	wedged := false
	// A wedged connection's Close never returns: leave it to the process.
	t.Cleanup(func() {
		if !wedged {
			_ = c.Close()
		}
	})
	const rounds = 80
	const bound = 20 * time.Second
	base := uniqueQueue(t)
	for i := range rounds {
		q := fmt.Sprintf("%s-%d", base, i)
		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k"}); err != nil {
			t.Fatalf("round %d: Enqueue: %v", i, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 2, Lease: time.Minute})
		cancel()
		if err != nil || len(ds) != 1 {
			t.Fatalf("round %d: Receive: %d deliveries, %v", i, len(ds), err)
		}
		// Another connection deletes the queue (as another process
		// would) while the consumer is cancelled a little later each
		// round: the cancel lands before the delete, while the queue's
		// Raft server stops, or after.
		delay := time.Duration(i%40) * 250 * time.Microsecond
		done := make(chan error, 2)
		go func() {
			_, err := del.QueueDelete(rabbitmq.DefaultPrefix+"."+q, false, false, false)
			done <- err
		}()
		go func() {
			time.Sleep(delay)
			rabbitmq.StopConsumer(d, q)
			done <- nil
		}()
		timer := time.NewTimer(bound)
		for range 2 {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("round %d: deleting the queue: %v", i, err)
				}
			case <-timer.C:
				wedged = true
				t.Fatalf("round %d (cancel %v after the delete began): the delete or the cancel did not return within %v: the connection is wedged", i, delay, bound)
			}
		}
		// The rest of the queue's topology goes through the driver, which
		// must still answer.
		go func() { done <- c.QueueDelete(ctx, q, fila.QueueDeleteParams{Force: true}) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: QueueDelete: %v", i, err)
			}
		case <-timer.C:
			wedged = true
			t.Fatalf("round %d (cancel %v after the delete began): QueueDelete did not return within %v: the connection is wedged", i, delay, bound)
		}
		timer.Stop()
	}
	// The connection still answers.
	q := base + "-after"
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if _, err := c.Enqueue(sctx, q, fila.Message{Kind: "k"}); err != nil {
		t.Fatalf("Enqueue after the rounds: %v", err)
	}
	if err := c.QueueDelete(sctx, q, fila.QueueDeleteParams{Force: true}); err != nil {
		t.Fatalf("QueueDelete after the rounds: %v", err)
	}
}
