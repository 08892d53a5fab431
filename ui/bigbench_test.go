package ui_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/ui"
)

// BenchmarkBigQueue serves every page of a queue holding 10,000 dead
// letters, one of them with a 1 MiB body, and a ready message of 1 MiB
// (issue 35: every page under 300 ms, the process under 100 MB). Per
// broker and page, ns/op is one view; "MB-go" is the memory the Go
// runtime had mapped at the end (the process's size, minus its binary and
// C libraries) after a forced GC, and "MB-peak" the most it reached during
// the page's run, both including the memory broker's own data on memory.
// The letters are written with the driver's DeadImport, as fila migrate
// does.
func BenchmarkBigQueue(b *testing.B) {
	for _, br := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"memory", func(testing.TB) string { return "mem://" + unique("uibig") }},
		{"postgres", func(tb testing.TB) string { return withParam(testenv.PostgresURL(tb), "fila_migrate", "true") }},
		{"mysql", func(tb testing.TB) string { return withParam(testenv.MySQLURL(tb), "fila_migrate", "true") }},
		{"redis", testenv.RedisURL},
		{"mongo", testenv.MongoURL},
		{"rabbitmq", testenv.RabbitMQURL},
	} {
		b.Run(br.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			c, oerr := fila.Open(ctx, br.url(b), fila.WithMaxBodyBytes(2<<20))
			cancel()
			if oerr != nil {
				b.Fatal(oerr)
			}
			b.Cleanup(func() { c.Close() })
			q := newQueue(b, c, "uibig")
			bigLetter, bigMsg := fillBig(b, c, q)
			// RabbitMQ cannot list its queues: name it.
			h, err := ui.New(c, ui.Options{Refresh: -1, Queues: []string{q}, Logger: testenv.NewLogRecorder().Logger()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { h.Close() })
			pages := []struct{ name, path string }{
				{"overview", "/"},
				{"queue", "/queues/" + q},
				{"dead", "/queues/" + q + "/dead"},
				{"dead-kind", "/queues/" + q + "/dead?kind=small"},
				{"letter-1MiB", "/queues/" + q + "/dead/" + bigLetter},
				{"letter-body-1MiB", "/queues/" + q + "/dead/" + bigLetter + "/body"},
				{"messages", "/queues/" + q + "/messages?state=ready"},
				{"message-1MiB", "/queues/" + q + "/messages/" + bigMsg},
			}
			for _, p := range pages {
				b.Run(p.name, func(b *testing.B) {
					serve1(b, h, p.path) // warm: templates, pools
					peak := watchMemory()
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						serve1(b, h, p.path)
					}
					b.StopTimer()
					b.ReportMetric(float64(peak())/1e6, "MB-peak")
					runtime.GC()
					b.ReportMetric(float64(goMapped())/1e6, "MB-go")
				})
			}
			// Ten viewers of the 1 MiB letter at once.
			b.Run("letter-1MiB-x10", func(b *testing.B) {
				peak := watchMemory()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					var wg sync.WaitGroup
					for range 10 {
						wg.Add(1)
						go func() { defer wg.Done(); serve1(b, h, "/queues/"+q+"/dead/"+bigLetter) }()
					}
					wg.Wait()
				}
				b.StopTimer()
				b.ReportMetric(float64(peak())/1e6, "MB-peak")
			})
		})
	}
}

// fillBig stores 10,000 dead letters in queue, the 5,000th with a 1 MiB
// body, and one ready message of 1 MiB; it returns their ids.
func fillBig(b *testing.B, c *fila.Client, queue string) (bigLetter, bigMsg string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	di, ok := c.Driver().(backend.DeadImporter)
	if !ok {
		b.Skip("the driver cannot import dead letters")
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	now := time.Now().Add(-time.Hour)
	const n, batch = 10_000, 500
	for i := 0; i < n; i += batch {
		letters := make([]backend.DeadLetter, batch)
		for j := range letters {
			k := i + j
			l := backend.DeadLetter{Message: backend.Message{ID: uuid4(), Kind: "small", Body: []byte(fmt.Sprintf(`{"n":%d}`, k)),
				EnqueuedAt: now.Add(time.Duration(k) * time.Millisecond)}, Queue: queue, Attempts: 3,
				Reason: "upstream answered 503\n\ngoroutine 1 [running]:\nmain.call()", DeadAt: now.Add(time.Duration(k) * time.Millisecond)}
			if k == n/2 {
				l.Kind, l.Body, bigLetter = "big", big, l.ID
			}
			letters[j] = l
		}
		if err := di.DeadImport(ctx, queue, letters); err != nil {
			b.Fatal(err)
		}
	}
	id, err := c.Enqueue(ctx, queue, fila.Message{Kind: "big", Body: big})
	if err != nil {
		b.Fatalf("enqueue 1 MiB (the client's default body limit must allow it): %v", err)
	}
	return bigLetter, id
}

func uuid4() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

func serve1(b *testing.B, h http.Handler, path string) {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Errorf("GET %s: status %d", path, w.Code)
	}
}

// goMapped is the memory the Go runtime has mapped from the system.
func goMapped() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchMemory samples goMapped every 2ms until the returned function is
// called, which returns the largest value seen.
func watchMemory() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		top := goMapped()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- top
				return
			case <-t.C:
				top = max(top, goMapped())
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
