-- Purge: deletes dead letters. Run after the prelude.lua helpers it
-- calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: "*" to purge everything, or dead-letter stream ids. Returns how many
-- were deleted.

if ARGV[1] == '*' then
  local n = redis.call('XLEN', KDEAD)
  redis.call('DEL', KDEAD, KDK, KDI)
  return n
end
local n = 0
for i = 1, #ARGV do
  local e = redis.call('XRANGE', KDEAD, ARGV[i], ARGV[i])
  if #e > 0 then
    local m = tomap(e[1][2])
    dead_kind(pkind(m['p'] or '\0'), -1)
    dead_unindex(m['i'], ARGV[i])
    redis.call('XDEL', KDEAD, ARGV[i])
    n = n + 1
  end
end
return n
