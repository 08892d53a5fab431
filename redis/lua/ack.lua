-- Ack: settles deliveries, grouped by lease token and level. Run after the
-- prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, then one block per lease token and level: token, level,
-- lowest and highest stream id of the block's stream deliveries (empty when
-- it has none), number of ids, number of them that are early deliveries'
-- pseudo ids (level 0 blocks only), ids (stream ids of the level's stream,
-- not qualified). Returns the positions (1-based, across blocks) of the ids
-- whose lease was lost; the others are acked.
--
-- A lease consumer that still has its deadline and never lost an entry to
-- another consumer (it is not in the moved set) holds every entry of its
-- batch that is still pending, so its block is checked by XACK's count: when
-- it acks them all, all were current (and a block of stream ids only is then
-- settled without looking at each). Otherwise, and for a consumer that lost
-- entries (takeover, Extend), each entry is checked against the pending list.

local g = ARGV[1]
local now = now_ms()
local lost = {}
-- per level (index level + 1): the ids to settle, those of them to XACK
local ok, xack = {{}, {}, {}, {}}, {{}, {}, {}, {}}
local done, used, unmoved = {}, {}, {}
local i, pos = 2, 0
while i <= #ARGV do
  local tok, l, lo, hi, n, ne = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local first = i + 6
  i = first + n
  if l ~= 1 and l ~= 2 and l ~= 3 then l = 0 end
  local s = lstream(l)
  local lok, lxack = ok[l + 1], xack[l + 1]
  local c = 'l' .. tok
  local clean, settled = false, false
  local have = {}
  if lo ~= '' then
    local alive = live(c, now)
    clean = alive and redis.call('SISMEMBER', KT, c) == 0
    if clean then unmoved[#unmoved + 1] = c else used[#used + 1] = c end
    if clean then
      local ids
      if ne == 0 then
        ids = {unpack(ARGV, first, i - 1)}
      else
        ids = {}
        for k = first, i - 1 do
          if not is_early(ARGV[k]) then ids[#ids + 1] = ARGV[k] end
        end
      end
      local acked = redis.pcall('XACK', s, g, unpack(ids))
      if acked == #ids then
        if ne == 0 then
          -- all current, none repeated: settle them without the loop below
          redis.call('XDEL', s, unpack(ids))
          free_indexed(l, ids)
          pos = pos + n
          settled = true
        else
          for _, sid in ipairs(ids) do have[sid] = true end
        end
      elseif not is_err(acked) then
        -- some were settled before (or are repeated): the others are the
        -- entries still in the stream
        for _, sid in ipairs(ids) do
          if not have[sid] and #redis.call('XRANGE', s, sid, sid) > 0 then have[sid] = true end
        end
      end
    elseif alive then
      local p = redis.pcall('XPENDING', s, g, lo, hi, n + 100, c)
      if not is_err(p) then
        for _, e in ipairs(p) do have[e[1]] = true end
      end
    end
  end
  for k = first, settled and first - 1 or i - 1 do
    pos = pos + 1
    local sid = ARGV[k]
    local q = qsid(l, sid)
    local good = false
    if done[q] then
      good = false
    elseif is_early(sid) then
      local att, mid, dedup = early_lease(sid, tok, now)
      if att then
        free_dedup(dedup, mid)
        redis.call('HDEL', KP, mid)
        redis.call('HDEL', KL, sid)
        redis.call('ZREM', KX, sid)
        good = true
      end
    elseif have[sid] then
      lok[#lok + 1] = sid
      if not clean then lxack[#lxack + 1] = sid end
      good = true
    elseif not clean then
      -- beyond the range's reply, or extended (a consumer of its own)
      local o = pel_of(g, sid, s)
      if o and owns(o, tok, q, now) then
        lok[#lok + 1] = sid
        lxack[#lxack + 1] = sid
        if o ~= c then used[#used + 1] = o end
        good = true
      end
    end
    if good then done[q] = true else lost[#lost + 1] = pos end
  end
end
for l = 0, 3 do
  local s = lstream(l)
  if #xack[l + 1] > 0 then redis.pcall('XACK', s, g, unpack(xack[l + 1])) end
  if #ok[l + 1] > 0 then
    redis.call('XDEL', s, unpack(ok[l + 1]))
    free_indexed(l, ok[l + 1])
  end
end
for _, c in ipairs(used) do release(g, c) end
for _, c in ipairs(unmoved) do release(g, c, true) end
return lost
