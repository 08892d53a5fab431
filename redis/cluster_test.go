package redis_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/redis"
)

// TestConformanceCluster runs the contract suite against the Redis Cluster
// named by FILA_TEST_REDIS_CLUSTER_URL (scripts/clusters starts one): every
// script must touch one slot (a CROSSSLOT error would fail it). Every
// enqueue waits for one replica (fila_wait_replicas=1), as a deployment
// that must not lose a message in a failover would, for up to 15s: the
// largest batch the limits allow (64 MiB) takes seconds to reach a replica
// on a small, loaded machine.
func TestConformanceCluster(t *testing.T) {
	raw := testenv.RedisClusterURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("fila_mode")
	cu := *u
	cu.RawQuery = q.Encode()
	opt, err := goredis.ParseClusterURL(cu.String())
	if err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClusterClient(opt)
	t.Cleanup(func() { admin.Close() })
	prefix := testPrefix(t, nil)
	t.Cleanup(func() { deleteClusterKeys(t, admin, prefix) })
	durl := driverURL(t, raw, map[string]string{"fila_prefix": prefix, "fila_wait_replicas": "1", "fila_wait_timeout": "15s"})
	conformance.Run(t, harness(conformance.Harness{
		Open: func(ctx context.Context) (backend.Driver, error) {
			u, err := url.Parse(durl)
			if err != nil {
				return nil, err
			}
			return redis.Open(ctx, u, backend.OpenOptions{})
		},
	}))
}

func deleteClusterKeys(t *testing.T, c *goredis.ClusterClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
		iter := n.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			n.Del(ctx, iter.Val())
		}
		return iter.Err()
	})
	if err != nil {
		t.Logf("cleanup: %v", err)
	}
}
