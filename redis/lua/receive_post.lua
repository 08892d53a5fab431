-- Receive (fast path): runs in MULTI/EXEC after a native XREADGROUP
-- (fastrecv.go). Run after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's twelve keys, named in prelude.lua.
--
-- ARGV: group, consumer, lease (ms), promotion limit, sweep interval (ms, 0
-- = never), orphan idle (ms). Returns {now, deadline, earliest lease deadline
-- (ms or -1), wake id, next due (ms or -1), again}: wake id and next due are
-- only set when the XREADGROUP read nothing, and again is 1 when the caller
-- should read again at once (the group was recreated, or messages were
-- promoted).

local g, c, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local plimit, sweepEvery, orphanIdle = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()
local deadline = now + lease
local p = redis.pcall('XPENDING', KS, g, '-', '+', 1, c)
if is_err(p) then
  -- NOGROUP: the XREADGROUP failed too
  ensure_group(g)
  return {now, deadline, -1, '', -1, 1}
end
if #p > 0 then
  redis.call('ZADD', KX, deadline, c)
else
  redis.pcall('XGROUP', 'DELCONSUMER', KS, g, c)
end
local moved = promote(g, now, plimit)
sweep(g, now, sweepEvery, orphanIdle)
if #p > 0 then return {now, deadline, earliest(), '', -1, 0} end
local again = 0
if moved > 0 then again = 1 end
return {now, deadline, earliest(), last_delivered(g) or '0-0', next_due(), again}
