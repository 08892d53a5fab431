package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

func openTest(t *testing.T) *Driver {
	t.Helper()
	u, err := url.Parse(testenv.RabbitMQURL(t))
	if err != nil {
		t.Fatal(err)
	}
	drv, err := Open(context.Background(), u, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*Driver)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func testMsg(id string) backend.Message {
	return backend.Message{ID: id, Kind: "k", Body: []byte{}, EnqueuedAt: time.Now()}
}

// TestBlockedConnection: while the broker blocks the connection
// (connection.blocked), publishing fails at once with ErrBlocked naming the
// broker's reason; it works again once unblocked. The notification is
// injected: raising a real memory alarm would block every client of the
// shared test broker.
func TestBlockedConnection(t *testing.T) {
	d := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := "rmqtest-blocked-" + d.nonce
	defer func() { _ = d.QueueDelete(context.Background(), q) }()
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.setBlocked(amqp.Blocking{Active: true, Reason: "low on memory"})
	_, err = d.Enqueue(ctx, q, []backend.Message{testMsg("a")})
	if !errors.Is(err, ErrBlocked) || !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "low on memory") {
		t.Fatalf("Enqueue while blocked: want ErrBlocked with the reason, got %v", err)
	}
	s.setBlocked(amqp.Blocking{Active: false})
	if _, err := d.Enqueue(ctx, q, []backend.Message{testMsg("b")}); err != nil {
		t.Fatalf("Enqueue after unblock: %v", err)
	}
}

// TestQueueDeletedBehindTheDriver: a publish to a queue deleted by someone
// else (another process: QueueDelete in this one tells every instance) is
// returned (mandatory) and fails with ErrUnroutable; the driver then
// declares the topology again and the next Enqueue works.
func TestQueueDeletedBehindTheDriver(t *testing.T) {
	d, other := openTest(t), openTest(t)
	unregister(other) // out of d's scope, as if in another process
	other.scope += "\x00elsewhere"
	register(other)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := "rmqtest-deleted-" + d.nonce
	defer func() { _ = d.QueueDelete(context.Background(), q) }()
	if _, err := d.Enqueue(ctx, q, []backend.Message{testMsg("a")}); err != nil {
		t.Fatal(err)
	}
	if err := other.QueueDelete(ctx, q); err != nil {
		t.Fatal(err)
	}
	_, err := d.Enqueue(ctx, q, []backend.Message{testMsg("b")})
	if !errors.Is(err, ErrUnroutable) {
		t.Fatalf("Enqueue to a deleted queue: want ErrUnroutable, got %v", err)
	}
	if _, err := d.Enqueue(ctx, q, []backend.Message{testMsg("c")}); err != nil {
		t.Fatalf("Enqueue after the driver noticed: %v", err)
	}
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(ds) != 1 || ds[0].ID != "c" {
		t.Fatalf("Receive: %v, %+v; want message c", err, ds)
	}
}

// TestSpecificErrorsAreUnavailable: the driver's own errors are kinds of
// backend.ErrUnavailable (retryable), and stay distinct from each other.
func TestSpecificErrorsAreUnavailable(t *testing.T) {
	for _, e := range []error{ErrBlocked, ErrNacked, ErrUnroutable} {
		wrapped := mapErr(context.Background(), "publish", fmt.Errorf("%w: detail", e))
		if !errors.Is(wrapped, backend.ErrUnavailable) || !errors.Is(wrapped, e) {
			t.Errorf("%v: errors.Is ErrUnavailable = %v, itself = %v; want both", e, errors.Is(wrapped, backend.ErrUnavailable), errors.Is(wrapped, e))
		}
	}
	if errors.Is(ErrBlocked, ErrNacked) || errors.Is(ErrNacked, ErrUnroutable) {
		t.Error("the driver's errors match each other")
	}
}
