package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/fila-go/fila/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The story must read the same on every broker.
func TestStory(t *testing.T) {
	urls := map[string]func(testing.TB) string{
		"memory":   func(testing.TB) string { return "mem://quickstart-test" },
		"postgres": func(tb testing.TB) string { return testenv.PostgresURL(tb) + "&fila_migrate=true" },
		"redis":    testenv.RedisURL,
		"rabbitmq": testenv.RabbitMQURL,
		"mysql": func(tb testing.TB) string {
			return testenv.WithParams(tb, testenv.MySQLURL(tb), "fila_migrate", "true")
		},
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := story(&out, url(t)); err != nil {
				t.Fatalf("story: %v\n%s", err, out.String())
			}
			for _, want := range []string{
				"user 1: sent on attempt 1, ack",
				"user 2: smtp timeout on attempt 1, retry in 200ms",
				"user 2: sent on attempt 2, ack",
				"user 3: user-3@: invalid address, dead-letter",
				`dead letter: email.welcome {"user_id":3} after 1 attempt(s): user-3@: invalid address`,
			} {
				if !strings.Contains(out.String(), want+"\n") {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if !regexp.MustCompile(`(?m)^deleted queue quickstart-[0-9a-f]{8}$`).MatchString(out.String()) {
				t.Errorf("the demo queue was not deleted:\n%s", out.String())
			}
		})
	}
}
