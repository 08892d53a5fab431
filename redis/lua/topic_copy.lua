-- Topic copy: copies events read from topic logs into the queue's streams
-- (each into its level's, named by its fields), each once: an event is taken only when it comes after the queue's cursor
-- on its topic, which then moves to it, and copied only when its kind
-- matches one of the queue's patterns for the topic that applies to it (one
-- added before the event was published); the others are passed over. Run
-- after the prelude.lua helpers it calls (link.go).
-- KEYS: the queue's fifteen keys, named in prelude.lua, then its topics hash
-- (topic -> cursor, "n:<topic>" -> log entries counted up to the cursor) and
-- its topic patterns hash (topic -> pattern lines, see topic_join.lua).
--
-- ARGV: group, number of topics, then per topic: name, number of events,
-- then per event, in log order: log id, number of fields, fields. Returns
-- per topic its name and its cursor after the copy ('' when the queue is no
-- longer subscribed: nothing was copied).

local KTOP, KQP = KEYS[16], KEYS[17]
local g, nt = ARGV[1], tonumber(ARGV[2])
local i = 3
local out = {}
for _ = 1, nt do
  local name, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local cur = redis.call('HGET', KTOP, name)
  local lines = cur and redis.call('HGET', KQP, name)
  local pats, from = nil, {}
  if lines then
    pats = pat_lines(lines)
    for _, l in ipairs(pats) do l[3] = l[2] ~= '' and kwords(l[2]) end
  end
  local passed = 0
  for _ = 1, n do
    local lid, nf = ARGV[i], tonumber(ARGV[i + 1])
    local first, last = i + 2, i + 1 + nf
    i = last + 1
    if cur and sid_after(lid, cur) then
      local take = true
      if pats then
        local kind = ''
        for j = first, last - 1, 2 do
          if ARGV[j] == 'p' then kind = pkind(ARGV[j + 1]) end
        end
        -- from[kind]: the earliest since of the patterns that match kind
        -- (false: none does)
        local f = from[kind]
        if f == nil then
          f = false
          local kw = kwords(kind)
          for _, l in ipairs(pats) do
            if (not l[3] or kmatch(l[3], kw)) and (not f or sid_after(f, l[1])) then f = l[1] end
          end
          from[kind] = f
        end
        take = f and sid_after(lid, f)
      end
      if take then
        local l = 0
        for j = first, last - 1, 2 do
          if ARGV[j] == 'l' then l = tonumber(ARGV[j + 1]) end
        end
        if l ~= 1 and l ~= 2 and l ~= 3 then l = 0 end
        local s = lstream(l)
        ensure(g, s)
        redis.call('XADD', s, '*', unpack(ARGV, first, last))
      end
      cur = lid
      passed = passed + 1
    end
  end
  if passed > 0 then
    redis.call('HSET', KTOP, name, cur)
    redis.call('HINCRBY', KTOP, 'n:' .. name, passed)
    -- once the cursor passed the point from which it takes every kind, the
    -- subscription needs its patterns no more
    if pats then
      for _, l in ipairs(pats) do
        if l[2] == '' and not sid_after(l[1], cur) then
          redis.call('HDEL', KQP, name)
          break
        end
      end
    end
  end
  out[#out + 1] = name
  out[#out + 1] = cur or ''
end
return out
