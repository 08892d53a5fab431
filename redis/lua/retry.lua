-- Retry: ends a delivery and requeues its message, ready or delayed.
-- Run after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, qualified stream id, token, delay (ms), reason. Returns 1, or
-- 0 when the lease is lost. The message goes back to its level's stream. A
-- delivery taken early (ReceiveDelayed) becomes ready at the later of its
-- run-at and now + delay.

local g, sid, token, delay, reason = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local now = now_ms()
local src, att, mid = take(g, sid, token, now)
if not src then return 0 end
local f = requeue(src, att, reason)
local due = now + delay
-- a message taken early keeps its run-at: it never becomes ready before it
if is_early(sid) then due = math.max(due, early_runat(sid)) end
if due <= now then
  xadd(g, f)
else
  redis.call('HSET', KP, mid, cmsgpack.pack(f))
  redis.call('ZADD', KD, 'inf', PAD, due, mid)
end
return 1
