-- Topic copy: copies events read from topic logs into the queue's stream,
-- each once: an event is copied only when it comes after the queue's cursor
-- on its topic, which then moves to it. Run after the prelude.lua helpers it
-- calls (link.go).
-- KEYS: the queue's twelve keys, named in prelude.lua, then its topics hash
-- (topic -> cursor, "n:<topic>" -> log entries counted up to the cursor).
--
-- ARGV: group, number of topics, then per topic: name, number of events,
-- then per event, in log order: log id, number of fields, fields. Returns
-- per topic its name and its cursor after the copy ('' when the queue is no
-- longer subscribed: nothing was copied).

local KTOP = KEYS[13]
local g, nt = ARGV[1], tonumber(ARGV[2])
local i = 3
local out = {}
local made = false
for _ = 1, nt do
  local name, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local cur = redis.call('HGET', KTOP, name)
  local copied = 0
  for _ = 1, n do
    local lid, nf = ARGV[i], tonumber(ARGV[i + 1])
    local first, last = i + 2, i + 1 + nf
    i = last + 1
    if cur and sid_after(lid, cur) then
      if not made then
        ensure(g)
        made = true
      end
      redis.call('XADD', KS, '*', unpack(ARGV, first, last))
      cur = lid
      copied = copied + 1
    end
  end
  if copied > 0 then
    redis.call('HSET', KTOP, name, cur)
    redis.call('HINCRBY', KTOP, 'n:' .. name, copied)
  end
  out[#out + 1] = name
  out[#out + 1] = cur or ''
end
return out
