package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// The fast receive path reads new entries with a native XREADGROUP inside a
// MULTI/EXEC transaction instead of inside the receive script: converting a
// batch of entries into Lua values and back was most of a receive's cost.
// The transaction is
//
//	EVALSHA pre   promote due delayed messages, sweep the pending list
//	EVAL mark     make sure the group exists, remember its last-delivered id
//	XREADGROUP    up to Max new entries for this consumer
//	EVAL post     record a lease for each entry just read
//
// and runs atomically, so an entry is never pending without a lease record,
// whatever happens to the caller. The post script finds the entries just
// read with XPENDING after the remembered id (it never sees their fields)
// and records "lazy" leases, the token alone: the attempt and message id are
// then taken from the entry when they are needed (takeover, Retry, Dead).
// When the queue holds dedup keys it reads the entries with XRANGE and
// records full leases, so Ack can free the keys. Mark and post are short and
// sent with EVAL, so they cannot fail with NOSCRIPT around the XREADGROUP
// (a pre script failing so only delays a promotion or a sweep). Post skips
// entries that already have a lease record (a group recreated after it was
// lost re-reads leased entries) and reports them, and the driver does not
// hand those out.
//
// The fast path takes over no expired lease (it cannot know, when the
// transaction is built, how many entries the takeover will return), so
// Receive uses it only while the earliest lease deadline the previous call
// saw is in the future; otherwise it runs the receive script, which takes
// over expired leases first.

// ARGV: group, consumer, promotion limit, sweep interval (ms), orphan idle
// (ms).
const luaReceivePre = `
local g, c = ARGV[1], ARGV[2]
local plimit, sweepEvery, orphanIdle = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
promote(g, now, plimit)
sweep(g, c, now, sweepEvery, orphanIdle)
return 1
`

// luaReceiveMark is standalone (no prelude) and sent with EVAL. ARGV: group.
// Creates the stream or the group when missing. Returns {now, last-delivered
// id, next due (ms or -1)}.
const luaReceiveMark = `
local KS, KX, KD, KW = KEYS[1], KEYS[3], KEYS[4], KEYS[9]
local PAD = string.rep('~', 72)
local g = ARGV[1]
local prev
local gs = redis.pcall('XINFO', 'GROUPS', KS)
if type(gs) == 'table' and gs.err then
  redis.call('XGROUP', 'CREATE', KS, g, '0', 'MKSTREAM')
  prev = '0-0'
else
  for _, gi in ipairs(gs) do
    for i = 1, #gi, 2 do
      if gi[i] == 'name' and gi[i + 1] == g then
        for j = 1, #gi, 2 do
          if gi[j] == 'last-delivered-id' then prev = gi[j + 1] end
        end
      end
    end
  end
  if not prev then
    redis.call('XGROUP', 'CREATE', KS, g, '0')
    prev = '0-0'
  end
end
redis.call('HSET', KW, 'r', prev)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nd = -1
local a = redis.call('ZRANGE', KD, 0, 0, 'WITHSCORES')
if #a > 0 and a[1] ~= PAD then nd = tonumber(a[2]) end
local b = redis.call('ZRANGE', KX, 0, 0, 'WITHSCORES')
if #b > 0 and b[1] ~= PAD and (nd < 0 or tonumber(b[2]) < nd) then nd = tonumber(b[2]) end
return {now, prev, nd}
`

// luaReceivePost is standalone (no prelude) and sent with EVAL. ARGV: group,
// consumer, token, lease (ms), max. Returns {now, deadline, earliest lease
// deadline (ms or -1), then the stream ids it did not record because they
// had a lease record already}.
const luaReceivePost = `
local KS, KL, KX, KK, KW = KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[9]
local PAD = string.rep('~', 72)
local g, c, tok, lease, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + lease
local out = {now, deadline, -1}
-- the entries just read: this consumer's pending entries after the group's
-- last-delivered id before the XREADGROUP (remembered by the mark script)
local prev = redis.call('HGET', KW, 'r') or '0-0'
local p = redis.pcall('XPENDING', KS, g, '(' .. prev, '+', max, c)
if type(p) == 'table' and not p.err and #p > 0 then
  local sids = {}
  for i, e in ipairs(p) do sids[i] = e[1] end
  local have = redis.call('HMGET', KL, unpack(sids))
  local recs = {}
  if redis.call('EXISTS', KK) == 1 then
    for _, e in ipairs(redis.call('XRANGE', KS, sids[1], sids[#sids])) do
      local f = e[2]
      local n, mid, dedup = 0, '', ''
      for i = 1, #f, 2 do
        local k = f[i]
        if k == 'i' then mid = f[i + 1] elseif k == 'u' then dedup = f[i + 1] elseif k == 'n' then n = tonumber(f[i + 1]) end
      end
      recs[e[1]] = tok .. '\n' .. (n + 1) .. '\n' .. mid .. '\n' .. dedup
    end
  end
  local hs, zs = {}, {}
  local dls = string.format('%d', deadline)
  for i, sid in ipairs(sids) do
    if have[i] then
      out[#out + 1] = sid
    else
      hs[#hs + 1] = sid; hs[#hs + 1] = recs[sid] or tok
      zs[#zs + 1] = dls; zs[#zs + 1] = sid
    end
  end
  if #hs > 0 then
    redis.call('HSET', KL, PAD, '', unpack(hs))
    redis.call('ZADD', KX, 'inf', PAD, unpack(zs))
  end
end
local b = redis.call('ZRANGE', KX, 0, 0, 'WITHSCORES')
if #b > 0 and b[1] ~= PAD then out[3] = tonumber(b[2]) end
return out
`

var scriptReceivePre = script(luaReceivePre)

// fastResult is the outcome of one fast claim.
type fastResult struct {
	ds []backend.Delivery
	// wake and next are where and until when to wait when ds is empty.
	wake string
	next time.Duration // -1: no known due time
}

// claimFast runs the fast receive transaction.
func (d *Driver) claimFast(ctx context.Context, queue string, k keys, p backend.ReceiveParams, tok string) (res fastResult, err error) {
	keys := k.list()
	var pre, mark, post *goredis.Cmd
	var xr *goredis.XStreamSliceCmd
	sweep := int64(0)
	if d.o.SweepEvery > 0 {
		sweep = d.o.SweepEvery.Milliseconds()
	}
	_, _ = d.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		pre = scriptReceivePre.EvalSha(ctx, pipe, keys, group, d.consumer, defaultPromote, sweep, d.o.OrphanIdle.Milliseconds())
		mark = pipe.Eval(ctx, luaReceiveMark, keys, group)
		xr = pipe.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: group, Consumer: d.consumer, Streams: []string{k.stream, ">"}, Count: int64(p.Max), Block: -1})
		post = pipe.Eval(ctx, luaReceivePost, keys, group, d.consumer, tok, ceilMS(p.Lease), p.Max)
		return nil
	})
	if err := pre.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		// Not cached (first use, or the cache was flushed): load it for the
		// next call. This call still recorded what it read.
		if err := scriptReceivePre.Load(ctx, d.c).Err(); err != nil {
			d.o.Logger.Debug("fila/redis: cannot load the receive script", "error", err)
		}
	}
	pv, perr := post.Slice()
	if perr != nil {
		// The transaction did not run, or the post script failed: whatever
		// the XREADGROUP read has no lease record and the sweep recovers it.
		return res, d.fail(ctx, perr)
	}
	if len(pv) < 3 {
		return res, fmt.Errorf("fila/redis: receive post script returned %d values", len(pv))
	}
	now, deadline := toInt(pv[0]), msTime(toInt(pv[1]))
	d.setHint(queue, now, toInt(pv[2]))
	var skip map[string]bool
	if len(pv) > 3 {
		skip = make(map[string]bool, len(pv)-3)
		for _, v := range pv[3:] {
			skip[str(v)] = true
		}
	}
	streams, xerr := xr.Result()
	if xerr != nil && !errors.Is(xerr, goredis.Nil) {
		return res, d.fail(ctx, xerr)
	}
	if len(streams) > 0 {
		for _, e := range streams[0].Messages {
			if skip[e.ID] {
				continue
			}
			receipt := makeReceipt(e.ID, tok)
			m, attempt, lastErr, err := messageFromValues(e.Values)
			if err != nil {
				d.o.Logger.Error("fila/redis: dead-lettering an undecodable stream entry", "queue", queue, "stream_id", e.ID, "error", err)
				_ = d.Dead(ctx, backend.Ref{Queue: queue, ID: m.ID, Receipt: receipt}, "fila/redis: undecodable entry: "+err.Error())
				continue
			}
			res.ds = append(res.ds, backend.Delivery{Message: m, Attempt: attempt, Receipt: receipt, Deadline: deadline, LastError: lastErr})
		}
	}
	if len(res.ds) > 0 {
		return res, nil
	}
	mv, merr := mark.Slice()
	if merr != nil {
		return res, d.fail(ctx, merr)
	}
	if len(mv) != 3 {
		return res, fmt.Errorf("fila/redis: receive mark script returned %d values", len(mv))
	}
	res.wake, res.next = str(mv[1]), -1
	if nd := toInt(mv[2]); nd >= 0 {
		res.next = time.Duration(nd-toInt(mv[0])+1) * time.Millisecond
	}
	return res, nil
}

// setHint records, for queue, when the earliest lease deadline seen (server
// ms, or -1 for none) comes on the local clock; until then Receive may use
// the fast path.
func (d *Driver) setHint(queue string, serverNow, xmin int64) {
	var at time.Time
	if xmin < 0 {
		at = time.Now().Add(24 * time.Hour)
	} else {
		at = time.Now().Add(time.Duration(xmin-serverNow) * time.Millisecond)
	}
	d.mu.Lock()
	d.hint[queue] = at
	d.mu.Unlock()
}

// fastOK reports whether no lease of queue is known to have expired.
func (d *Driver) fastOK(queue string) bool {
	d.mu.Lock()
	at := d.hint[queue]
	d.mu.Unlock()
	return time.Now().Before(at)
}
