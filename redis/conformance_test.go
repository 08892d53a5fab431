package redis_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
	"github.com/fila-go/fila/redis"
)

// TestConformance runs the shared contract suite against the real Redis
// server, each test queue under a fresh key prefix removed afterwards.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	raw := driverURL(t, e.url, map[string]string{"fila_prefix": e.prefix, "pool_size": "8"})
	conformance.Run(t, harness(conformance.Harness{
		Open: func(ctx context.Context) (backend.Driver, error) {
			u, err := url.Parse(raw)
			if err != nil {
				return nil, err
			}
			return redis.Open(ctx, u, backend.OpenOptions{})
		},
	}))
}

// TestConformanceFastPath runs the suite with Receive's fast path (MULTI
// with a native XREADGROUP, see fastrecv.go) forced for every Receive; by
// default it only serves batches.
func TestConformanceFastPath(t *testing.T) {
	e := newEnv(t)
	e.fast = true
	raw := driverURL(t, e.url, map[string]string{"pool_size": "8"})
	conformance.Run(t, harness(conformance.Harness{
		Open: func(ctx context.Context) (backend.Driver, error) {
			opt, err := goredis.ParseURL(raw)
			if err != nil {
				return nil, err
			}
			o := redis.Options{Prefix: e.prefix, CloseClient: true}
			redis.ForceFastPath(&o)
			return redis.New(goredis.NewClient(opt), o)
		},
	}))
}

// harness completes h with what every Redis conformance run declares.
func harness(h conformance.Harness) conformance.Harness {
	h.Missing = map[conformance.Feature]string{
		conformance.FeatureTxEnqueue: "Redis has no transaction a caller can share with the queue (MULTI cannot hold a script's reads)",
	}
	h.WakeupBound = time.Second
	h.RedeliveryBound = 2 * time.Second
	return h
}
