-- Dead-letter import: stores dead letters from another broker (move.go).
-- Run after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: cap (0 = unbounded), then per letter: number of fields, fields (the
-- message id first). Letters whose message id has a dead letter already are
-- skipped. Returns how many were stored.

local cap = tonumber(ARGV[1])
local i, n = 2, 0
while i <= #ARGV do
  local nf = tonumber(ARGV[i])
  local first, last = i + 1, i + nf
  i = last + 1
  local mid, kind = ARGV[first + 1], ''
  for j = first, last, 2 do
    if ARGV[j] == 'p' then kind = pkind(ARGV[j + 1]) end
  end
  local have = redis.call('HGET', KDI, mid)
  if not (have and #redis.call('XRANGE', KDEAD, have, have) > 0) then
    local f = {}
    for j = first, last do f[#f + 1] = ARGV[j] end
    dead_add(f, mid, kind)
    n = n + 1
  end
end
dead_trim(cap)
return n
