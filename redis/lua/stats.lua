-- Stats: counts a queue. Run after the prelude.lua helpers it calls
-- (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group. Returns {ready, delayed, leased, dead, oldest ready (Unix ms
-- or -1), kinds (flat kind/count list), ready by level (levels 0 to 3, or
-- an empty list when more than dueScan delayed messages are due: their
-- levels are read one record each)} on the broker's clock, every level's
-- stream counted. Expired early leases (among the first 1000 expired leases)
-- are put back first, so they count as delayed. Pending entries count as
-- leased while their consumer's deadline is ahead (or it has none: a foreign
-- or orphaned read) and as ready once it has passed.

local g = ARGV[1]
local now = now_ms()
unearly_expired(g, now, 1000)
local ready, oldest, leased, expired = 0, -1, 0, 0
local byLevel = {0, 0, 0, 0} -- byLevel[l + 1]: the ready messages of level l
local dueScan = 1000
local function older(ms)
  if ms >= 0 and (oldest < 0 or ms < oldest) then oldest = ms end
end
local lvls = levels()
table.insert(lvls, 0)
for _, l in ipairs(lvls) do
  local s = lstream(l)
  if redis.call('EXISTS', s) == 1 then
    local xlen = redis.call('XLEN', s)
    local pending, last = 0, nil
    local gs = redis.pcall('XINFO', 'GROUPS', s)
    if not is_err(gs) then
      for _, gi in ipairs(gs) do
        local m = tomap(gi)
        if m['name'] == g then pending = tonumber(m['pending']); last = m['last-delivered-id'] end
      end
    end
    ready = ready + math.max(xlen - pending, 0)
    byLevel[l + 1] = byLevel[l + 1] + math.max(xlen - pending, 0)
    local first
    if last then
      first = redis.call('XRANGE', s, '(' .. last, '+', 'COUNT', 1)
    else
      first = redis.call('XRANGE', s, '-', '+', 'COUNT', 1)
    end
    if #first > 0 then
      local id = first[1][1]
      older(tonumber(string.sub(id, 1, string.find(id, '-', 1, true) - 1)))
    end
    if pending > 0 then
      local sum = redis.call('XPENDING', s, g)
      for _, ce in ipairs(sum[4] or {}) do
        local dl = redis.call('ZSCORE', KX, ce[1])
        if dl and tonumber(dl) <= now then
          expired = expired + tonumber(ce[2])
          byLevel[l + 1] = byLevel[l + 1] + tonumber(ce[2])
          older(tonumber(dl))
        else
          leased = leased + tonumber(ce[2])
        end
      end
    end
  end
end
-- early leases: one record each (beside the padding member)
local early = redis.call('HLEN', KL)
if early > 0 then leased = leased + early - 1 end
local dueDelayed = redis.call('ZCOUNT', KD, '-inf', now)
local delayed = redis.call('ZCOUNT', KD, '(' .. now, '(+inf')
local a = redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
if #a > 0 then older(tonumber(a[2])) end
if dueDelayed > dueScan then
  byLevel = {}
elseif dueDelayed > 0 then
  for _, mid in ipairs(redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'LIMIT', 0, dueScan)) do
    local pk = redis.call('HGET', KP, mid)
    local l = 0
    if pk then l = tonumber(fget(cmsgpack.unpack(pk), 'l') or '0') end
    if l ~= 1 and l ~= 2 and l ~= 3 then l = 0 end
    byLevel[l + 1] = byLevel[l + 1] + 1
  end
end
return {ready + dueDelayed + expired, delayed, leased, redis.call('XLEN', KDEAD), oldest, redis.call('HGETALL', KDK), byLevel}
