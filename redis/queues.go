package redis

import (
	"context"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

var (
	_ backend.QueueLister  = (*Driver)(nil)
	_ backend.QueueDeleter = (*Driver)(nil)
)

// QueueList scans the keyspace (every master of a cluster) for the queues
// under the driver's prefix that have a stream (of any level), delayed messages, early
// leases, dead letters or subscriptions. A queue whose messages were all acked keeps its
// empty stream, and its consumer group, so it stays listed until
// QueueDelete.
func (d *Driver) QueueList(ctx context.Context) ([]string, error) {
	pattern := "{" + globEscape(d.o.Prefix) + ":*}:*"
	head := "{" + d.o.Prefix + ":"
	var mu sync.Mutex
	seen := map[string]bool{}
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			k := strings.TrimPrefix(iter.Val(), head)
			i := strings.LastIndex(k, "}:")
			if i < 0 || k == iter.Val() {
				continue
			}
			if strings.ContainsAny(k[:i], ":{}") {
				continue // a key of a longer prefix ("<prefix>:…")
			}
			switch k[i+2:] {
			case "stream", "stream:1", "stream:2", "stream:3", "delayed", "leases", "dead", "topics":
				mu.Lock()
				seen[k[:i]] = true
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	if cc, ok := d.c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, d.c)
	}
	if err != nil {
		return nil, d.fail(ctx, err)
	}
	names := make([]string, 0, len(seen))
	for q := range seen {
		names = append(names, q)
	}
	slices.Sort(names)
	return names, nil
}

// QueueDelete deletes every key of the queue with one DEL (they share a
// slot): its streams (one per level in use) and consumer groups, leases, delayed messages, dedup
// keys, dead letters and marks. Its subscriptions stay, their cursors moved
// to the end of their topics' logs: it does not copy what was published
// before. A delivery leased from it is then not pending
// anywhere, so settling it returns ErrLeaseLost; the next Enqueue or
// Receive creates the keys again.
func (d *Driver) QueueDelete(ctx context.Context, queue string) error {
	k := d.keys(queue)
	if err := d.skipTopics(ctx, queue, k); err != nil {
		return err
	}
	if err := d.c.Del(ctx, k.all()...).Err(); err != nil {
		return d.fail(ctx, err)
	}
	d.mu.Lock()
	delete(d.hint, queue)
	delete(d.levels, queue)
	d.mu.Unlock()
	return nil
}

// globEscape escapes the characters SCAN's MATCH pattern treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
