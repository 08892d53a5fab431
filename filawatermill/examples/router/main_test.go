package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The story ends the same on every real broker, PostgreSQL in both of its
// modes.
func TestStoryOnBrokers(t *testing.T) {
	for _, b := range testenv.Targets() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			u := b.URL(t)
			var out bytes.Buffer
			if err := run(u, &out, io.Discard); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			want := "broker " + fila.Redact(u) + `
published orders 1, 2 and 3 to topic orders-<random>
  ship: order 1, attempt 1: shipped
  ship: order 2, attempt 1: failed (warehouse busy), nacked
  ship: order 2, attempt 2: shipped
  ship: order 3, attempt 1: shipped
  notify: order 1 is on its way (parcel P-001)
  notify: order 2 is on its way (parcel P-002)
  notify: order 3 is on its way (parcel P-003)
router stopped
`
			if got := out.String(); got != want {
				t.Errorf("output:\n%s\nwant:\n%s", got, want)
			}
			if strings.Contains(out.String(), "unsubscribing") {
				t.Errorf("a subscription was not ended:\n%s", out.String())
			}
		})
	}
}
