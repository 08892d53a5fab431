package redis_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/redis"
)

// TestWaitReplicasRefusesUnreplicatedEnqueue: the shared test server has no
// replica, so an enqueue that must reach one fails, after fila_wait_timeout,
// with ErrUnavailable saying so (it may be stored: the caller's retry may
// duplicate it). Without the option the same enqueue succeeds.
func TestWaitReplicasRefusesUnreplicatedEnqueue(t *testing.T) {
	raw := testenv.RedisURL(t)
	prefix := testPrefix(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(params map[string]string) *fila.Client {
		u, err := url.Parse(driverURL(t, raw, params))
		if err != nil {
			t.Fatal(err)
		}
		d, err := redis.Open(ctx, u, backend.OpenOptions{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		c, err := fila.New(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	waiting := open(map[string]string{"fila_prefix": prefix, "fila_wait_replicas": "1", "fila_wait_timeout": "100ms"})
	for _, m := range []fila.Message{{Kind: "plain"}, {Kind: "scripted", Delay: time.Hour}} {
		start := time.Now()
		_, err := waiting.Enqueue(ctx, "replicas", m)
		if !errors.Is(err, fila.ErrUnavailable) {
			t.Errorf("Enqueue (%s) waiting for a replica that does not exist: %v; want ErrUnavailable", m.Kind, err)
		}
		if took := time.Since(start); took < 100*time.Millisecond {
			t.Errorf("Enqueue (%s) failed after %v, before fila_wait_timeout", m.Kind, took)
		}
	}
	plain := open(map[string]string{"fila_prefix": prefix})
	if _, err := plain.Enqueue(ctx, "replicas", fila.Message{Kind: "k"}); err != nil {
		t.Errorf("Enqueue without fila_wait_replicas: %v", err)
	}
	u, err := url.Parse(driverURL(t, raw, map[string]string{"fila_wait_replicas": "-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redis.Open(ctx, u, backend.OpenOptions{}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Open with fila_wait_replicas=-1: %v; want ErrInvalid", err)
	}
}
