-- Replay: moves dead letters back to the queue. Run after the
-- prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, then dead-letter stream ids. Moves each back to the stream
-- of its level as a fresh message (no attempts, no last error, no dedup
-- key). Returns how many moved.

local g = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local e = redis.call('XRANGE', KDEAD, ARGV[i], ARGV[i])
  if #e > 0 then
    local src = e[1][2]
    local f = {}
    local kind, mid = '', nil
    for j = 1, #src, 2 do
      local k = src[j]
      if k == 'p' then kind = pkind(src[j + 1]) elseif k == 'i' then mid = src[j + 1] end
      if k ~= 'a' and k ~= 'r' and k ~= 'z' and k ~= 'u' and k ~= 'n' and k ~= 'e' then
        f[#f + 1] = k; f[#f + 1] = src[j + 1]
      end
    end
    xadd(g, f)
    redis.call('XDEL', KDEAD, ARGV[i])
    dead_kind(kind, -1)
    dead_unindex(mid, ARGV[i])
    n = n + 1
  end
end
return n
