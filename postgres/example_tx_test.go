package postgres_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/postgres"
)

// exampleURL is the server the runnable examples use: FILA_TEST_POSTGRES_URL,
// else a local server with the project's test setup.
func exampleURL() string {
	if u := os.Getenv("FILA_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Example_transactionalEnqueue creates an order and schedules its
// confirmation email in one transaction: both commit together, and a
// rolled-back order leaves no email behind.
func Example_transactionalEnqueue() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The application's own pool, shared with Fila.
	pool, err := pgxpool.New(ctx, exampleURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	// A schema of its own keeps the example apart from other data.
	schema := "fila_example_" + randHex(4)
	defer pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	drv, err := postgres.New(ctx, pool, postgres.Options{Schema: schema, Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := fila.New(drv)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".orders (id int PRIMARY KEY, email text NOT NULL)"); err != nil {
		fmt.Println(err)
		return
	}

	placeOrder := func(id int, email string, commit bool) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) // no-op after Commit
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".orders (id, email) VALUES ($1, $2)", id, email); err != nil {
			return err
		}
		// The message is written by the same transaction.
		if _, err := client.EnqueueTx(ctx, tx, "emails", []fila.Message{{
			Kind: "order.confirmation",
			Body: []byte(fmt.Sprint(id)),
		}}); err != nil {
			return err
		}
		if !commit {
			return tx.Rollback(ctx)
		}
		return tx.Commit(ctx)
	}
	if err := placeOrder(1, "ada@example.com", true); err != nil {
		fmt.Println(err)
		return
	}
	if err := placeOrder(2, "bob@example.com", false); err != nil {
		fmt.Println(err)
		return
	}

	var orders int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".orders").Scan(&orders); err != nil {
		fmt.Println(err)
		return
	}
	stats, err := client.QueueStats(ctx, "emails")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("orders: %d, emails queued: %d\n", orders, stats.Ready)

	ds, err := client.Receive(ctx, "emails", fila.ReceiveParams{Max: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range ds {
		fmt.Printf("send %s for order %s\n", d.Kind, d.Body)
		_ = d.Ack(ctx)
	}
	// Output:
	// orders: 1, emails queued: 1
	// send order.confirmation for order 1
}
