-- Dead: ends a delivery and moves its message to the dead letters.
-- Run after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, qualified stream id, token, reason, cap (0 = unbounded),
-- attempts to record. Returns 1, or 0 when the lease is lost. The dead
-- letter keeps the message's fields but n and e (its level among them).

local g, sid, token, reason, cap, att = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local now = now_ms()
local src, _, mid, dedup = take(g, sid, token, now)
if not src then return 0 end
local f = {}
local kind = ''
for i = 1, #src, 2 do
  local k = src[i]
  if k == 'p' then kind = pkind(src[i + 1]) end
  if k ~= 'n' and k ~= 'e' then f[#f + 1] = k; f[#f + 1] = src[i + 1] end
end
f[#f + 1] = 'a'; f[#f + 1] = att
f[#f + 1] = 'r'; f[#f + 1] = reason
f[#f + 1] = 'z'; f[#f + 1] = now
dead_add(f, mid, kind)
dead_trim(cap)
free_dedup(dedup, mid)
return 1
