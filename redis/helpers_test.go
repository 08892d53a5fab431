package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/redis"
)

// testPrefix returns a fresh key prefix and, when c is not nil, deletes every
// key under it when the test ends.
func testPrefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "filatest-" + hex.EncodeToString(b)
	if c == nil {
		return prefix
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var cursor uint64
		for {
			ks, next, err := c.Scan(ctx, cursor, "{"+prefix+":*", 1000).Result()
			if err != nil {
				t.Logf("cleanup scan: %v", err)
				return
			}
			if len(ks) > 0 {
				c.Del(ctx, ks...)
			}
			if cursor = next; cursor == 0 {
				return
			}
		}
	})
	return prefix
}

// rawClient returns a go-redis client for the test server, closed at the end.
func rawClient(t testing.TB) (*goredis.Client, string) {
	t.Helper()
	raw := testenv.RedisURL(t)
	opt, err := goredis.ParseURL(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c, raw
}

// driverURL returns the test server's URL with extra query parameters.
func driverURL(t testing.TB, raw string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// env is one test's Redis setup: a raw client and a key prefix.
type env struct {
	raw    *goredis.Client
	url    string
	prefix string
	// fast makes the env's drivers use the fast receive path for every
	// Receive (see bothPaths).
	fast bool
}

// bothPaths runs test twice: with Receive's script path for small batches
// (the default) and with the fast path (MULTI with a native XREADGROUP)
// forced for every Receive.
func bothPaths(t *testing.T, test func(t *testing.T, e *env)) {
	t.Run("script", func(t *testing.T) { test(t, newEnv(t)) })
	t.Run("fast", func(t *testing.T) {
		e := newEnv(t)
		e.fast = true
		test(t, e)
	})
}

func newEnv(t testing.TB) *env {
	c, raw := rawClient(t)
	return &env{raw: c, url: raw, prefix: testPrefix(t, c)}
}

// driver returns a driver with its own client, closed at the end.
func (e *env) driver(t testing.TB, o redis.Options) *redis.Driver {
	t.Helper()
	opt, err := goredis.ParseURL(e.url)
	if err != nil {
		t.Fatal(err)
	}
	o.Prefix = e.prefix
	o.CloseClient = true
	if e.fast {
		redis.ForceFastPath(&o)
	}
	d, err := redis.New(goredis.NewClient(opt), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// client returns a fila client over a fresh driver, closed at the end.
func (e *env) client(t testing.TB, o redis.Options) *fila.Client {
	t.Helper()
	c, err := fila.New(e.driver(t, o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
