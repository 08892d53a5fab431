package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
)

// deadBench opens a memory broker holding n dead letters of 1 MiB in queue
// "big", and a dashboard over it.
func deadBench(b *testing.B, n int) (*ui.Handler, []string) {
	c, err := fila.Open(context.Background(), "mem://"+unique("uibench"), fila.WithMaxBodyBytes(2<<20))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	body := bytes.Repeat([]byte("x"), 1<<20)
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "big", Body: body}
	}
	ids := kill(b, c, "big", "boom", msgs...)
	h, err := ui.New(c, ui.Options{Refresh: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h, ids
}

// benchPage serves path b.N times.
func benchPage(b *testing.B, h *ui.Handler, path string) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(fmt.Sprintf("status %d", w.Code))
		}
	}
}

// BenchmarkDeadListPage serves the dead-letter list of 50 letters whose
// bodies are 1 MiB, which it does not show (issue 35).
func BenchmarkDeadListPage(b *testing.B) {
	h, _ := deadBench(b, 50)
	benchPage(b, h, "/queues/big/dead")
}

// BenchmarkDeadLetterPage serves the page of one dead letter among 32 whose
// bodies are 1 MiB (issue 35: memory per view grew with the bodies of the
// letters around it). B/op is what one view allocates.
func BenchmarkDeadLetterPage(b *testing.B) {
	h, ids := deadBench(b, 32)
	benchPage(b, h, "/queues/big/dead/"+ids[len(ids)/2])
}
