package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The story ends the same on the real brokers, and ends its subscriptions.
func TestStoryOnBrokers(t *testing.T) {
	for name, url := range map[string]func(testing.TB) string{
		"postgres": func(tb testing.TB) string { return testenv.PostgresURL(tb) + "&fila_migrate=true" },
		"redis":    testenv.RedisURL,
		"rabbitmq": testenv.RabbitMQURL,
		"mongo":    testenv.MongoURL,
		"mysql": func(tb testing.TB) string {
			return testenv.WithParams(tb, testenv.MySQLURL(tb), "fila_migrate", "true")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			u := url(t)
			var out bytes.Buffer
			if err := run(u, &out, io.Discard); errors.Is(err, fila.ErrUnsupported) {
				t.Skipf("the driver has no topics yet: %v", err)
			} else if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			s := out.String()
			m := regexp.MustCompile(`(?m)^topic (orders-[0-9a-f]{8}): subscriptions orders-[0-9a-f]{8}\.email and orders-[0-9a-f]{8}\.audit$`).FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("no topic line with a random suffix:\n%s", s)
			}
			// RabbitMQ knows only that at least one subscription got a copy.
			copied := "copied to 2 subscriptions"
			if name == "rabbitmq" {
				copied = "copied to at least one subscription"
			}
			audit := regexp.QuoteMeta("  audit: order 2, attempt 1: retry (audit log busy)\n  audit: order 2, attempt 2: ack\n  audit: order 3, attempt 1: ack\n")
			if name == "rabbitmq" {
				// RabbitMQ before 4.3 counts a message given back unused as
				// a delivery (see package rabbitmq): the Retry of order 2
				// cancels the audit consumer when no Receive waits, and
				// what was on its way to it goes back, one attempt more.
				audit = `  audit: order 2, attempt 1: retry \(audit log busy\)\n  audit: order 2, attempt [2-9]: ack\n  audit: order 3, attempt [1-9]: ack\n`
			}
			for _, want := range []string{
				regexp.QuoteMeta("published order 2: " + copied),
				audit,
				regexp.QuoteMeta("  email: order 1, attempt 1: ack\n  email: order 2, attempt 1: ack\n  email: order 3, attempt 1: ack\n"),
				regexp.QuoteMeta("each worker processed its own copy of every order; both stopped\n"),
			} {
				if !regexp.MustCompile(want).MatchString(s) {
					t.Errorf("output lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(s, "unsubscribing") {
				t.Errorf("a subscription was not ended:\n%s", s)
			}
			// Ending the subscriptions deleted their queues.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := fila.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, q := range []string{m[1] + ".email", m[1] + ".audit"} {
				if st, err := c.QueueStats(ctx, q); err != nil || st.Ready+st.Leased+st.Dead != 0 {
					t.Errorf("queue %s after the run: %+v, %v; want it deleted", q, st, err)
				}
			}
			if subs, err := c.TopicSubscriptions(ctx, m[1]); err == nil && len(subs) != 0 {
				t.Errorf("topic %s still has subscriptions %v", m[1], subs)
			}
		})
	}
}
