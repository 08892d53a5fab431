package filatest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filatest"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/postgres"
)

// A test of code that enqueues, on PostgreSQL: the server comes from
// FILA_TEST_POSTGRES_URL or a container, and the queue is the test's own.
func Example() {
	// In a _test.go file:
	_ = func(t *testing.T) {
		c := filatest.Open(t, "postgres")
		q := filatest.Queue(t, c)
		ctx := context.Background()

		if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":1}`)}); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Kind != "email.welcome" {
			t.Fatalf("received %d messages; want the email.welcome", len(ds))
		}
		if err := ds[0].Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The same test on every broker, each a subtest that is skipped where no
// server is found.
func Example_everyBroker() {
	_ = func(t *testing.T) {
		for _, broker := range filatest.Brokers {
			t.Run(broker, func(t *testing.T) {
				c := filatest.Open(t, broker) // import every driver for this
				q := filatest.Queue(t, c)
				if _, err := c.Enqueue(context.Background(), q, fila.Message{Kind: "ping"}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The variable that names each broker's server.
func ExampleEnvVar() {
	fmt.Println(filatest.EnvVar("postgres"))
	fmt.Println(filatest.EnvVar("memory") == "")
	// Output:
	// FILA_TEST_POSTGRES_URL
	// true
}
