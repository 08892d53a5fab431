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

// BenchmarkDeadLetterPage serves the page of one dead letter among 32 whose
// bodies are 1 MiB (issue 35: memory per view grew with the bodies of the
// letters around it). B/op is what one view allocates.
func BenchmarkDeadLetterPage(b *testing.B) {
	c, err := fila.Open(context.Background(), "mem://"+unique("uibench"), fila.WithMaxBodyBytes(2<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := bytes.Repeat([]byte("x"), 1<<20)
	msgs := make([]fila.Message, 32)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "big", Body: body}
	}
	ids := kill(b, c, "big", "boom", msgs...)
	h, err := ui.New(c, ui.Options{Refresh: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	path := "/queues/big/dead/" + ids[len(ids)/2]
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
