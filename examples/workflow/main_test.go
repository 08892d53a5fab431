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

// The story ends the same on the real brokers, and deletes what it made.
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
			var out bytes.Buffer
			if err := run(url(t), &out, io.Discard); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			s := out.String()
			if !regexp.MustCompile(`(?m)^workflow album-[0-9a-f]{8}: 200 thumbnails, then the album$`).MatchString(s) {
				t.Errorf("no workflow line with a random suffix:\n%s", s)
			}
			for _, want := range []string{
				"album 2026: 200 thumbnails, thumb-001.jpg to thumb-200.jpg\n",
				"steps: 201 done, 0 pending, 0 ready, 0 running, 0 dead; done: true\n",
			} {
				if !strings.Contains(s, want) {
					t.Errorf("output lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(s, "deleting") {
				t.Errorf("the workflow or the queue was not deleted:\n%s", s)
			}
		})
	}
}
