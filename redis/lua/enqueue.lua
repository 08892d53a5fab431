-- Enqueue: stores a batch of messages, ready or delayed, holding their
-- dedup keys. Run after prelude.lua's helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, count, then per message: id, dedup key, run-at (Unix ms, or
-- -1), delay (ms), level, number of fields, fields... Returns per message ""
-- when stored, else the id of the pending message holding its dedup key. A
-- message due now goes to its level's stream.

local g = ARGV[1]
local n = tonumber(ARGV[2])
ensure(g)
local now = now_ms()
local out = {}
local i = 3
for m = 1, n do
  local mid, dedup, runat, delay, l, nf = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local first, last = i + 6, i + 5 + nf
  i = last + 1
  local holder = false
  if dedup ~= '' then
    holder = redis.call('HGET', KK, dedup)
    if not holder then redis.call('HSET', KK, dedup, mid) end
  end
  if holder then
    out[m] = holder
  else
    out[m] = ''
    local due = runat
    if due < 0 then due = now + delay end
    if due <= now then
      local s = lstream(l)
      if l > 0 then ensure(g, s) end
      local sid = redis.call('XADD', s, '*', unpack(ARGV, first, last))
      if dedup ~= '' then redis.call('HSET', KU, qsid(l, sid), mid .. '\n' .. dedup) end
    else
      local f = {}
      for j = first, last do f[#f + 1] = ARGV[j] end
      redis.call('HSET', KP, mid, cmsgpack.pack(f))
      redis.call('ZADD', KD, 'inf', PAD, due, mid)
    end
  end
end
return out
