-- The prelude: key names and the helpers the queue scripts share. link.go
-- cuts it into its head (up to the first "local function") and its
-- helpers, each with the comment above it, and runs every script after the
-- head and only the helpers it calls.
--
-- Every script gets the fifteen keys of one queue (keys.list) and runs on
-- the broker's clock. Stream entries carry the message as fields:
--
--   i message id   p payload (kind, enqueued-at, max attempts, headers, body;
--     see encodePayload; its first byte is the kind's length, then the kind)
--   u dedup key (optional)   n deliveries before this entry (optional)
--   e last error (optional)   l level, 1 to 3 (optional: 0)
--
-- Levels (priorities): the messages of level 0 live in the stream KS, those
-- of level l in KS<l> (KEYS[13..15]), a stream with its consumer group like
-- KS, made when a message of that level is added and deleted by a claim
-- that finds it empty (levels), so a queue without levels has only KS and a
-- claim of it probes the three others with one EXISTS. A message's fields
-- name its level, so wherever it goes again (retry, expired lease,
-- promotion, replay, topic copy) xadd puts it in its level's stream. A claim
-- takes the levels from the highest down (expired leases of a level, then
-- its new entries), level 0 last. Stream ids of different streams may be
-- equal, so where the scripts name an entry apart from its stream (receipts,
-- the dedup index, Extend's consumers) they use its qualified id (qsid):
-- "<sid>" at level 0, "<l>:<sid>" above. Lease consumers, deadlines and the
-- moved set are shared: one Receive's consumer "l<token>" may hold entries
-- of several levels' streams.
--
-- Leases are per Receive call, not per message. Each call draws a token and
-- reads (XREADGROUP) or takes over (XCLAIM) its entries as the consumer
-- "l<token>", so the group's pending list itself records who holds what, and
-- one member of the "deadlines" sorted set (the consumer's name, scored with
-- its deadline) records until when. A receipt is "<stream id>/<token>"; it is
-- current while the entry is pending for that consumer. Extend moves one
-- delivery to its own consumer "l<token>:<stream id>" with its own deadline,
-- so extending one message of a batch leaves the others' deadlines alone. A
-- consumer is deleted, with its deadline, as soon as it holds nothing. The
-- attempt of a delivery is the entry's n plus the pending entry's delivery
-- count.
--
-- A delayed message taken early by ReceiveDelayed has no stream entry: its
-- fields stay in the "payloads" hash and its lease is recorded in the
-- "leases" hash under the pseudo stream id "d<run-at ms>-<message id>" (real
-- stream ids start with a digit) as "token\nattempt\nmessage id\ndedup key",
-- with the pseudo id as its member of the deadlines set. When such a lease
-- expires, the message goes back to the delayed set at that run-at (or to the
-- stream when the run-at has passed).
--
-- A lease consumer that lost an entry to another consumer (a takeover, or
-- Extend moving one delivery out) is kept in the "moved" set until it is
-- deleted; the Ack script checks the others' batches by count alone.
--
-- The "dedupsids" hash maps the stream id of each entry that holds a dedup
-- key to "message id\ndedup key", so a key is freed even when its entry was
-- deleted behind the driver's back.

local KS, KL, KX, KD, KP, KK, KDEAD, KDK, KW, KDI, KU, KT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local KS1, KS2, KS3 = KEYS[13], KEYS[14], KEYS[15]

-- ENSURED holds the streams ensure made sure of in this run of the script.
local ENSURED = {}

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

local function is_err(r)
  return type(r) == 'table' and r.err ~= nil
end

local function tomap(a)
  local m = {}
  for i = 1, #a, 2 do m[a[i]] = a[i + 1] end
  return m
end

-- fget returns field k of the flat field list f, or nil.
local function fget(f, k)
  for i = 1, #f, 2 do
    if f[i] == k then return f[i + 1] end
  end
  return nil
end

-- sid_parse returns the two numbers of stream id s ("<ms>-<seq>").
local function sid_parse(s)
  local d = string.find(s, '-', 1, true)
  return tonumber(string.sub(s, 1, d - 1)), tonumber(string.sub(s, d + 1))
end

-- sid_after reports whether stream id a comes after stream id b.
local function sid_after(a, b)
  local am, as = sid_parse(a)
  local bm, bs = sid_parse(b)
  return am > bm or (am == bm and as > bs)
end

local function rec_make(token, attempt, mid, dedup)
  return token .. '\n' .. attempt .. '\n' .. mid .. '\n' .. dedup
end

-- rec_parse splits an early lease record.
local function rec_parse(r)
  local a = string.find(r, '\n', 1, true)
  local b = string.find(r, '\n', a + 1, true)
  local c = string.find(r, '\n', b + 1, true)
  return string.sub(r, 1, a - 1), tonumber(string.sub(r, a + 1, b - 1)), string.sub(r, b + 1, c - 1), string.sub(r, c + 1)
end

-- lstream returns the stream of level l (KS for 0).
local function lstream(l)
  if l == 1 then return KS1 elseif l == 2 then return KS2 elseif l == 3 then return KS3 end
  return KS
end

-- qsid returns the qualified id of entry sid of level l's stream.
local function qsid(l, sid)
  if l == 0 then return sid end
  return l .. ':' .. sid
end

-- qsplit returns the level and the stream id of a qualified id.
local function qsplit(q)
  local c = string.find(q, ':', 1, true)
  if not c then return 0, q end
  local l = tonumber(string.sub(q, 1, c - 1))
  if l ~= 1 and l ~= 2 and l ~= 3 then l = 0 end
  return l, string.sub(q, c + 1)
end

-- levels returns the levels above 0 whose streams exist, highest first: one
-- EXISTS when there are none.
local function levels()
  local out = {}
  if redis.call('EXISTS', KS1, KS2, KS3) == 0 then return out end
  for l = 3, 1, -1 do
    if redis.call('EXISTS', lstream(l)) == 1 then out[#out + 1] = l end
  end
  return out
end

-- streams returns the stream of level 0 and those of the levels in use.
local function streams()
  local out = {KS}
  for _, l in ipairs(levels()) do out[#out + 1] = lstream(l) end
  return out
end

-- ensure creates stream s (KS when nil) and its consumer group when the
-- stream is missing (first use, or after a flush or a restart without
-- persistence).
local function ensure(g, s)
  s = s or KS
  if ENSURED[s] then return end
  if redis.call('EXISTS', s) == 0 then
    redis.call('XGROUP', 'CREATE', s, g, '0', 'MKSTREAM')
  end
  ENSURED[s] = true
end

-- ensure_group also recreates a group lost while its stream (s, KS when
-- nil) survived; from the stream's start, so no entry is stranded.
local function ensure_group(g, s)
  local r = redis.pcall('XGROUP', 'CREATE', s or KS, g, '0', 'MKSTREAM')
  if is_err(r) and not string.find(r.err, 'BUSYGROUP', 1, true) then
    return redis.error_reply(r.err)
  end
end

-- last_delivered returns the last-delivered id of stream s's group (KS
-- when nil), or nil.
local function last_delivered(g, s)
  s = s or KS
  if redis.call('EXISTS', s) == 0 then return nil end
  local gs = redis.pcall('XINFO', 'GROUPS', s)
  if is_err(gs) then return nil end
  for _, gi in ipairs(gs) do
    local m = tomap(gi)
    if m['name'] == g then return m['last-delivered-id'] end
  end
  return nil
end

local function free_dedup(dedup, mid)
  if dedup and dedup ~= '' and redis.call('HGET', KK, dedup) == mid then
    redis.call('HDEL', KK, dedup)
  end
end

-- xadd appends an entry with fields f to the stream of its level (made
-- with its group when missing), indexing its dedup key by qualified id.
local function xadd(g, f)
  local l = tonumber(fget(f, 'l') or '0')
  if l ~= 1 and l ~= 2 and l ~= 3 then l = 0 end
  local s = lstream(l)
  ensure(g, s)
  local sid = redis.call('XADD', s, '*', unpack(f))
  local dedup = fget(f, 'u')
  if dedup and dedup ~= '' then
    redis.call('HSET', KU, qsid(l, sid), (fget(f, 'i') or '') .. '\n' .. dedup)
  end
  return sid
end

-- free_indexed_key frees the dedup key of a dedup index record
-- ("message id\ndedup key").
local function free_indexed_key(r)
  local nl = string.find(r, '\n', 1, true)
  free_dedup(string.sub(r, nl + 1), string.sub(r, 1, nl - 1))
end

-- unindex forgets the dedup index of the entry of qualified id q, freeing
-- its dedup key when free is set (the message is done) and keeping it
-- otherwise (the message lives on in a new entry).
local function unindex(q, free)
  local r = redis.call('HGET', KU, q)
  if not r then return end
  redis.call('HDEL', KU, q)
  if free then free_indexed_key(r) end
end

-- release deletes lease consumer c, with its deadline and its mark in the
-- moved set (unless the caller knows it has none), when it holds nothing
-- in any level's stream. Returns true when it did.
local function release(g, c, unmoved)
  local ss = streams()
  for _, s in ipairs(ss) do
    local p = redis.pcall('XPENDING', s, g, '-', '+', 1, c)
    if not is_err(p) and #p > 0 then return false end
  end
  for _, s in ipairs(ss) do redis.pcall('XGROUP', 'DELCONSUMER', s, g, c) end
  redis.call('ZREM', KX, c)
  if not unmoved then redis.call('SREM', KT, c) end
  return true
end

-- free_indexed frees the dedup keys indexed for the entries of level l
-- whose stream ids are sids (acked or dead: their messages are done).
local function free_indexed(l, sids)
  if redis.call('EXISTS', KU) == 0 then return end
  local qs = sids
  if l > 0 then
    qs = {}
    for k, sid in ipairs(sids) do qs[k] = qsid(l, sid) end
  end
  local us = redis.call('HMGET', KU, unpack(qs))
  for k, r in ipairs(us) do
    if r then
      free_indexed_key(r)
      redis.call('HDEL', KU, qs[k])
    end
  end
end

-- pel_of returns the consumer holding entry sid of stream s (KS when nil)
-- and its delivery count, or nil when the entry is not pending.
local function pel_of(g, sid, s)
  local p = redis.pcall('XPENDING', s or KS, g, sid, sid, 1)
  if is_err(p) or #p == 0 then return nil end
  return p[1][2], tonumber(p[1][4])
end

-- live reports whether the lease named n (a lease consumer, or the pseudo
-- stream id of an early lease) has a deadline after now. A receipt is
-- current only until its deadline, even while nobody took the message over.
local function live(n, now)
  local d = redis.call('ZSCORE', KX, n)
  return d and tonumber(d) > now
end

-- owns reports whether consumer o is token tok's lease on the entry of
-- qualified id q and its deadline has not passed.
local function owns(o, tok, q, now)
  return (o == 'l' .. tok or o == 'l' .. tok .. ':' .. q) and live(o, now)
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

-- pkind returns the kind stored at the start of a payload.
local function pkind(p)
  return string.sub(p, 2, 1 + string.byte(p, 1))
end

-- kwords splits a kind or a kind pattern into its dot-separated words,
-- empty ones included ("a..b": three words; "": one, empty).
local function kwords(s)
  local w, i = {}, 1
  while true do
    local j = string.find(s, '.', i, true)
    if not j then
      w[#w + 1] = string.sub(s, i)
      return w
    end
    w[#w + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

-- kmatch reports whether the words k of a kind match the words p of a
-- pattern, as backend.KindMatch does: "*" is one word, "#" zero or more,
-- and after a mismatch the last "#" seen takes one more word.
local function kmatch(p, k)
  local pi, ki, star, mark = 1, 1, 0, 0
  local np, nk = #p, #k
  while ki <= nk do
    if pi <= np and p[pi] == '#' then
      star, mark = pi, ki
      pi = pi + 1
    elseif pi <= np and (p[pi] == '*' or p[pi] == k[ki]) then
      pi, ki = pi + 1, ki + 1
    elseif star > 0 then
      mark = mark + 1
      pi, ki = star + 1, mark
    else
      return false
    end
  end
  while pi <= np and p[pi] == '#' do pi = pi + 1 end
  return pi > np
end

-- pat_lines parses a subscription's patterns as the topic scripts store
-- them, one "<since> <pattern>" line each (since: the log's last id when
-- the pattern was added; an empty pattern: every kind), into a list of
-- {since, pattern}.
local function pat_lines(s)
  local out = {}
  for l in string.gmatch(s, '[^\n]+') do
    local sp = string.find(l, ' ', 1, true)
    out[#out + 1] = {string.sub(l, 1, sp - 1), string.sub(l, sp + 1)}
  end
  return out
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

-- early_lease returns the attempt, message id and dedup key of the early
-- lease sid when token holds it and its deadline has not passed, else nil.
local function early_lease(sid, token, now)
  local r = redis.call('HGET', KL, sid)
  if not r then return nil end
  local t, att, mid, dedup = rec_parse(r)
  if t ~= token or not live(sid, now) then return nil end
  return att, mid, dedup
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
    xadd(g, nf)
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
-- streams of their levels. Returns how many moved.
local function promote(g, now, plimit)
  local due = redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'LIMIT', 0, plimit)
  for _, mid in ipairs(due) do
    local pk = redis.call('HGET', KP, mid)
    if pk then xadd(g, cmsgpack.unpack(pk)) end
    redis.call('ZREM', KD, mid)
    redis.call('HDEL', KP, mid)
  end
  return #due
end

-- sweep is the throttled sweep (at most every sweepEvery ms per queue, and at
-- once after a takeover found a lease whose pending entries were lost). A
-- pass goes over the stream of level 0, then those of the levels in use, a
-- step on each per Receive, the state of each in KW ('c' and 'e' for level
-- 0, 'c1' and 'e1' for level 1, …; 't' the next pass). On each stream it
-- starts by giving consumers that hold entries but no deadline (a foreign
-- XREADGROUP, or a lease whose deadline was never recorded) an expired
-- deadline once they were idle orphanIdle ms, so the next takeover hands
-- their entries out, and by forgetting empty ones idle for an hour. Then it
-- walks the stream up to the group's last-delivered id when the pass began,
-- 100 entries a step: an entry there that is not pending lost its pending
-- entry (a group destroyed and recreated, a consumer deleted by hand) and is
-- re-added as a new entry, its lost delivery counted. A pass with more steps
-- runs one per Receive until it is done. Nothing runs while the queue has
-- no level in use and its stream of level 0 no group yet (the claim makes
-- it).
local function sweep(g, now, sweepEvery, orphanIdle)
  if sweepEvery <= 0 or now < tonumber(redis.call('HGET', KW, 't') or '0') then return end
  local done = true
  local ls = levels()
  table.insert(ls, 1, 0)
  for _, l in ipairs(ls) do
    local s = lstream(l)
    local sfx = l == 0 and '' or tostring(l)
    local last = last_delivered(g, s)
    if not last and #ls == 1 then return end
    if last then
      -- a pass walks up to the last-delivered id of its start ('e'): later
      -- reads would make it a moving target
      local cur = redis.call('HGET', KW, 'c' .. sfx) or '0-0'
      local stop = redis.call('HGET', KW, 'e' .. sfx) or last
      if cur == '0-0' then
        stop = last
        redis.call('HSET', KW, 'e' .. sfx, stop)
        local cs = redis.pcall('XINFO', 'CONSUMERS', s, g)
        if not is_err(cs) then
          for _, ci in ipairs(cs) do
            local m = tomap(ci)
            if not redis.call('ZSCORE', KX, m['name']) then
              if tonumber(m['pending']) > 0 then
                if tonumber(m['idle']) >= orphanIdle then redis.call('ZADD', KX, 0, m['name']) end
              elseif tonumber(m['idle']) > 3600000 then
                redis.call('XGROUP', 'DELCONSUMER', s, g, m['name'])
              end
            end
          end
        end
      end
      local es = redis.call('XRANGE', s, '(' .. cur, stop, 'COUNT', 100)
      if #es > 0 then
        local pend = {}
        for _, p in ipairs(redis.call('XPENDING', s, g, es[1][1], es[#es][1], #es)) do pend[p[1]] = true end
        for _, e in ipairs(es) do
          -- (pending entries deleted from the stream may crowd the range's
          -- reply: check a missing one alone before re-adding it)
          if not pend[e[1]] and not pel_of(g, e[1], s) then
            local n = tonumber(fget(e[2], 'n') or '0')
            xadd(g, requeue(e[2], n + 1, ''))
            redis.call('XDEL', s, e[1])
            unindex(qsid(l, e[1]), false)
          end
        end
      end
      if #es < 100 or es[#es][1] == stop then
        redis.call('HSET', KW, 'c' .. sfx, '0-0')
      else
        redis.call('HSET', KW, 'c' .. sfx, es[#es][1])
        done = false
      end
    end
  end
  if done then
    redis.call('HSET', KW, 't', now + sweepEvery)
  else
    redis.call('HSET', KW, 't', now)
  end
end

-- claim_from hands consumer c up to want entries that consumer m holds in
-- the stream of level l, calling give(qualified id, fields, attempt) for
-- each. Entries deleted behind the driver's back are dropped from the
-- pending list and their dedup keys freed. Returns how many it gave, or
-- nil when m holds nothing there.
local function claim_from(g, c, l, m, want, give)
  local s = lstream(l)
  local p = redis.pcall('XPENDING', s, g, '-', '+', want, m)
  if is_err(p) or #p == 0 then return nil end
  local ids, cnt = {}, {}
  for i, e in ipairs(p) do ids[i] = e[1]; cnt[e[1]] = tonumber(e[4]) end
  local seen = {}
  local got = 0
  for _, e in ipairs(redis.call('XCLAIM', s, g, c, 0, unpack(ids))) do
    if type(e) == 'table' and e[2] then
      seen[e[1]] = true
      give(qsid(l, e[1]), e[2], tonumber(fget(e[2], 'n') or '0') + cnt[e[1]] + 1)
      got = got + 1
    end
  end
  redis.call('SADD', KT, m)
  -- entries deleted behind the driver's back: XCLAIM dropped them from
  -- the pending list; free their dedup keys
  for _, sid in ipairs(ids) do
    if not seen[sid] then
      redis.pcall('XACK', s, g, sid)
      unindex(qsid(l, sid), true)
    end
  end
  return got
end

-- takeover hands consumer c up to want entries of level 0 of leases whose
-- deadline has passed, calling give as claim_from does; expired early
-- leases are put back instead. Returns how many it gave.
local function takeover(g, c, now, want, give)
  local got = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KX, '-inf', now, 'LIMIT', 0, want)) do
    if got >= want then break end
    if is_early(m) then
      unearly(g, m, now)
    else
      local n = claim_from(g, c, 0, m, want - got, give)
      if n then
        got = got + n
        release(g, m)
      elseif release(g, m) then
        -- A lease is deleted when it holds nothing, so its pending entries
        -- were lost (group recreated, consumer deleted): sweep now.
        redis.call('HSET', KW, 't', 0)
      end
    end
  end
  return got
end

-- take checks that token tok holds the delivery of qualified id q (at now)
-- and ends it. It returns the message's fields, attempt, id and dedup key,
-- or nil when the lease is lost. The stream entry is deleted and its dedup
-- index dropped (the key itself stays held: the caller frees it or
-- requeues the message). An early delivery's fields are removed from the
-- payloads hash.
local function take(g, q, tok, now)
  if is_early(q) then
    local att, mid, dedup = early_lease(q, tok, now)
    if not att then return nil end
    redis.call('HDEL', KL, q)
    redis.call('ZREM', KX, q)
    local f = early_fields(mid)
    if not f then
      free_dedup(dedup, mid)
      return nil
    end
    redis.call('HDEL', KP, mid)
    return f, att, mid, dedup
  end
  local l, sid = qsplit(q)
  local s = lstream(l)
  local o, cnt = pel_of(g, sid, s)
  if not o or not owns(o, tok, q, now) then return nil end
  local e = redis.call('XRANGE', s, sid, sid)
  redis.pcall('XACK', s, g, sid)
  release(g, o)
  if #e == 0 then
    unindex(q, true)
    return nil
  end
  redis.call('XDEL', s, sid)
  unindex(q, false)
  local f = e[1][2]
  return f, tonumber(fget(f, 'n') or '0') + cnt, fget(f, 'i') or '', fget(f, 'u') or ''
end

-- earliest returns the earliest lease deadline, or -1.
local function earliest()
  local b = redis.call('ZRANGE', KX, 0, 0, 'WITHSCORES')
  if #b > 0 and b[1] ~= PAD then return tonumber(b[2]) end
  return -1
end

-- next_due returns the earliest run-at or lease deadline, or -1; x is the
-- earliest lease deadline (or -1) when the caller knows it, else nil.
local function next_due(x)
  local nd = -1
  local a = redis.call('ZRANGE', KD, 0, 0, 'WITHSCORES')
  if #a > 0 and a[1] ~= PAD then nd = tonumber(a[2]) end
  if x == nil then x = earliest() end
  if x >= 0 and (nd < 0 or x < nd) then nd = x end
  return nd
end
