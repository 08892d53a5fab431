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

// markPrelude reads the script's key and arguments helpers.
const markPrelude = `
local KM = KEYS[1]
-- live reports whether score s (a ZSCORE reply, nil when absent) is after
-- now.
local function live(s, now)
  if not s then return false end
  if s == 'inf' or s == '+inf' then return true end
  return tonumber(s) > now
end
`

// scriptMarkSet: KEYS marks; ARGV name, until (Unix ms, -1 for none),
// onlyNew (1 or 0). Returns 1 when it stored the mark, 0 when onlyNew found
// a live one. A mark whose expiry has passed is removed rather than stored:
// it would not exist anyway.
var scriptMarkSet = script(markPrelude + `
local name, untilms, only = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local now = now_ms()
if only and live(redis.call('ZSCORE', KM, name), now) then return 0 end
redis.call('ZREMRANGEBYSCORE', KM, '-inf', now)
if untilms >= 0 and untilms <= now then
  redis.call('ZREM', KM, name)
  return 1
end
if untilms < 0 then
  redis.call('ZADD', KM, '+inf', name)
else
  redis.call('ZADD', KM, untilms, name)
end
local top = redis.call('ZRANGE', KM, -1, -1, 'WITHSCORES')
if top[2] == 'inf' or top[2] == '+inf' then
  redis.call('PERSIST', KM)
else
  redis.call('PEXPIREAT', KM, math.floor(tonumber(top[2])) + 1)
end
return 1
`)

// scriptMarkGet: KEYS marks; ARGV name. Returns 1 for a live mark, else 0.
var scriptMarkGet = script(markPrelude + `
if live(redis.call('ZSCORE', KM, ARGV[1]), now_ms()) then return 1 end
return 0
`)

// scriptMarkList: KEYS marks; ARGV prefix. Removes the expired marks and
// returns the live ones that start with prefix, unsorted. (ZRANGEBYLEX only
// orders members of equal score, which marks do not have.)
var scriptMarkList = script(markPrelude + `
redis.call('ZREMRANGEBYSCORE', KM, '-inf', now_ms())
local p = ARGV[1]
local out = {}
for _, m in ipairs(redis.call('ZRANGE', KM, 0, -1)) do
  if string.sub(m, 1, #p) == p then out[#out + 1] = m end
end
return out
`)

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
