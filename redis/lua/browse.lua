-- Browse: lists a page of the queue's pending messages, changing nothing
-- (it runs no command that writes, claims or counts a delivery: no
-- XREADGROUP, XCLAIM, promotion or putting back of expired leases). Run
-- after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua.
--
-- ARGV: group, limit, budget (the most messages examined, listed or not),
-- bodies ('0': cut each payload before its body), number of sources, the
-- sources in listing order (browse.go's listSources: a kind letter and a
-- level digit), the cursor (the index of its source, 0 to start, and its
-- three key parts), then the message ids to keep (none: every message).
-- Returns {now, more (1 or 0), next cursor (source index and three key
-- parts, set when more is 1), then per message: state letter (r, d or l),
-- due (Unix ms, -1 when unknown), attempts so far, fields}.
--
-- The sources, and the key of a message in each (the cursor resumes after
-- it):
--   x<l> expired leases of level l's stream, in the order a claim takes
--        them over (level 0: by deadline then consumer; levels above: by
--        consumer), each consumer's entries in stream order: deadline,
--        consumer, stream id
--   n<l> the never-delivered entries of level l's stream, in stream order:
--        stream id
--   d<l> due delayed messages of level l, by run-at (the order promotion
--        appends them to the stream): run-at, message id
--   e<l> expired early leases (ReceiveDelayed) of level l whose run-at has
--        passed (a claim puts them back in the stream): deadline, pseudo id
--   D    delayed messages, by run-at: run-at, message id
--   E    expired early leases whose run-at is ahead (waiting again):
--        deadline, pseudo id
--   L    live leases, by deadline then consumer, each consumer's entries
--        level by level from the highest, in stream order: deadline,
--        consumer (or pseudo id), qualified stream id ('' for an early lease)
--   F    entries held by consumers with no deadline (foreign or orphaned
--        reads), level by level from the highest, by consumer, in stream
--        order: level, consumer, stream id

local g = ARGV[1]
local limit, budget, bodies = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] ~= '0'
local ns = tonumber(ARGV[5])
local srcs = {}
for i = 1, ns do srcs[i] = ARGV[5 + i] end
local ca = 6 + ns
local csrc, ck = tonumber(ARGV[ca]), {ARGV[ca + 1], ARGV[ca + 2], ARGV[ca + 3]}
local want = nil
if #ARGV > ca + 3 then
  want = {}
  for i = ca + 4, #ARGV do want[ARGV[i]] = true end
end
local now = now_ms()
local out = {now, 0, 0, '', '', ''}
local n = 0
local last = nil
local CHUNK = 200

-- blt reports whether a sorts before b byte by byte, as Redis orders
-- consumers and sorted set members (Lua's < follows the server's locale).
local function blt(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- cut returns fields f, its payload cut before the body when bodies are
-- not wanted (see encodePayload: kind length, kind, 8 + 4 bytes, headers
-- length on 4 bytes, headers, body).
local function cut(f)
  if bodies then return f end
  local o = {}
  for i = 1, #f, 2 do
    local v = f[i + 1]
    if f[i] == 'p' and type(v) == 'string' and #v >= 1 then
      local h = 13 + string.byte(v, 1)
      if #v >= h + 4 then
        local b1, b2, b3, b4 = string.byte(v, h + 1, h + 4)
        v = string.sub(v, 1, h + 4 + ((b1 * 256 + b2) * 256 + b3) * 256 + b4)
      end
    end
    o[i] = f[i]
    o[i + 1] = v
  end
  return o
end

-- visit examines one message of source si, of key k1, k2, k3: it lists it
-- (state st, due, attempts att, fields f) unless f is nil (nothing to list:
-- an entry deleted behind the driver's back, another level's message) or
-- the ids leave it out. Returns false once the page is full or the budget
-- spent.
local function visit(si, k1, k2, k3, st, due, att, f)
  if f and (not want or want[fget(f, 'i') or '']) then
    if n == limit then
      out[2] = 1
      return false
    end
    n = n + 1
    out[#out + 1] = st
    out[#out + 1] = due
    out[#out + 1] = att
    out[#out + 1] = cut(f)
  end
  last = {si, k1, k2, k3}
  budget = budget - 1
  if budget <= 0 then
    out[2] = 1
    return false
  end
  return true
end

-- lvl returns the level named by fields f.
local function lvl(f)
  local l = tonumber(fget(f, 'l') or '0')
  if l ~= 1 and l ~= 2 and l ~= 3 then l = 0 end
  return l
end

-- held visits the entries consumer c holds in stream s (level l) after
-- start, in stream order, as state st due at due, with key k1, c and the
-- entry's id (qualified when q).
local function held(si, l, s, c, start, st, due, k1, q)
  while true do
    local p = redis.pcall('XPENDING', s, g, start, '+', CHUNK, c)
    if is_err(p) then return true end
    for _, e in ipairs(p) do
      local r = redis.call('XRANGE', s, e[1], e[1])
      local f = r[1] and r[1][2]
      local att = 0
      if f then att = tonumber(fget(f, 'n') or '0') + tonumber(e[4]) end
      local k3 = e[1]
      if q then k3 = qsid(l, e[1]) end
      if not visit(si, k1, c, k3, st, due, att, f) then return false end
    end
    if #p < CHUNK then return true end
    start = '(' .. p[#p][1]
  end
end

-- zwalk calls fn(member, score, resume) for the members of sorted set z
-- scored from lo to hi, in order, from the cursor's (score, member) on when
-- from is set (resume: this member is the cursor's, listed in part).
-- Returns false when fn did.
local function zwalk(z, lo, hi, from, fn)
  local fs = from and tonumber(from[1])
  if fs then lo = from[1] end
  local off = 0
  while true do
    local r = redis.call('ZRANGEBYSCORE', z, lo, hi, 'WITHSCORES', 'LIMIT', off, CHUNK)
    for i = 1, #r, 2 do
      local m, sc = r[i], r[i + 1]
      local tie = fs and tonumber(sc) == fs
      if not (tie and blt(m, from[2])) then
        if not fn(m, sc, tie and m == from[2]) then return false end
      end
    end
    if #r < 2 * CHUNK then return true end
    off = off + CHUNK
  end
end

-- early returns the attempt, fields and run-at of the early lease m, or nil.
local function early(m)
  local r = redis.call('HGET', KL, m)
  if not r then return nil end
  local _, att, mid = rec_parse(r)
  return att, early_fields(mid), early_runat(m)
end

local gen = {}

gen.n = function(si, l, from)
  local s = lstream(l)
  if redis.call('EXISTS', s) == 0 then return true end
  local start = last_delivered(g, s)
  if from and (not start or sid_after(from[1], start)) then start = from[1] end
  if start then start = '(' .. start else start = '-' end
  while true do
    local es = redis.call('XRANGE', s, start, '+', 'COUNT', CHUNK)
    for _, e in ipairs(es) do
      local ms = sid_parse(e[1])
      if not visit(si, e[1], '', '', 'r', ms, tonumber(fget(e[2], 'n') or '0'), e[2]) then return false end
    end
    if #es < CHUNK then return true end
    start = '(' .. es[#es][1]
  end
end

gen.x = function(si, l, from)
  local s = lstream(l)
  local sum = redis.pcall('XPENDING', s, g)
  if is_err(sum) or type(sum[4]) ~= 'table' then return true end
  local cs = {}
  for _, ce in ipairs(sum[4]) do
    local d = redis.call('ZSCORE', KX, ce[1])
    if d and tonumber(d) <= now then cs[#cs + 1] = {tonumber(d), ce[1], d} end
  end
  -- a level-0 claim takes expired leases by deadline, the others by consumer
  local function before(ad, an, bd, bn)
    if l == 0 and ad ~= bd then return ad < bd end
    return blt(an, bn)
  end
  table.sort(cs, function(x, y) return before(x[1], x[2], y[1], y[2]) end)
  local fd = from and tonumber(from[1])
  for _, c in ipairs(cs) do
    local start = '-'
    local skip = false
    if from then
      if before(c[1], c[2], fd, from[2]) then
        skip = true
      elseif not before(fd, from[2], c[1], c[2]) then
        start = '(' .. from[3]
      end
    end
    if not skip and not held(si, l, s, c[2], start, 'r', c[1], c[3], false) then return false end
  end
  return true
end

gen.d = function(si, l, from)
  return zwalk(KD, '-inf', now, from, function(m, sc, resume)
    if resume then return true end
    local pk = redis.call('HGET', KP, m)
    local f = pk and cmsgpack.unpack(pk)
    if f and lvl(f) ~= l then f = nil end
    return visit(si, sc, m, '', 'r', tonumber(sc), f and tonumber(fget(f, 'n') or '0'), f)
  end)
end

gen.D = function(si, _, from)
  local lo = '(' .. now
  if from and tonumber(from[1]) <= now then from = nil end
  return zwalk(KD, lo, '(+inf', from, function(m, sc, resume)
    if resume then return true end
    local pk = redis.call('HGET', KP, m)
    local f = pk and cmsgpack.unpack(pk)
    return visit(si, sc, m, '', 'd', tonumber(sc), f and tonumber(fget(f, 'n') or '0'), f)
  end)
end

-- expired early leases: whose run-at has passed (ready, of level l) when
-- due, the others (delayed again) when not
local function early_expired(si, l, from, due)
  return zwalk(KX, '-inf', now, from, function(m, sc, resume)
    if resume then return true end
    local att, f, runat
    if is_early(m) then att, f, runat = early(m) end
    local d = tonumber(sc)
    if f and due then
      if runat > now or lvl(f) ~= l then f = nil end
    elseif f then
      if runat <= now then f = nil end
      d = runat
    end
    return visit(si, sc, m, '', due and 'r' or 'd', d, att, f)
  end)
end

gen.e = function(si, l, from) return early_expired(si, l, from, true) end
gen.E = function(si, _, from) return early_expired(si, 0, from, false) end

gen.L = function(si, _, from)
  local lo = '(' .. now
  if from and tonumber(from[1]) <= now then from = nil end
  local ls = levels()
  ls[#ls + 1] = 0
  return zwalk(KX, lo, '(+inf', from, function(m, sc, resume)
    if is_early(m) then
      if resume then return true end
      local att, f = early(m)
      return visit(si, sc, m, '', 'l', tonumber(sc), att, f)
    end
    local fl, fsid = 4, nil
    if resume then
      if from[3] == '' then return true end
      fl, fsid = qsplit(from[3])
    end
    for _, l in ipairs(ls) do
      if l <= fl then
        local start = '-'
        if l == fl then start = '(' .. fsid end
        if not held(si, l, lstream(l), m, start, 'l', tonumber(sc), sc, true) then return false end
      end
    end
    return true
  end)
end

gen.F = function(si, _, from)
  local ls = levels()
  ls[#ls + 1] = 0
  local fl = from and tonumber(from[1]) or 4
  for _, l in ipairs(ls) do
    if l <= fl then
      local s = lstream(l)
      local sum = redis.pcall('XPENDING', s, g)
      if not is_err(sum) and type(sum[4]) == 'table' then
        local cs = {}
        for _, ce in ipairs(sum[4]) do
          if not redis.call('ZSCORE', KX, ce[1]) then cs[#cs + 1] = ce[1] end
        end
        table.sort(cs, blt)
        for _, c in ipairs(cs) do
          local start = '-'
          local skip = false
          if l == fl then
            if blt(c, from[2]) then skip = true elseif c == from[2] then start = '(' .. from[3] end
          end
          if not skip and not held(si, l, s, c, start, 'l', -1, tostring(l), false) then return false end
        end
      end
    end
  end
  return true
end

for si = math.max(csrc, 1), ns do
  local from = nil
  if si == csrc then from = ck end
  local kind, l = string.sub(srcs[si], 1, 1), tonumber(string.sub(srcs[si], 2))
  if not gen[kind](si, l, from) then break end
end
if out[2] == 1 and last then
  out[3], out[4], out[5], out[6] = last[1], last[2], last[3], last[4]
end
return out
