package redis

import goredis "github.com/redis/go-redis/v9"

// Every script gets the ten keys of one queue (keys.list) and runs on the
// broker's clock. Stream entries carry the message as fields:
//
//	i message id   p payload (kind, enqueued-at, max attempts, headers, body;
//	  see encodePayload; its first byte is the kind's length, then the kind)
//	u dedup key (optional)   n deliveries before this entry (optional)
//	e last error (optional)
//
// A delivery's lease record (hash "leases", field = stream id) is
// "token\nattempt\nmessage id\ndedup key", or for an entry read by the
// fast receive path of a queue without dedup keys just "token" (the attempt
// is then the entry's n + 1, the message id its i); its deadline is the
// score of the stream id in the "deadlines" sorted set. The consumer group's pending list
// mirrors the records; the records are the truth.
//
// A delayed message taken early by ReceiveDelayed has no stream entry: its
// fields stay in the "payloads" hash and its lease is recorded under the
// pseudo stream id "d<run-at ms>-<message id>" (real stream ids start with a
// digit). When such a lease expires, the message goes back to the delayed
// set at that run-at (or to the stream when the run-at has passed).

// luaPrelude holds helpers shared by every script.
const luaPrelude = `
local KS, KL, KX, KD, KP, KK, KDEAD, KDK, KW, KDI = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]

-- PAD is a permanent member of the leases hash and of the deadline and
-- delayed sorted sets (score +inf). Being longer than the listpack limits (64
-- bytes by default), it keeps those keys in their hashtable and skiplist
-- encodings; in the compact listpack encoding every insert and delete of a
-- batch would scan and move the whole key.
local PAD = string.rep('~', 72)

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- complete fills in the attempt, message id and dedup key of a lazy record
-- from the entry's fields f.
local function complete(att, mid, dedup, f)
  if att then return att, mid, dedup end
  local n = 0
  mid, dedup = '', ''
  for i = 1, #f, 2 do
    local k = f[i]
    if k == 'i' then mid = f[i + 1] elseif k == 'u' then dedup = f[i + 1] elseif k == 'n' then n = tonumber(f[i + 1]) end
  end
  return n + 1, mid, dedup
end

local function tomap(a)
  local m = {}
  for i = 1, #a, 2 do m[a[i]] = a[i + 1] end
  return m
end

local function rec_make(token, attempt, mid, dedup)
  return token .. '\n' .. attempt .. '\n' .. mid .. '\n' .. dedup
end

-- rec_parse splits a lease record. A lazy record (just the token, written
-- by the fast receive path) returns nil attempt and message id: the attempt
-- is then the entry's 'n' + 1 and the id its 'i' (see complete).
local function rec_parse(r)
  local a = string.find(r, '\n', 1, true)
  if not a then return r, nil, nil, '' end
  local b = string.find(r, '\n', a + 1, true)
  local c = string.find(r, '\n', b + 1, true)
  return string.sub(r, 1, a - 1), tonumber(string.sub(r, a + 1, b - 1)), string.sub(r, b + 1, c - 1), string.sub(r, c + 1)
end

-- ensure creates the stream and its consumer group when the stream is missing
-- (first use, or after a flush or a restart without persistence).
local function ensure(g)
  if redis.call('EXISTS', KS) == 0 then
    redis.call('XGROUP', 'CREATE', KS, g, '0', 'MKSTREAM')
  end
end

local function is_err(r)
  return type(r) == 'table' and r.err ~= nil
end

local function free_dedup(dedup, mid)
  if dedup ~= '' and redis.call('HGET', KK, dedup) == mid then
    redis.call('HDEL', KK, dedup)
  end
end

-- drop ends a delivery: the stream entry, its pending entry and its lease.
local function drop(g, sid)
  redis.pcall('XACK', KS, g, sid)
  redis.call('XDEL', KS, sid)
  redis.call('HDEL', KL, sid)
  redis.call('ZREM', KX, sid)
end

-- requeue returns the fields of entry f for a new entry, recording attempts
-- deliveries so far and the last error (reason, or the previous one when empty).
local function requeue(f, attempts, reason)
  local out = {}
  local last = ''
  for i = 1, #f, 2 do
    local k = f[i]
    if k == 'e' then last = f[i + 1]
    elseif k ~= 'n' then out[#out + 1] = k; out[#out + 1] = f[i + 1] end
  end
  if reason ~= '' then last = reason end
  out[#out + 1] = 'n'; out[#out + 1] = attempts
  if last ~= '' then out[#out + 1] = 'e'; out[#out + 1] = last end
  return out
end

-- lease_of returns the token, attempt, message id and dedup key of the
-- delivery sid when token is its current lease, else nil.
local function lease_of(sid, token)
  local r = redis.call('HGET', KL, sid)
  if not r then return nil end
  local t, att, mid, dedup = rec_parse(r)
  if t ~= token then return nil end
  return t, att, mid, dedup
end

-- lost_entry cleans up a lease whose stream entry vanished (trimmed or
-- deleted behind the driver's back).
local function lost_entry(g, sid, mid, dedup)
  drop(g, sid)
  if mid then free_dedup(dedup, mid) end
end

-- pkind returns the kind stored at the start of a payload.
local function pkind(p)
  return string.sub(p, 2, 1 + string.byte(p, 1))
end

local function dead_kind(kind, by)
  if redis.call('HINCRBY', KDK, kind, by) <= 0 then redis.call('HDEL', KDK, kind) end
end

-- dead_unindex forgets that message mid's dead letter is entry sid.
local function dead_unindex(mid, sid)
  if mid and redis.call('HGET', KDI, mid) == sid then redis.call('HDEL', KDI, mid) end
end

-- dead_add appends a dead letter (fields f) of message mid and kind.
local function dead_add(f, mid, kind)
  local sid = redis.call('XADD', KDEAD, '*', unpack(f))
  redis.call('HSET', KDI, mid, sid)
  dead_kind(kind, 1)
end

-- dead_trim deletes the oldest dead letters beyond cap (0 = unbounded).
local function dead_trim(cap)
  if cap <= 0 then return end
  local over = redis.call('XLEN', KDEAD) - cap
  if over <= 0 then return end
  for _, old in ipairs(redis.call('XRANGE', KDEAD, '-', '+', 'COUNT', over)) do
    local m = tomap(old[2])
    dead_kind(pkind(m['p'] or '\0'), -1)
    dead_unindex(m['i'], old[1])
    redis.call('XDEL', KDEAD, old[1])
  end
end

-- is_early reports whether sid is the pseudo stream id of a lease taken by
-- ReceiveDelayed ("d<run-at>-<message id>").
local function is_early(sid)
  return string.byte(sid, 1) == 100
end

-- early_runat returns the run-at (Unix ms) of the early lease sid.
local function early_runat(sid)
  return tonumber(string.match(sid, '^d(%d+)-'))
end

-- early_fields returns the stored fields of message mid (taken early), or nil.
local function early_fields(mid)
  local pk = redis.call('HGET', KP, mid)
  if not pk then return nil end
  return cmsgpack.unpack(pk)
end

-- unearly ends the early lease sid (expired): its message waits again for
-- its run-at, or goes to the stream when the run-at has passed, keeping the
-- deliveries it had.
local function unearly(g, sid, now)
  local r = redis.call('HGET', KL, sid)
  redis.call('HDEL', KL, sid)
  redis.call('ZREM', KX, sid)
  if not r then return end
  local _, att, mid, dedup = rec_parse(r)
  local f = early_fields(mid)
  if not f then
    free_dedup(dedup, mid)
    return
  end
  local nf = requeue(f, att, '')
  local runat = early_runat(sid)
  if runat <= now then
    ensure(g)
    redis.call('XADD', KS, '*', unpack(nf))
    redis.call('HDEL', KP, mid)
  else
    redis.call('HSET', KP, mid, cmsgpack.pack(nf))
    redis.call('ZADD', KD, 'inf', PAD, runat, mid)
  end
end

-- unearly_expired puts back the expired early leases found among the first
-- scan expired leases.
local function unearly_expired(g, now, scan)
  for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KX, '-inf', now, 'LIMIT', 0, scan)) do
    if is_early(sid) then unearly(g, sid, now) end
  end
end

-- promote moves up to plimit delayed messages whose run-at has come to the
-- stream.
local function promote(g, now, plimit)
  local due = redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'LIMIT', 0, plimit)
  if #due > 0 then
    ensure(g)
    for _, mid in ipairs(due) do
      local pk = redis.call('HGET', KP, mid)
      if pk then redis.call('XADD', KS, '*', unpack(cmsgpack.unpack(pk))) end
      redis.call('ZREM', KD, mid)
      redis.call('HDEL', KP, mid)
    end
  end
end

-- sweep is the throttled sweep of the pending list with XAUTOCLAIM: pending
-- entries without a lease record (delivered by something else, or whose
-- records were lost) get an expired lease so the next takeover hands them
-- out; entries deleted from the stream behind the driver's back lose their
-- lease and dedup key.
local function sweep(g, c, now, sweepEvery, orphanIdle)
  if sweepEvery > 0 and redis.call('EXISTS', KS) == 1 and now >= tonumber(redis.call('HGET', KW, 't') or '0') then
    local cur = redis.call('HGET', KW, 'c') or '0-0'
    local r = redis.pcall('XAUTOCLAIM', KS, g, c, orphanIdle, cur, 'COUNT', 100)
    if not is_err(r) then
      for _, e in ipairs(r[2]) do
        if e[2] and redis.call('HEXISTS', KL, e[1]) == 0 then
          local m = tomap(e[2])
          redis.call('HSET', KL, e[1], rec_make('-', (tonumber(m['n']) or 0) + 1, m['i'] or '', m['u'] or ''))
          redis.call('ZADD', KX, 'inf', PAD, 0, e[1])
        elseif not e[2] then
          local rr = redis.call('HGET', KL, e[1])
          if rr then
            local _, _, mid, dedup = rec_parse(rr)
            lost_entry(g, e[1], mid, dedup)
          else
            redis.pcall('XACK', KS, g, e[1])
          end
        end
      end
      for _, sid in ipairs(r[3] or {}) do
        local rr = redis.call('HGET', KL, sid)
        if rr then
          local _, _, mid, dedup = rec_parse(rr)
          lost_entry(g, sid, mid, dedup)
        end
      end
      redis.call('HSET', KW, 'c', r[1], 't', now + sweepEvery)
      -- forget consumers that hold nothing and were idle for an hour
      local cs = redis.pcall('XINFO', 'CONSUMERS', KS, g)
      if not is_err(cs) then
        for _, ci in ipairs(cs) do
          local m = tomap(ci)
          if m['name'] ~= c and tonumber(m['pending']) == 0 and tonumber(m['idle']) > 3600000 then
            redis.call('XGROUP', 'DELCONSUMER', KS, g, m['name'])
          end
        end
      end
    end
  end
end

-- take ends the delivery sid (whose lease was checked) and returns its
-- message's fields, or nil when the message is gone (its lease and dedup key
-- are then cleaned up). An early delivery's fields stay in the payloads hash.
local function take(g, sid, mid, dedup)
  if is_early(sid) then
    redis.call('HDEL', KL, sid)
    redis.call('ZREM', KX, sid)
    local f = early_fields(mid)
    if not f then free_dedup(dedup, mid) end
    return f
  end
  local e = redis.call('XRANGE', KS, sid, sid)
  if #e == 0 then
    lost_entry(g, sid, mid, dedup)
    return nil
  end
  drop(g, sid)
  return e[1][2]
end
`

// ARGV: group, count, then per message: id, dedup key, run-at (Unix ms, or
// -1), delay (ms), number of fields, fields... Returns per message "" when
// stored, else the id of the pending message holding its dedup key.
const luaEnqueue = `
local g = ARGV[1]
local n = tonumber(ARGV[2])
ensure(g)
local now = now_ms()
local out = {}
local i = 3
for m = 1, n do
  local mid, dedup, runat, delay, nf = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local first, last = i + 5, i + 4 + nf
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
      redis.call('XADD', KS, '*', unpack(ARGV, first, last))
    else
      local f = {}
      for j = first, last do f[#f + 1] = ARGV[j] end
      redis.call('HSET', KP, mid, cmsgpack.pack(f))
      redis.call('ZADD', KD, 'inf', PAD, due, mid)
    end
  end
end
return out
`

// ARGV: group, consumer, max, lease (ms), token base, promotion limit, sweep
// interval (ms, 0 = never), orphan idle (ms). Returns {now, deadline, wake
// id, next due (ms or -1), then per delivery: stream id, attempt, fields}.
// Every delivery of the call gets the lease token ARGV[5] (a stream id is
// delivered once per call, so stream id + token names one delivery). wake id
// and next due are only set when nothing was delivered.
const luaReceive = `
local g, c = ARGV[1], ARGV[2]
local want, lease, tok = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local plimit, sweepEvery, orphanIdle = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_ms()
local deadline = now + lease
local out = {now, deadline, '', -1}
local seq = 0

local hs, zs = {}, {}
local dls = string.format('%d', deadline)
local nh, no = 0, 4
local function give(sid, fields, attempt, mid, dedup)
  seq = seq + 1
  hs[nh + 1] = sid; hs[nh + 2] = tok .. '\n' .. attempt .. '\n' .. mid .. '\n' .. dedup
  zs[nh + 1] = dls; zs[nh + 2] = sid
  nh = nh + 2
  out[no + 1] = sid; out[no + 2] = attempt; out[no + 3] = fields
  no = no + 3
end

-- (a) promote due delayed messages; (b) sweep the pending list
promote(g, now, plimit)
sweep(g, c, now, sweepEvery, orphanIdle)

-- (c) take over deliveries whose own deadline has passed
local exp = redis.call('ZRANGEBYSCORE', KX, '-inf', now, 'LIMIT', 0, want)
if #exp > 0 then
  local sexp = {}
  for _, sid in ipairs(exp) do
    if is_early(sid) then unearly(g, sid, now) else sexp[#sexp + 1] = sid end
  end
  exp = sexp
end
if #exp > 0 then
  local got = {}
  local cl = redis.pcall('XCLAIM', KS, g, c, 0, unpack(exp))
  if not is_err(cl) then
    for _, e in ipairs(cl) do got[e[1]] = e[2] end
  end
  for _, sid in ipairs(exp) do
    local r = redis.call('HGET', KL, sid)
    if not r then
      redis.call('ZREM', KX, sid)
    else
      local _, att, mid, dedup = rec_parse(r)
      local fields = got[sid]
      if fields then
        att, mid, dedup = complete(att, mid, dedup, fields)
        give(sid, fields, att + 1, mid, dedup)
      else
        -- Not claimable: the entry was deleted (the message is gone), or the
        -- group lost its pending entry (re-add the entry so it is not lost).
        local e = redis.call('XRANGE', KS, sid, sid)
        if #e > 0 then
          att = complete(att, mid, dedup, e[1][2])
          ensure(g)
          redis.call('XADD', KS, '*', unpack(requeue(e[1][2], att, '')))
          drop(g, sid)
        else
          lost_entry(g, sid, mid, dedup)
        end
      end
    end
  end
end

-- (d) new entries
local left = want - seq
if left > 0 and redis.call('EXISTS', KS) == 1 then
  local r = redis.pcall('XREADGROUP', 'GROUP', g, c, 'COUNT', left, 'STREAMS', KS, '>')
  if is_err(r) then
    if string.find(r.err, 'NOGROUP', 1, true) then
      redis.call('XGROUP', 'CREATE', KS, g, '0')
      r = redis.call('XREADGROUP', 'GROUP', g, c, 'COUNT', left, 'STREAMS', KS, '>')
    else
      return redis.error_reply(r.err)
    end
  end
  if r then
    for _, e in ipairs(r[1][2]) do
      local f = e[2]
      local n, mid, dedup = 0, '', ''
      for i = 1, #f, 2 do
        local k = f[i]
        if k == 'i' then mid = f[i + 1] elseif k == 'u' then dedup = f[i + 1] elseif k == 'n' then n = tonumber(f[i + 1]) end
      end
      give(e[1], f, n + 1, mid, dedup)
    end
  end
end

if seq > 0 then
  redis.call('HSET', KL, PAD, '', unpack(hs))
  redis.call('ZADD', KX, 'inf', PAD, unpack(zs))
  -- the earliest lease deadline, for the caller's choice of receive path
  local b = redis.call('ZRANGE', KX, 0, 0, 'WITHSCORES')
  if #b > 0 and b[1] ~= PAD then out[4] = tonumber(b[2]) end
  return out
end

-- nothing: tell the caller when to look again and where to wait on the stream
local nd = -1
local a = redis.call('ZRANGE', KD, 0, 0, 'WITHSCORES')
if #a > 0 and a[1] ~= PAD then nd = tonumber(a[2]) end
local b = redis.call('ZRANGE', KX, 0, 0, 'WITHSCORES')
if #b > 0 and b[1] ~= PAD and (nd < 0 or tonumber(b[2]) < nd) then nd = tonumber(b[2]) end
local wake = '0-0'
if redis.call('EXISTS', KS) == 1 then
  local gs = redis.pcall('XINFO', 'GROUPS', KS)
  if not is_err(gs) then
    for _, gi in ipairs(gs) do
      local m = tomap(gi)
      if m['name'] == g then wake = m['last-delivered-id'] end
    end
  end
end
return {now, deadline, wake, nd}
`

// ARGV: group, then per ref: stream id, token. Returns 1 (acked) or 0 (lease
// lost) per ref.
const luaAck = `
local g = ARGV[1]
local sids = {}
for i = 2, #ARGV, 2 do sids[#sids + 1] = ARGV[i] end
local recs = redis.call('HMGET', KL, unpack(sids))
local out, ok, st, done = {}, {}, {}, {}
for j, sid in ipairs(sids) do
  local r = recs[j]
  local token = ARGV[2 * j + 1]
  out[j] = 0
  -- the record is the token alone (lazy: no dedup key) or starts with
  -- "token\n"; a record ending in "\n" has no dedup key
  local lazy = r and #r == #token
  if r and not done[sid] and (lazy and r == token or not lazy and string.byte(r, #token + 1) == 10 and string.sub(r, 1, #token) == token) then
    done[sid] = true
    ok[#ok + 1] = sid
    if is_early(sid) then
      local _, _, mid, dedup = rec_parse(r)
      free_dedup(dedup, mid)
      redis.call('HDEL', KP, mid)
    else
      st[#st + 1] = sid
      if not lazy and string.byte(r, -1) ~= 10 then
        local _, _, mid, dedup = rec_parse(r)
        free_dedup(dedup, mid)
      end
    end
    out[j] = 1
  end
end
if #st > 0 then
  redis.pcall('XACK', KS, g, unpack(st))
  redis.call('XDEL', KS, unpack(st))
end
if #ok > 0 then
  redis.call('HDEL', KL, unpack(ok))
  redis.call('ZREM', KX, unpack(ok))
end
return out
`

// ARGV: group, stream id, token, delay (ms), reason. Returns 1, or 0 when the
// lease is lost. A delivery taken early (ReceiveDelayed) becomes ready at the
// later of its run-at and now + delay.
const luaRetry = `
local g, sid, token, delay, reason = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local t, att, mid, dedup = lease_of(sid, token)
if not t then return 0 end
local src = take(g, sid, mid, dedup)
if not src then return 0 end
att, mid, dedup = complete(att, mid, dedup, src)
local f = requeue(src, att, reason)
local now = now_ms()
local due = now + delay
-- a message taken early keeps its run-at: it never becomes ready before it
if is_early(sid) then due = math.max(due, early_runat(sid)) end
if due <= now then
  ensure(g)
  redis.call('XADD', KS, '*', unpack(f))
  if is_early(sid) then redis.call('HDEL', KP, mid) end
else
  redis.call('HSET', KP, mid, cmsgpack.pack(f))
  redis.call('ZADD', KD, 'inf', PAD, due, mid)
end
return 1
`

// ARGV: group, stream id, token, reason, cap (0 = unbounded). Returns 1, or 0
// when the lease is lost.
const luaDead = `
local g, sid, token, reason, cap = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local t, att, mid, dedup = lease_of(sid, token)
if not t then return 0 end
local src = take(g, sid, mid, dedup)
if not src then return 0 end
att, mid, dedup = complete(att, mid, dedup, src)
if is_early(sid) then redis.call('HDEL', KP, mid) end
local f = {}
local kind = ''
for i = 1, #src, 2 do
  local k = src[i]
  if k == 'p' then kind = pkind(src[i + 1]) end
  if k ~= 'n' and k ~= 'e' then f[#f + 1] = k; f[#f + 1] = src[i + 1] end
end
f[#f + 1] = 'a'; f[#f + 1] = att
f[#f + 1] = 'r'; f[#f + 1] = reason
f[#f + 1] = 'z'; f[#f + 1] = now_ms()
dead_add(f, mid, kind)
dead_trim(cap)
free_dedup(dedup, mid)
return 1
`

// ARGV: group, consumer, stream id, token, lease (ms). Returns the new
// deadline (Unix ms), or 0 when the lease is lost.
const luaExtend = `
local g, c, sid, token, lease = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local t, _, mid, dedup = lease_of(sid, token)
if not t then return 0 end
if not is_early(sid) then
  local cl = redis.pcall('XCLAIM', KS, g, c, 0, sid, 'JUSTID')
  if not is_err(cl) and #cl == 0 and #redis.call('XRANGE', KS, sid, sid) == 0 then
    lost_entry(g, sid, mid, dedup)
    return 0
  end
end
local deadline = now_ms() + lease
redis.call('ZADD', KX, deadline, sid)
return deadline
`

// ARGV: group, then dead-letter stream ids. Moves each back to the stream as
// a fresh message (no attempts, no last error, no dedup key). Returns how many
// moved.
const luaReplay = `
local g = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local e = redis.call('XRANGE', KDEAD, ARGV[i], ARGV[i])
  if #e > 0 then
    local src = e[1][2]
    local f = {}
    local kind, mid = '', nil
    for j = 1, #src, 2 do
      local k = src[j]
      if k == 'p' then kind = pkind(src[j + 1]) elseif k == 'i' then mid = src[j + 1] end
      if k ~= 'a' and k ~= 'r' and k ~= 'z' and k ~= 'u' and k ~= 'n' and k ~= 'e' then
        f[#f + 1] = k; f[#f + 1] = src[j + 1]
      end
    end
    ensure(g)
    redis.call('XADD', KS, '*', unpack(f))
    redis.call('XDEL', KDEAD, ARGV[i])
    dead_kind(kind, -1)
    dead_unindex(mid, ARGV[i])
    n = n + 1
  end
end
return n
`

// ARGV: "*" to purge everything, or dead-letter stream ids. Returns how many
// were deleted.
const luaPurge = `
if ARGV[1] == '*' then
  local n = redis.call('XLEN', KDEAD)
  redis.call('DEL', KDEAD, KDK, KDI)
  return n
end
local n = 0
for i = 1, #ARGV do
  local e = redis.call('XRANGE', KDEAD, ARGV[i], ARGV[i])
  if #e > 0 then
    local m = tomap(e[1][2])
    dead_kind(pkind(m['p'] or '\0'), -1)
    dead_unindex(m['i'], ARGV[i])
    redis.call('XDEL', KDEAD, ARGV[i])
    n = n + 1
  end
end
return n
`

// ARGV: group. Returns {ready, delayed, leased, dead, oldest ready (Unix ms
// or -1), kinds (flat kind/count list)} on the broker's clock. Expired early
// leases (among the first 1000 expired leases) are put back first, so they
// count as delayed.
const luaStats = `
local g = ARGV[1]
local now = now_ms()
-- an expired early lease is a delayed message again (or a ready one)
unearly_expired(g, now, 1000)
local ready, oldest = 0, -1
local function older(ms)
  if ms >= 0 and (oldest < 0 or ms < oldest) then oldest = ms end
end
if redis.call('EXISTS', KS) == 1 then
  local xlen = redis.call('XLEN', KS)
  local pending, last = 0, nil
  local gs = redis.pcall('XINFO', 'GROUPS', KS)
  if not is_err(gs) then
    for _, gi in ipairs(gs) do
      local m = tomap(gi)
      if m['name'] == g then pending = tonumber(m['pending']); last = m['last-delivered-id'] end
    end
  end
  ready = xlen - pending
  if ready < 0 then ready = 0 end
  local first
  if last then
    first = redis.call('XRANGE', KS, '(' .. last, '+', 'COUNT', 1)
  else
    first = redis.call('XRANGE', KS, '-', '+', 'COUNT', 1)
  end
  if #first > 0 then
    local id = first[1][1]
    older(tonumber(string.sub(id, 1, string.find(id, '-', 1, true) - 1)))
  end
end
local dueDelayed = redis.call('ZCOUNT', KD, '-inf', now)
local delayed = redis.call('ZCOUNT', KD, '(' .. now, '(+inf')
local expired = redis.call('ZCOUNT', KX, '-inf', now)
local leased = redis.call('ZCOUNT', KX, '(' .. now, '(+inf')
local a = redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
if #a > 0 then older(tonumber(a[2])) end
local b = redis.call('ZRANGEBYSCORE', KX, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
if #b > 0 then older(tonumber(b[2])) end
return {ready + dueDelayed + expired, delayed, leased, redis.call('XLEN', KDEAD), oldest, redis.call('HGETALL', KDK)}
`

// ARGV: group, consumer. Forgets the consumer when it holds no pending entry.
const luaForget = `
local g, c = ARGV[1], ARGV[2]
if redis.call('EXISTS', KS) == 0 then return 0 end
local cs = redis.pcall('XINFO', 'CONSUMERS', KS, g)
if is_err(cs) then return 0 end
for _, ci in ipairs(cs) do
  local m = tomap(ci)
  if m['name'] == c and tonumber(m['pending']) == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KS, g, c)
    return 1
  end
end
return 0
`

func script(body string) *goredis.Script { return goredis.NewScript(luaPrelude + body) }

var (
	scriptEnqueue = script(luaEnqueue)
	scriptReceive = script(luaReceive)
	scriptAck     = script(luaAck)
	scriptRetry   = script(luaRetry)
	scriptDead    = script(luaDead)
	scriptExtend  = script(luaExtend)
	scriptReplay  = script(luaReplay)
	scriptPurge   = script(luaPurge)
	scriptStats   = script(luaStats)
	scriptForget  = script(luaForget)
)
