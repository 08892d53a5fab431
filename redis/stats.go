package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// QueueStats counts a queue in one script: ready = stream entries never
// delivered (stream length minus the group's pending count) plus due delayed
// messages plus deliveries whose lease expired; delayed and leased from the
// two sorted sets; dead from the dead-letter stream, per kind from a counter
// hash kept by the scripts. The oldest ready time is the earliest of the first
// undelivered entry's id time (its enqueue or promotion time), the first due
// run-at and the first expired deadline. A subscription queue also counts
// as ready the events of its topics' logs it has not copied yet (its lag),
// the oldest of them in the oldest ready time (for a subscription with kind
// patterns, only those they take: see topicLag).
//
// ReadyByPriority counts the ready entries of each level's stream, and
// reads the level of each due delayed message (one record each): it is nil
// when more than 1,000 of those are due at once, or a subscription has
// topic events it has not copied yet (their levels are not read).
func (d *Driver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	k := d.keys(queue)
	v, err := scriptStats.Run(ctx, d.c, k.list(), group).Slice()
	if err != nil {
		return backend.Stats{}, d.fail(ctx, err)
	}
	var topics, pats *goredis.MapStringStringCmd
	if _, err := d.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		topics = p.HGetAll(ctx, k.topics)
		pats = p.HGetAll(ctx, k.tpats)
		return nil
	}); err != nil {
		return backend.Stats{}, d.fail(ctx, err)
	}
	if len(v) != 7 {
		return backend.Stats{}, fmt.Errorf("fila/redis: stats script returned %d values", len(v))
	}
	s := backend.Stats{Ready: toInt(v[0]), Delayed: toInt(v[1]), Leased: toInt(v[2]), Dead: toInt(v[3])}
	if ms := toInt(v[4]); ms >= 0 {
		s.OldestReadyAt = msTime(ms)
	}
	if lv, _ := v[6].([]any); len(lv) == backend.MaxPriority+1 {
		s.ReadyByPriority = make([]int64, len(lv))
		for i, n := range lv {
			s.ReadyByPriority[i] = toInt(n)
		}
	}
	if len(topics.Val()) > 0 {
		n, oldest, err := d.topicLag(ctx, topics.Val(), pats.Val())
		if err != nil {
			return backend.Stats{}, err
		}
		if n > 0 {
			// The events a subscription has not copied yet have levels
			// the lag does not read.
			s.ReadyByPriority = nil
		}
		s.Ready += n
		if oldest >= 0 && (s.OldestReadyAt.IsZero() || msTime(oldest).Before(s.OldestReadyAt)) {
			s.OldestReadyAt = msTime(oldest)
		}
	}
	s.DeadByKind = map[string]int64{}
	kinds, _ := v[5].([]any)
	for i := 0; i+1 < len(kinds); i += 2 {
		if n := toInt(kinds[i+1]); n > 0 {
			s.DeadByKind[str(kinds[i])] = n
		}
	}
	return s, nil
}
