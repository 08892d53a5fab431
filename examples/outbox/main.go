// Command outbox shows the transactional outbox with Fila: an order row and
// its order.created message commit or roll back together in one PostgreSQL
// transaction, and a relay.Relay publishes the committed messages to another
// broker (RabbitMQ here), where a consumer receives them.
//
// Without the outbox a service that writes its database and then publishes
// to a broker either loses the message (crash after the commit) or publishes
// an order that was never stored (crash before it, or a rollback). With it
// the message is just another row of the same transaction; the relay moves
// it at least once, with its source id in the Fila-Source-Id header.
//
//	FILA_URL         the PostgreSQL database of the orders and the outbox;
//	                 required, for example
//	                 postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	FILA_TARGET_URL  the broker the relay publishes to, default mem:// (the
//	                 in-memory broker); any Fila URL: amqp://, redis://,
//	                 mongodb://, mysql://, ... When it cannot be reached the
//	                 example says so and relays to the in-memory broker
//	                 instead.
//
// Run it with
//
//	FILA_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go run ./examples/outbox
//	FILA_URL='postgres://...' FILA_TARGET_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/outbox
//
// # What it creates in your database
//
// The example writes to the database FILA_URL names, and prints each thing
// as it creates it:
//
//   - a table orders_<random> in the connection's default schema (usually
//     public), dropped again at the end;
//   - Fila's own tables, in the schema "fila" (or the one fila_schema names),
//     if they are missing: the example adds fila_migrate=true to the URL
//     unless it sets fila_migrate. They are left in place (other Fila clients
//     use them); `fila schema` and the postgres package doc describe them;
//   - the Fila queues outbox_<random> (on PostgreSQL) and orders_<random> (on
//     the target), deleted with their messages at the end.
//
// Point it at a test database.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	"github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/relay"
)

const (
	// defaultTargetURL is the target without FILA_TARGET_URL.
	defaultTargetURL = "mem://outbox-example"
	// fallbackURL is the target when the configured one cannot be reached.
	fallbackURL = "mem://outbox-example"
)

// config is what one run of the example uses.
type config struct {
	postgresURL string
	targetURL   string
	// table holds the orders; outbox is the Fila queue on PostgreSQL and
	// events the queue on the target.
	table, outbox, events string
	// quiet is how long the consumer keeps listening after the committed
	// order arrived, to show that nothing else does.
	quiet time.Duration
}

func main() {
	sfx := suffix()
	cfg := config{
		postgresURL: os.Getenv("FILA_URL"),
		targetURL:   envOr("FILA_TARGET_URL", defaultTargetURL),
		table:       "orders_" + sfx, outbox: "outbox_" + sfx, events: "orders_" + sfx,
		quiet: time.Second,
	}
	if cfg.postgresURL == "" {
		fmt.Fprintln(os.Stderr, "outbox: set FILA_URL to a PostgreSQL database the example may write to, for example\n"+
			"  FILA_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go run ./examples/outbox\n"+
			"It creates a table orders_<random> there (dropped at the end) and Fila's tables in schema \"fila\" if missing (kept).")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// order is the body of an order.created message.
type order struct {
	ID         int64  `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int64  `json:"total_cents"`
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	quiet := fila.WithLogger(slog.New(slog.DiscardHandler))

	// The source: Fila on the application's own PostgreSQL database.
	srcURL, schema, migrate, err := withMigrate(cfg.postgresURL)
	if err != nil {
		return err
	}
	if migrate {
		fmt.Fprintf(out, "creating Fila's tables in schema %q if missing (fila_migrate=true); they stay\n", schema)
	}
	src, err := fila.Open(ctx, srcURL, quiet)
	if err != nil {
		return fmt.Errorf("open PostgreSQL: %w", err)
	}
	defer src.Close()
	defer deleteQueue(src, cfg.outbox, out)
	pool := src.Driver().(*postgres.Driver).Pool()
	fmt.Fprintf(out, "creating table %s for the orders (dropped at the end)\n", cfg.table)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+pgx.Identifier{cfg.table}.Sanitize()+` (
		id          bigserial PRIMARY KEY,
		customer    text NOT NULL,
		total_cents bigint NOT NULL,
		created_at  timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create the orders table: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, derr := pool.Exec(dctx, `DROP TABLE `+pgx.Identifier{cfg.table}.Sanitize()); derr != nil {
			fmt.Fprintf(out, "dropping table %s: %v\n", cfg.table, derr)
			return
		}
		fmt.Fprintf(out, "dropped table %s\n", cfg.table)
	}()

	// Two orders: the first commits, the second rolls back. Each inserts its
	// row and enqueues its message in the same transaction.
	committed, err := placeOrder(ctx, src, cfg, "alice", 4200, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "order %d for alice: committed (row and order.created message)\n", committed)
	rolledBack, err := placeOrder(ctx, src, cfg, "bob", 990, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "order %d for bob: rolled back (row and message both gone)\n", rolledBack)

	// The target broker.
	dst, where, err := openTarget(ctx, cfg.targetURL, out)
	if err != nil {
		return err
	}
	defer dst.Close()
	defer deleteQueue(dst, cfg.events, out)

	// The relay publishes the outbox until the example ends.
	rctx, stopRelay := context.WithCancel(ctx)
	relayed := make(chan relay.Stats, 1)
	relayErr := make(chan error, 1)
	go func() {
		st, err := (&relay.Relay{From: src, FromQueue: cfg.outbox, To: dst, ToQueue: cfg.events,
			Logger: slog.New(slog.DiscardHandler)}).Run(rctx)
		relayed <- st
		relayErr <- err
	}()

	// A consumer on the target prints what arrives: the committed order,
	// then listens a little longer to show that nothing else comes.
	err = consume(ctx, dst, cfg, where, out, committed)
	stopRelay()
	st := <-relayed
	if rerr := <-relayErr; err == nil && rerr != nil {
		err = fmt.Errorf("relay: %w", rerr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the relay moved %d message(s) from postgres queue %q to %s queue %q\n", st.Moved, cfg.outbox, where, cfg.events)
	return nil
}

// placeOrder inserts an order and enqueues its order.created message in one
// transaction, then commits or rolls back. It returns the order's id.
func placeOrder(ctx context.Context, c *fila.Client, cfg config, customer string, cents int64, commit bool) (int64, error) {
	pool := c.Driver().(*postgres.Driver).Pool()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) // after Commit this does nothing

	o := order{Customer: customer, TotalCents: cents}
	if err := tx.QueryRow(ctx, `INSERT INTO `+pgx.Identifier{cfg.table}.Sanitize()+` (customer, total_cents) VALUES ($1, $2) RETURNING id`,
		customer, cents).Scan(&o.ID); err != nil {
		return 0, fmt.Errorf("insert the order: %w", err)
	}
	body, _ := json.Marshal(o)
	if _, err := c.EnqueueTx(ctx, tx, cfg.outbox, []fila.Message{{Kind: "order.created", Body: body}}); err != nil {
		return 0, fmt.Errorf("enqueue order.created: %w", err)
	}
	if !commit {
		return o.ID, tx.Rollback(ctx)
	}
	return o.ID, tx.Commit(ctx)
}

// openTarget opens the target broker, or the in-memory one when the target
// cannot be reached, saying so. It returns the client and the broker's name.
func openTarget(ctx context.Context, raw string, out io.Writer) (*fila.Client, string, error) {
	quiet := fila.WithLogger(slog.New(slog.DiscardHandler))
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := fila.Open(octx, raw, quiet)
	if err == nil {
		if err = c.Ping(octx); err != nil {
			c.Close()
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if errors.Is(err, fila.ErrInvalid) {
			return nil, "", fmt.Errorf("FILA_TARGET_URL: %w", err)
		}
		fmt.Fprintf(out, "target %s is unreachable (%v)\n", fila.Redact(raw), err)
		fmt.Fprintf(out, "relaying to the in-memory broker instead; start RabbitMQ or set FILA_TARGET_URL to see the order arrive there\n")
		if c, err = fila.Open(ctx, fallbackURL, quiet); err != nil {
			return nil, "", err
		}
		return c, "memory", nil
	}
	return c, brokerName(raw), nil
}

// brokerName names a broker by its URL scheme.
func brokerName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "target"
	}
	switch u.Scheme {
	case "amqp", "amqps":
		return "rabbitmq"
	case "mongodb", "mongodb+srv":
		return "mongo"
	case "rediss":
		return "redis"
	case "postgresql":
		return "postgres"
	case "mem":
		return "memory"
	}
	return u.Scheme
}

// consume receives from the target until the committed order has arrived
// and nothing more comes for cfg.quiet, printing each message.
func consume(ctx context.Context, c *fila.Client, cfg config, where string, out io.Writer, want int64) error {
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seen := false
	for {
		rctx, rcancel := deadline, context.CancelFunc(func() {})
		if seen {
			rctx, rcancel = context.WithTimeout(deadline, cfg.quiet)
		}
		ds, err := c.Receive(rctx, cfg.events, fila.ReceiveParams{Max: 10})
		rcancel()
		switch {
		case err != nil && seen && deadline.Err() == nil:
			fmt.Fprintf(out, "nothing else arrived within %v\n", cfg.quiet)
			return nil
		case err != nil:
			return fmt.Errorf("waiting for order %d on %s: %w", want, where, err)
		}
		for _, d := range ds {
			var o order
			_ = json.Unmarshal(d.Body, &o)
			fmt.Fprintf(out, "%s received %s: order %d for %s, %d.%02d (source id %s)\n",
				where, d.Kind, o.ID, o.Customer, o.TotalCents/100, o.TotalCents%100, d.Headers[relay.HeaderSourceID])
			if o.ID == want {
				seen = true
			}
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			return err
		}
	}
}

// withMigrate adds fila_migrate=true to a PostgreSQL URL that does not set
// fila_migrate, so the example creates Fila's tables on first run. It
// returns the URL, the schema of Fila's tables and whether they are created
// when missing.
func withMigrate(raw string) (string, string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", "", false, fmt.Errorf("FILA_URL must be a PostgreSQL URL (postgres://...), not %s", fila.Redact(raw))
	}
	q := u.Query()
	if q.Get(postgres.ParamMigrate) == "" {
		q.Set(postgres.ParamMigrate, "true")
	}
	u.RawQuery = q.Encode()
	schema := q.Get(postgres.ParamSchema)
	if schema == "" {
		schema = postgres.DefaultSchema
	}
	return u.String(), schema, q.Get(postgres.ParamMigrate) == "true", nil
}

// deleteQueue deletes an example queue with everything in it, saying so.
func deleteQueue(c *fila.Client, queue string, out io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.QueueDelete(ctx, queue, fila.QueueDeleteParams{Force: true}); err != nil {
		fmt.Fprintf(out, "deleting queue %s: %v\n", queue, err)
		return
	}
	fmt.Fprintf(out, "deleted queue %s\n", queue)
}

// suffix returns 8 random hex digits, for names no other run uses.
func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
