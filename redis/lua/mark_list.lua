-- MarkList: lists marks (marks.go). Run after mark_prelude.lua.
-- KEYS: the queue's marks key. ARGV: prefix. Removes the expired marks and
-- returns the live ones that start with prefix, unsorted. (ZRANGEBYLEX only
-- orders members of equal score, which marks do not have.)

redis.call('ZREMRANGEBYSCORE', KM, '-inf', now_ms())
local p = ARGV[1]
local out = {}
for _, m in ipairs(redis.call('ZRANGE', KM, 0, -1)) do
  if string.sub(m, 1, #p) == p then out[#out + 1] = m end
end
return out
