package main

import (
	"bytes"
	"io"
	"regexp"
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
		"mysql": func(tb testing.TB) string {
			return testenv.WithParams(tb, testenv.MySQLURL(tb), "fila_migrate", "true")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := run(url(t), &out, io.Discard); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if want := "4 done, 1 dead-lettered; the worker stopped\n"; !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
			// RabbitMQ before 4.3 counts a message pushed to the worker
			// beyond what it asked for and given back as a delivery (see
			// the rabbitmq package's caveats), so there the dead letter
			// may show more than one attempt.
			attempts := `1`
			if name == "rabbitmq" {
				attempts = `[1-9][0-9]*`
			}
			dead := regexp.MustCompile(`(?m)^dead letter: report\.build \{"report_id":11\} after ` + attempts + ` attempt\(s\): report 11 does not exist$`)
			if !dead.MatchString(out.String()) {
				t.Errorf("output lacks the dead letter of report 11 after %s attempt(s):\n%s", attempts, out.String())
			}
			if strings.Contains(out.String(), "deleting queue") {
				t.Errorf("the queue was not deleted:\n%s", out.String())
			}
		})
	}
}
