package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// runDurable runs a script that stores messages (an enqueue, a dead-letter
// import, a publish) over keys ks, all of one slot. With
// Options.WaitReplicas it runs on the master of that slot in one pipeline
// with WAIT after it, so WAIT counts the replicas that acknowledged that
// connection's write; fewer than asked within Options.WaitTimeout makes the
// result an ErrUnavailable error: the write reached the master, but a
// failover could lose it. Without the option it is the script's plain Run.
func (d *Driver) runDurable(ctx context.Context, s *goredis.Script, ks []string, args ...any) *goredis.Cmd {
	if d.o.WaitReplicas == 0 {
		return runOnce(ctx, d.c, s, ks, args...)
	}
	var node *goredis.Client
	switch c := d.c.(type) {
	case *goredis.ClusterClient:
		n, err := c.MasterForKey(ctx, ks[0])
		if err != nil {
			return errCmd(ctx, err)
		}
		node = n
	case *goredis.Client: // a single server, or a failover (sentinel) client
		node = c
	default:
		return errCmd(ctx, backend.Invalidf("redis: WaitReplicas needs a *redis.Client or *redis.ClusterClient, not %T", d.c))
	}
	for try := 0; ; try++ {
		var ev, wait *goredis.Cmd
		_, _ = node.Pipelined(ctx, func(p goredis.Pipeliner) error {
			ev = s.EvalSha(ctx, p, ks, args...)
			wait = p.Do(ctx, "WAIT", d.o.WaitReplicas, d.o.WaitTimeout.Milliseconds())
			return nil
		})
		if err := ev.Err(); err != nil && try == 0 && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			if err := s.Load(ctx, node).Err(); err != nil {
				return errCmd(ctx, err)
			}
			continue
		}
		if err := ev.Err(); err != nil {
			if cc, ok := d.c.(*goredis.ClusterClient); ok && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
				// The slot moved (a failover): the next call finds its new
				// master. Retrying is safe: the script did not run here.
				cc.ReloadState(ctx)
				return errCmd(ctx, fmt.Errorf("fila/redis: %w: %w", backend.ErrUnavailable, err))
			}
			return ev
		}
		n, err := wait.Int()
		if err != nil {
			return errCmd(ctx, err)
		}
		if n < d.o.WaitReplicas {
			return errCmd(ctx, fmt.Errorf("fila/redis: %w: the write reached %d of %d replicas within %v: a failover of its master could lose it "+
				"(retrying may store it twice; lower fila_wait_replicas or check the replicas)", backend.ErrUnavailable, n, d.o.WaitReplicas, d.o.WaitTimeout))
		}
		return ev
	}
}

// errCmd returns a command that failed with err.
func errCmd(ctx context.Context, err error) *goredis.Cmd {
	c := goredis.NewCmd(ctx)
	if err == nil {
		err = errors.New("fila/redis: no result")
	}
	c.SetErr(err)
	return c
}
