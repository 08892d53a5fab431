package redis

import (
	"context"
	"slices"
	"time"

	"github.com/fila-go/fila/backend"
)

var (
	_ backend.Marker     = (*Driver)(nil)
	_ backend.MarkLister = (*Driver)(nil)
)

// A queue's marks are one sorted set, {<prefix>:<queue>}:marks (in the
// queue's slot), with the mark name as member and its expiry as score (Unix
// ms, +inf for none). A mark is live while the Redis server's clock (TIME
// inside the script) is before its expiry: every client compares against the
// same clock, so they agree on what expired; a client whose clock is off
// shifts the expiries it sets by that much. Expired members are removed by
// MarkSet and MarkList as they pass, and the whole key expires (PEXPIREAT)
// with its latest mark when no mark is permanent, so abandoned marks do not
// hold memory. Each script touches that one key.

// The mark scripts start with lua/mark_prelude.lua (KM, the marks key, and
// live).
var (
	// scriptMarkSet stores a mark: lua/mark_set.lua.
	scriptMarkSet = script("mark_prelude.lua", "mark_set.lua")
	// scriptMarkGet reports a live mark: lua/mark_get.lua.
	scriptMarkGet = script("mark_prelude.lua", "mark_get.lua")
	// scriptMarkList lists live marks: lua/mark_list.lua.
	scriptMarkList = script("mark_prelude.lua", "mark_list.lua")
)

// MarkSet stores mark name of queue expiring at until (the zero time: never),
// in one script: with onlyNew it stores nothing and returns false while a
// live mark of that name exists, so of concurrent callers exactly one wins.
// until is compared with the Redis server's clock. Options.WaitReplicas does
// not apply: a failover can lose a mark set just before it.
func (d *Driver) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	u := int64(-1)
	if !until.IsZero() {
		u = max(until.UnixMilli(), 0)
	}
	only := 0
	if onlyNew {
		only = 1
	}
	n, err := runOnce(ctx, d.c, scriptMarkSet, []string{d.keys(queue).marks}, name, u, only).Int64()
	if err != nil {
		return false, d.fail(ctx, err)
	}
	return n == 1, nil
}

// MarkGet reports whether a live mark of that name exists, by the Redis
// server's clock.
func (d *Driver) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	n, err := scriptMarkGet.Run(ctx, d.c, []string{d.keys(queue).marks}, name).Int64()
	if err != nil {
		return false, d.fail(ctx, err)
	}
	return n == 1, nil
}

// MarkDelete deletes the mark (ZREM); a missing one is not an error.
func (d *Driver) MarkDelete(ctx context.Context, queue, name string) error {
	return d.fail(ctx, d.c.ZRem(ctx, d.keys(queue).marks, name).Err())
}

// MarkList returns the names of queue's live marks that start with prefix,
// sorted bytewise, removing the expired ones it passes. It reads the whole
// set: cost grows with the queue's live marks.
func (d *Driver) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	names, err := scriptMarkList.Run(ctx, d.c, []string{d.keys(queue).marks}, prefix).StringSlice()
	if err != nil {
		return nil, d.fail(ctx, err)
	}
	slices.Sort(names)
	return names, nil
}
