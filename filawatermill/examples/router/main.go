// Command router runs a Watermill router over Fila: the handler "ship"
// consumes the topic "orders" (consumer group "shipping") and publishes a
// shipment for each order to the topic "shipments", which the handler
// "notify" consumes (group "notifications"). The first try at order 2
// fails: the router nacks it, and Fila delivers it again 100 ms later with
// its attempt one higher. It runs on the in-memory broker by default; set
// FILA_URL to run the same code on a real broker:
//
//	go run ./examples/router
//	go run ./examples/router -v   # with the router's and Fila's logs on stderr
//	FILA_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable&fila_migrate=true' go run ./examples/router
//	FILA_URL=redis://127.0.0.1:6379/0 go run ./examples/router
//	FILA_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/router
//	FILA_URL=mongodb://127.0.0.1:27017/fila go run ./examples/router
//	FILA_URL='mysql://root@127.0.0.1:3306/test?fila_migrate=true' go run ./examples/router
//
// (from the filawatermill folder, which is a Go module of its own). On a
// real broker the topic names end with a random suffix (orders-<random>,
// shipments-<random>), so that runs side by side never share a
// subscription, and the subscriptions are ended at the end, which deletes
// their queues.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filawatermill"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

// Order is the event the shop publishes; Shipment is what "ship" publishes.
type (
	Order    struct{ ID int }
	Shipment struct {
		OrderID int
		Parcel  string
	}
)

func main() {
	verbose := flag.Bool("v", false, "log the router's and Fila's records to stderr")
	flag.Parse()
	u := os.Getenv("FILA_URL")
	if u == "" {
		u = "mem://"
	}
	logs := io.Discard
	if *verbose {
		logs = os.Stderr
	}
	if err := run(u, os.Stdout, logs); err != nil {
		fmt.Fprintln(os.Stderr, "router example:", err)
		os.Exit(1)
	}
}

// run tells the story on the broker at rawURL, writing it to out and the
// logs to logs.
func run(rawURL string, out, logs io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slogger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	logger := watermill.NewSlogLogger(slogger)

	c, err := fila.Open(ctx, rawURL, fila.WithLogger(slogger))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintln(out, "broker", fila.Redact(rawURL))

	orders, shipments := "orders", "shipments"
	if c.DriverName() != "memory" {
		suffix := "-" + randomHex()
		orders, shipments = orders+suffix, shipments+suffix
	}

	pub, err := filawatermill.NewPublisher(c, filawatermill.PublisherConfig{Logger: logger})
	if err != nil {
		return err
	}
	shipping, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{ConsumerGroup: "shipping", Logger: logger})
	if err != nil {
		return err
	}
	notifications, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{ConsumerGroup: "notifications", Logger: logger})
	if err != nil {
		return err
	}
	// End the subscriptions at the end: TopicUnsubscribe deletes their
	// queues, with anything left in them.
	defer func() {
		for _, s := range [][2]string{{orders, "shipping"}, {shipments, "notifications"}} {
			q := filawatermill.DefaultQueueName(s[0], s[1])
			if err := c.TopicUnsubscribe(context.WithoutCancel(ctx), s[0], q); err != nil {
				fmt.Fprintf(out, "unsubscribing %s: %v\n", q, err)
			}
		}
	}()

	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, logger)
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		ship   []string
		notify []string
		done   = make(chan struct{})
	)
	// ship: one shipment per order. An error nacks the order; Fila brings
	// it back after the subscriber's NackDelay, with its attempt + 1.
	router.AddHandler("ship", orders, shipping, shipments, pub, func(msg *message.Message) ([]*message.Message, error) {
		var o Order
		if err := json.Unmarshal(msg.Payload, &o); err != nil {
			return nil, err
		}
		attempt := filawatermill.DeliveryOf(msg).Attempt
		if o.ID == 2 && attempt == 1 {
			mu.Lock()
			ship = append(ship, fmt.Sprintf("  ship: order %d, attempt %d: failed (warehouse busy), nacked", o.ID, attempt))
			mu.Unlock()
			return nil, errors.New("warehouse busy")
		}
		body, _ := json.Marshal(Shipment{OrderID: o.ID, Parcel: fmt.Sprintf("P-%03d", o.ID)})
		mu.Lock()
		ship = append(ship, fmt.Sprintf("  ship: order %d, attempt %d: shipped", o.ID, attempt))
		mu.Unlock()
		return []*message.Message{message.NewMessage(watermill.NewUUID(), body)}, nil
	})
	// notify: tells the customer; returning nil acks the shipment.
	router.AddConsumerHandler("notify", shipments, notifications, func(msg *message.Message) error {
		var s Shipment
		if err := json.Unmarshal(msg.Payload, &s); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		notify = append(notify, fmt.Sprintf("  notify: order %d is on its way (parcel %s)", s.OrderID, s.Parcel))
		if len(notify) == 3 {
			close(done)
		}
		return nil
	})

	runErr := make(chan error, 1)
	go func() { runErr <- router.Run(ctx) }()
	// Running is closed once every handler has subscribed, so what is
	// published from now on reaches the handlers' consumer groups.
	select {
	case <-router.Running():
	case err := <-runErr:
		return fmt.Errorf("router: %w", err)
	}

	var msgs []*message.Message
	for id := 1; id <= 3; id++ {
		body, _ := json.Marshal(Order{ID: id})
		msgs = append(msgs, message.NewMessage(watermill.NewUUID(), body))
	}
	if err := pub.Publish(orders, msgs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "published orders 1, 2 and 3 to topic %s\n", topicName(orders))

	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the notifications: %w", ctx.Err())
	}
	if err := router.Close(); err != nil {
		return err
	}
	if err := <-runErr; err != nil {
		return err
	}

	// The handlers ran concurrently; print what each did in order.
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(ship)
	sort.Strings(notify)
	fmt.Fprintln(out, strings.Join(ship, "\n"))
	fmt.Fprintln(out, strings.Join(notify, "\n"))
	fmt.Fprintln(out, "router stopped")
	return nil
}

// topicName prints a topic without its random suffix, so that the story
// reads the same on every broker.
func topicName(t string) string {
	if i := strings.IndexByte(t, '-'); i > 0 {
		return t[:i] + "-<random>"
	}
	return t
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
