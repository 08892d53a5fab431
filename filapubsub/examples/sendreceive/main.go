// Command sendreceive is a gocloud.dev/pubsub program on Fila: it opens a
// topic and a subscription by URL, sends three messages with metadata,
// receives and acks them, and ends the subscription. The broker comes from
// the -url flag or FILA_URL (a Fila URL, with or without the "fila+"
// prefix); the default is the in-memory broker:
//
//	go run ./examples/sendreceive
//	FILA_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable&fila_migrate=true' go run ./examples/sendreceive
//	FILA_URL=redis://127.0.0.1:6379/0 go run ./examples/sendreceive
//	FILA_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/sendreceive
//	FILA_URL=mongodb://127.0.0.1:27017/fila go run ./examples/sendreceive
//	FILA_URL='mysql://root@127.0.0.1:3306/test?fila_migrate=true' go run ./examples/sendreceive
//
// Run it from the filapubsub directory. On a real broker the topic and
// queue names end with a random suffix, so that runs side by side never
// share a subscription.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filapubsub" // registers fila+<scheme> URLs with gocloud
	_ "github.com/fila-go/fila/memory"   // the drivers this program can use
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"gocloud.dev/pubsub"
)

func main() {
	def := os.Getenv("FILA_URL")
	if def == "" {
		def = "fila+mem://"
	}
	broker := flag.String("url", def, "broker URL (default $FILA_URL, else fila+mem://)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, *broker, os.Stdout)
	// The URL opener keeps its Fila clients open for the topics and
	// subscriptions it opens; close them once those are shut down.
	_ = filapubsub.DefaultURLOpener().Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sendreceive:", err) // errors carry no credentials
		os.Exit(1)
	}
}

// run sends and receives on the broker at rawURL, writing what happens to
// out.
func run(ctx context.Context, rawURL string, out io.Writer) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return errors.New("the broker URL does not parse")
	}
	if !strings.HasPrefix(u.Scheme, "fila+") {
		u.Scheme = "fila+" + u.Scheme
	}
	topicName, queue := "greetings", "greetings.printer"
	if u.Scheme != "fila+mem" {
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix)
		topicName += "-" + hex.EncodeToString(suffix)
		queue = topicName + ".printer"
	}

	// The subscription first: opening it subscribes the queue to the
	// topic, and only what is published afterwards reaches it.
	sub, err := pubsub.OpenSubscription(ctx, withParams(u, "queue", queue, "topic", topicName, "lease", "30s"))
	if err != nil {
		return err
	}
	defer sub.Shutdown(ctx)
	topic, err := pubsub.OpenTopic(ctx, withParams(u, "topic", topicName))
	if err != nil {
		return err
	}
	defer topic.Shutdown(ctx)

	for i, name := range []string{"Ada", "Grace", "Linus"} {
		m := &pubsub.Message{
			Body:     []byte("hello " + name),
			Metadata: map[string]string{"lang": "en", "seq": fmt.Sprint(i + 1)},
		}
		if err := topic.Send(ctx, m); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "sent 3 greetings")

	var lines []string
	for range 3 {
		m, err := sub.Receive(ctx)
		if err != nil {
			return err
		}
		var d *fila.Delivery // the Fila delivery behind the message
		if !m.As(&d) {
			return errors.New("not a Fila message")
		}
		lines = append(lines, fmt.Sprintf("received %q seq=%s lang=%s attempt %d", m.Body, m.Metadata["seq"], m.Metadata["lang"], d.Attempt))
		m.Ack()
	}
	slices.Sort(lines) // competing receives promise no order
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}

	// End the subscription (this deletes its queue), through the Fila
	// client the URL opener shares.
	if err := sub.Shutdown(ctx); err != nil {
		return err
	}
	var c *fila.Client
	if !topic.As(&c) {
		return errors.New("no Fila client")
	}
	if err := c.TopicUnsubscribe(ctx, topicName, queue); err != nil {
		return err
	}
	fmt.Fprintln(out, "acked all and ended the subscription")
	return nil
}

// withParams returns u with query parameters added, as a string.
func withParams(u *url.URL, kv ...string) string {
	v := *u
	q := v.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	v.RawQuery = q.Encode()
	return v.String()
}
