package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The program tells the same story on every real broker.
func TestOnBrokers(t *testing.T) {
	for _, b := range testenv.Targets() {
		name, url := b.Name, b.URL
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, url(t), &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			want := `sent 3 greetings
received "hello Ada" seq=1 lang=en attempt 1
received "hello Grace" seq=2 lang=en attempt 1
received "hello Linus" seq=3 lang=en attempt 1
acked all and ended the subscription
`
			got := out.String()
			if name == "rabbitmq" {
				// A message the driver was pushed and gave back unused
				// counts an attempt on RabbitMQ before 4.3 (see package
				// rabbitmq), so a first delivery may say attempt 2.
				got = regexp.MustCompile(`attempt [0-9]+`).ReplaceAllString(got, "attempt 1")
			}
			if got != want {
				t.Errorf("output:\n%s\nwant:\n%s", got, strings.TrimSpace(want))
			}
		})
	}
}
