package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/postgres"
)

// TestListenThroughPoolerRefused: with LISTEN on (the default), opening
// through PgBouncer in transaction mode fails with ErrInvalid naming the
// fix, instead of a driver whose receivers would never hear a notification;
// with fila_listen=false the same URL opens.
func TestListenThroughPoolerRefused(t *testing.T) {
	bouncer := testenv.PgBouncerURL(t)
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	u, err := url.Parse(withParams(t, bouncer, map[string]string{"fila_schema": schema}))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("fila_listen")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	d, err := postgres.Open(ctx, u, backend.OpenOptions{})
	if err == nil {
		_ = d.Close()
		t.Fatalf("Open through a transaction pooler with LISTEN on succeeded; want ErrInvalid")
	}
	if !errors.Is(err, fila.ErrInvalid) || !strings.Contains(err.Error(), "fila_listen=false") {
		t.Errorf("Open through a transaction pooler with LISTEN on: %v; want ErrInvalid naming fila_listen=false", err)
	}
	t.Logf("refused after %v: %v", time.Since(start), err)
	q.Set("fila_listen", "false")
	u.RawQuery = q.Encode()
	d, err = postgres.Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open through the pooler with fila_listen=false: %v", err)
	}
	_ = d.Close()
}

// TestLogPublishThroughPooler: the log mode's publish by COPY (BEGIN and
// its head in one pipeline, then the COPY with its COMMIT in one simple
// query) works through PgBouncer in transaction mode, beside the publish
// statement, from two clients at once: every event reaches both
// subscriptions once.
func TestLogPublishThroughPooler(t *testing.T) {
	bouncer := testenv.PgBouncerURL(t)
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	u, err := url.Parse(withParams(t, bouncer, map[string]string{"fila_schema": schema, "fila_mode": "log",
		"fila_listen": "false", "fila_poll_interval": "100ms", "pool_max_conns": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var clients []*fila.Client
	for range 2 {
		d, err := postgres.Open(ctx, u, backend.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := fila.New(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	subs := []string{"pooled.a", "pooled.b"}
	for _, q := range subs {
		if err := clients[0].TopicSubscribe(ctx, "pooled", q); err != nil {
			t.Fatal(err)
		}
	}
	ids := make(chan []string, 8)
	errs := make(chan error, 8)
	for i, c := range clients {
		go func() {
			for j := 0; j < 4; j++ {
				n := 40
				if j%2 == 1 {
					n = 3 // under copyMin: the publish statement
				}
				msgs := make([]fila.Message, n)
				for k := range msgs {
					msgs[k] = fila.Message{Kind: "k", Body: []byte(fmt.Sprintf("%d/%d/%d", i, j, k))}
				}
				r, err := c.PublishBatch(ctx, "pooled", msgs)
				if err == nil && r.Subscriptions != len(subs) {
					err = fmt.Errorf("a publish reached %d subscriptions, want %d", r.Subscriptions, len(subs))
				}
				errs <- err
				ids <- r.IDs
			}
		}()
	}
	var want []string
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		want = append(want, <-ids...)
	}
	for _, c := range clients {
		if n := postgres.CopyPublishes(c.Driver().(*postgres.Driver)); n != 2 {
			t.Errorf("a client wrote %d publishes by COPY, want 2", n)
		}
	}
	for _, q := range subs {
		got := receiveAll(t, clients[1], q, len(want), 30*time.Second)
		if len(got) != len(want) {
			t.Errorf("%s received %d events, want %d", q, len(got), len(want))
		}
		for _, id := range want {
			if got[fila.CopyID(id, q)] == nil {
				t.Errorf("%s lacks the event %s", q, id)
			}
		}
	}
}
