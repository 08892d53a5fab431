-- Ack: settles deliveries, grouped by lease token. Run after the
-- prelude.lua helpers it calls (link.go).
-- KEYS: the queue's twelve keys, named in prelude.lua.
--
-- ARGV: group, then one block per lease token: token, lowest and highest
-- stream id of the block's stream deliveries (empty when it has none), number
-- of ids, number of them that are early deliveries' pseudo ids, ids.
-- Returns the positions (1-based, across blocks) of the stream ids whose lease
-- was lost; the others are acked.
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
local ok, xack, done, used, unmoved = {}, {}, {}, {}, {}
local i, pos = 2, 0
while i <= #ARGV do
  local tok, lo, hi, n, ne = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local first = i + 5
  i = first + n
  local c = 'l' .. tok
  local clean, settled = false, false
  local have = {}
  if lo ~= '' then
    local alive = live(c, now)
    clean = alive and redis.call('SISMEMBER', KT, c) == 0
    if clean then unmoved[#unmoved + 1] = c else used[#used + 1] = c end
    if clean then
      local l
      if ne == 0 then
        l = {unpack(ARGV, first, i - 1)}
      else
        l = {}
        for k = first, i - 1 do
          if not is_early(ARGV[k]) then l[#l + 1] = ARGV[k] end
        end
      end
      if redis.call('XACK', KS, g, unpack(l)) == #l then
        if ne == 0 then
          -- all current, none repeated: settle them without the loop below
          redis.call('XDEL', KS, unpack(l))
          free_indexed(l)
          pos = pos + n
          settled = true
        else
          for _, sid in ipairs(l) do have[sid] = true end
        end
      else
        -- some were settled before (or are repeated): the others are the
        -- entries still in the stream
        for _, sid in ipairs(l) do
          if not have[sid] and #redis.call('XRANGE', KS, sid, sid) > 0 then have[sid] = true end
        end
      end
    elseif alive then
      local p = redis.pcall('XPENDING', KS, g, lo, hi, n + 100, c)
      if not is_err(p) then
        for _, e in ipairs(p) do have[e[1]] = true end
      end
    end
  end
  for k = first, settled and first - 1 or i - 1 do
    pos = pos + 1
    local sid = ARGV[k]
    local good = false
    if done[sid] then
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
      ok[#ok + 1] = sid
      if not clean then xack[#xack + 1] = sid end
      good = true
    elseif not clean then
      -- beyond the range's reply, or extended (a consumer of its own)
      local o = pel_of(g, sid)
      if o and owns(o, tok, sid, now) then
        ok[#ok + 1] = sid
        xack[#xack + 1] = sid
        if o ~= c then used[#used + 1] = o end
        good = true
      end
    end
    if good then done[sid] = true else lost[#lost + 1] = pos end
  end
end
if #xack > 0 then redis.pcall('XACK', KS, g, unpack(xack)) end
if #ok > 0 then
  redis.call('XDEL', KS, unpack(ok))
  free_indexed(ok)
end
for _, c in ipairs(used) do release(g, c) end
for _, c in ipairs(unmoved) do release(g, c, true) end
return lost
