-- Receive (fast path): runs in MULTI/EXEC after a native XREADGROUP of the
-- level 0 stream (fastrecv.go). Run after the prelude.lua helpers it calls
-- (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, consumer, lease (ms), promotion limit, sweep interval (ms, 0
-- = never), orphan idle (ms), max. Returns {now, deadline, earliest lease
-- deadline (ms or -1), wake id, next due (ms or -1), again, levels}: wake id
-- and next due are only set when the XREADGROUP read nothing, again is 1
-- when the caller should claim again at once (the group was recreated,
-- messages were promoted, or levels are in use), and levels is the number
-- of levels above 0 in use. When levels are in use (the caller did not
-- know: it claims them with the receive script), the XREADGROUP is undone:
-- what it read is acked out of the pending list and the group's
-- last-delivered id set back before it, so those entries are new again.

local g, c, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local plimit, sweepEvery, orphanIdle, want = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local deadline = now + lease
local p = redis.pcall('XPENDING', KS, g, '-', '+', 1, c)
if is_err(p) then
  -- NOGROUP: the XREADGROUP failed too
  ensure_group(g)
  return {now, deadline, -1, '', -1, 1, #levels()}
end
local moved = promote(g, now, plimit)
local lv = #levels()
if lv > 0 then
  if #p > 0 then
    local ids = {}
    for i, e in ipairs(redis.call('XPENDING', KS, g, '-', '+', want, c)) do ids[i] = e[1] end
    redis.call('XACK', KS, g, unpack(ids))
    -- an id just before the first one read
    local ms, sq = sid_parse(ids[1])
    local before = string.format('%.0f-%.0f', ms, sq - 1)
    if sq == 0 then before = string.format('%.0f-18446744073709551615', ms - 1) end
    redis.call('XGROUP', 'SETID', KS, g, before)
  end
  redis.pcall('XGROUP', 'DELCONSUMER', KS, g, c)
  return {now, deadline, earliest(), '', -1, 1, lv}
end
if #p > 0 then
  redis.call('ZADD', KX, deadline, c)
else
  redis.pcall('XGROUP', 'DELCONSUMER', KS, g, c)
end
sweep(g, now, sweepEvery, orphanIdle)
if #p > 0 then return {now, deadline, earliest(), '', -1, 0, 0} end
local again = 0
if moved > 0 then again = 1 end
return {now, deadline, earliest(), last_delivered(g) or '0-0', next_due(), again, 0}
