package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/fila-go/fila/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The story ends the same on the real brokers, and deletes its queue.
func TestStoryOnBrokers(t *testing.T) {
	for name, url := range map[string]func(testing.TB) string{
		"postgres": func(tb testing.TB) string { return testenv.PostgresURL(tb) + "&fila_migrate=true" },
		"redis":    testenv.RedisURL,
		"rabbitmq": testenv.RabbitMQURL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := run(url(t), &out, io.Discard); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, want := range []string{
				"4 done, 1 dead-lettered; the worker stopped\n",
				`dead letter: report.build {"report_id":11} after 1 attempt(s): report 11 does not exist` + "\n",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "deleting queue") {
				t.Errorf("the queue was not deleted:\n%s", out.String())
			}
		})
	}
}
