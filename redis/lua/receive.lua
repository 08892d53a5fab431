-- Receive (script path): promotes due delayed messages, runs the sweep,
-- takes over expired leases (when the earliest deadline has passed), then
-- reads new entries, level by level from the highest (see prelude.lua):
-- for each level in use its expired leases, then its new entries, level 0
-- last. A level's stream found empty is deleted. Run after the prelude.lua
-- helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, consumer, max, lease (ms), promotion limit, sweep interval
-- (ms, 0 = never), orphan idle (ms). Returns {now, deadline, wake ids,
-- next due (ms or -1) or, when something was delivered, the earliest lease
-- deadline, the number of levels above 0 in use, then per delivery:
-- qualified stream id, attempt, fields}. wake ids, the last-delivered id of
-- each level's stream from 0 to 3 ('0-0' for a missing one), are only set
-- when nothing was delivered ('' otherwise).

local g, c = ARGV[1], ARGV[2]
local want, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local plimit, sweepEvery, orphanIdle = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local deadline = now + lease
local out = {now, deadline, '', -1, 0}
local seq = 0
local function give(q, fields, attempt)
  seq = seq + 1
  out[#out + 1] = q; out[#out + 1] = attempt; out[#out + 1] = fields
end

promote(g, now, plimit)
sweep(g, now, sweepEvery, orphanIdle)
-- xmin is the earliest lease deadline (-1: none) while it is known: leases
-- are taken over only when it has passed (the common case reads it alone).
local xmin = earliest()
local expired = xmin >= 0 and xmin <= now
if expired then
  -- expired early leases first: a message whose run-at has passed goes to
  -- its level's stream before the levels are read
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KX, '-inf', now, 'LIMIT', 0, want)) do
    if is_early(m) then unearly(g, m, now) end
  end
  xmin = nil
end

-- the levels in use, highest first, then level 0
local ls = levels()
local used = #ls
ls[#ls + 1] = 0
for _, l in ipairs(ls) do
  local s = lstream(l)
  local before = seq
  if expired and seq < want then
    if l == 0 then
      takeover(g, c, now, want - seq, give)
    else
      -- the level's expired leases, found through its pending list (so
      -- none is missed however many leases expired)
      local sum = redis.pcall('XPENDING', s, g)
      if not is_err(sum) and type(sum[4]) == 'table' then
        for _, ce in ipairs(sum[4]) do
          if seq >= want then break end
          local m = ce[1]
          local d = redis.call('ZSCORE', KX, m)
          if m ~= c and d and tonumber(d) <= now then
            claim_from(g, c, l, m, want - seq, give)
            release(g, m)
          end
        end
      end
    end
  end
  if seq < want then
    -- (a missing stream fails like a missing group: NOGROUP)
    local r = redis.pcall('XREADGROUP', 'GROUP', g, c, 'COUNT', want - seq, 'STREAMS', s, '>')
    if is_err(r) then
      if not string.find(r.err, 'NOGROUP', 1, true) then return redis.error_reply(r.err) end
      r = nil
      if redis.call('EXISTS', s) == 1 then
        ensure_group(g, s)
        r = redis.call('XREADGROUP', 'GROUP', g, c, 'COUNT', want - seq, 'STREAMS', s, '>')
      end
    end
    if r then
      for _, e in ipairs(r[1][2]) do
        give(qsid(l, e[1]), e[2], tonumber(fget(e[2], 'n') or '0') + 1)
      end
    end
  end
  if l > 0 and seq == before and redis.call('XLEN', s) == 0 then
    local sum = redis.pcall('XPENDING', s, g)
    if is_err(sum) or tonumber(sum[1]) == 0 then
      redis.call('DEL', s)
      ENSURED[s] = nil
      used = used - 1
    end
  end
end
out[5] = used

if seq > 0 then
  redis.call('ZADD', KX, deadline, c)
  if xmin == nil then
    out[4] = earliest()
  elseif xmin < 0 or deadline < xmin then
    out[4] = deadline
  else
    out[4] = xmin
  end
  return out
end
-- (a takeover whose entries were all deleted may have created c)
local wake = {'0-0', '0-0', '0-0', '0-0'}
for _, l in ipairs(used > 0 and ls or {0}) do
  local s = lstream(l)
  if redis.call('EXISTS', s) == 1 then
    redis.pcall('XGROUP', 'DELCONSUMER', s, g, c)
    wake[l + 1] = last_delivered(g, s) or '0-0'
  end
end
out[3] = wake
out[4] = next_due(xmin)
return out
