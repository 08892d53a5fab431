-- ReceiveDelayed: leases delayed messages before their run-at (move.go).
-- Run after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, max, lease (ms), token, early scan limit. Returns {now,
-- deadline, then per delivery: pseudo stream id, attempt, fields, run-at}.
-- Expired early leases (found among the first ARGV[5] expired leases) go back
-- to waiting first, so they can be taken again. The messages keep their
-- fields in the payloads hash while taken; see prelude.lua.

local g = ARGV[1]
local want, lease, tok, scan = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local now = now_ms()
local deadline = now + lease
unearly_expired(g, now, scan)
local out = {now, deadline}
local a = redis.call('ZRANGEBYSCORE', KD, '(' .. now, '(+inf', 'WITHSCORES', 'LIMIT', 0, want)
local dls = string.format('%d', deadline)
local hs, zs = {}, {}
for i = 1, #a, 2 do
  local mid, runat = a[i], string.format('%d', tonumber(a[i + 1]))
  redis.call('ZREM', KD, mid)
  local f = early_fields(mid)
  if f then
    local n, dedup = 0, ''
    for j = 1, #f, 2 do
      local k = f[j]
      if k == 'n' then n = tonumber(f[j + 1]) elseif k == 'u' then dedup = f[j + 1] end
    end
    local sid = 'd' .. runat .. '-' .. mid
    hs[#hs + 1] = sid; hs[#hs + 1] = rec_make(tok, n + 1, mid, dedup)
    zs[#zs + 1] = dls; zs[#zs + 1] = sid
    out[#out + 1] = sid; out[#out + 1] = n + 1; out[#out + 1] = f; out[#out + 1] = runat
  end
end
if #hs > 0 then
  redis.call('HSET', KL, PAD, '', unpack(hs))
  redis.call('ZADD', KX, 'inf', PAD, unpack(zs))
end
return out
