-- Receive (script path): promotes due delayed messages, runs the sweep,
-- takes over expired leases (when the earliest deadline has passed), then
-- reads new entries. Run after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's twelve keys, named in prelude.lua.
--
-- ARGV: group, consumer, max, lease (ms), promotion limit, sweep interval
-- (ms, 0 = never), orphan idle (ms). Returns {now, deadline, wake id, next due
-- (ms or -1) or, when something was delivered, the earliest lease deadline,
-- then per delivery: stream id, attempt, fields}. wake id is only set when
-- nothing was delivered.

local g, c = ARGV[1], ARGV[2]
local want, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local plimit, sweepEvery, orphanIdle = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local deadline = now + lease
local out = {now, deadline, '', -1}
local seq = 0
local function give(sid, fields, attempt)
  seq = seq + 1
  out[#out + 1] = sid; out[#out + 1] = attempt; out[#out + 1] = fields
end

promote(g, now, plimit)
sweep(g, now, sweepEvery, orphanIdle)
-- xmin is the earliest lease deadline (-1: none) while it is known: leases
-- are taken over only when it has passed (the common case reads it alone).
local xmin = earliest()
if xmin >= 0 and xmin <= now then
  takeover(g, c, now, want, give)
  xmin = nil
end

local left = want - seq
if left > 0 then
  -- (a missing stream fails like a missing group: NOGROUP)
  local r = redis.pcall('XREADGROUP', 'GROUP', g, c, 'COUNT', left, 'STREAMS', KS, '>')
  if is_err(r) then
    if not string.find(r.err, 'NOGROUP', 1, true) then return redis.error_reply(r.err) end
    r = nil
    if redis.call('EXISTS', KS) == 1 then
      ensure_group(g)
      r = redis.call('XREADGROUP', 'GROUP', g, c, 'COUNT', left, 'STREAMS', KS, '>')
    end
  end
  if r then
    for _, e in ipairs(r[1][2]) do
      give(e[1], e[2], tonumber(fget(e[2], 'n') or '0') + 1)
    end
  end
end

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
if redis.call('EXISTS', KS) == 1 then redis.pcall('XGROUP', 'DELCONSUMER', KS, g, c) end
out[3] = last_delivered(g) or '0-0'
out[4] = next_due(xmin)
return out
