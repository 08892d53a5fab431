-- Extend: gives one delivery a new deadline. Run after the prelude.lua
-- helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, qualified stream id, token, lease (ms). Returns the new
-- deadline (Unix ms), or 0 when the lease is lost. A stream delivery moves
-- to a consumer of its own ("l<token>:<qualified stream id>") with its own
-- deadline.

local g, q, token, lease = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local deadline = now + lease
if is_early(q) then
  if not early_lease(q, token, now) then return 0 end
  redis.call('ZADD', KX, deadline, q)
  return deadline
end
local l, sid = qsplit(q)
local s = lstream(l)
local o = pel_of(g, sid, s)
if not o or not owns(o, token, q, now) then return 0 end
local a = 'l' .. token .. ':' .. q
local cl = redis.call('XCLAIM', s, g, a, 0, sid, 'JUSTID')
if #cl == 0 then
  -- the entry was deleted behind the driver's back; XCLAIM dropped it
  unindex(q, true)
  release(g, o)
  return 0
end
redis.call('ZADD', KX, deadline, a)
if o ~= a then
  redis.call('SADD', KT, o)
  release(g, o)
end
return deadline
