-- MarkSet: stores a mark (marks.go). Run after mark_prelude.lua.
-- KEYS: the queue's marks key. ARGV: name, until (Unix ms, -1 for none),
-- onlyNew (1 or 0). Returns 1 when it stored the mark, 0 when onlyNew found
-- a live one. A mark whose expiry has passed is removed rather than stored:
-- it would not exist anyway.

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
