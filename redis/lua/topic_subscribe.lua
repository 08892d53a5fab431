-- Topic subscribe: makes a queue a subscription of the topic, its cursor at
-- the log's end, so it copies what is published from now on, or adds a
-- kind pattern to its subscription. Run after topic_prelude.lua.
-- KEYS: the topic's log, subscriptions hash and patterns hash.
--
-- ARGV: queue, pattern ('': every kind). Returns {cursor, entries-added at
-- the cursor (the subscription's, kept when it existed already), the log's
-- last id (from which the pattern applies), 1 when the subscription takes
-- every kind (else 0), its pattern lines (pat_lines; '' for every kind)}.

local q, p = ARGV[1], ARGV[2]
local since
if not redis.call('HGET', KSUBS, q) then
  if redis.call('EXISTS', KLOG) == 0 then
    -- an empty log with a last id: the cursor must exist before any event
    redis.call('XADD', KLOG, 'MAXLEN', '0', '*', 'x', '')
  end
  local info = tomap(redis.call('XINFO', 'STREAM', KLOG))
  since = info['last-generated-id']
  redis.call('HSET', KSUBS, q, since, 'n:' .. q, info['entries-added'])
  -- (a left-over pattern line of an earlier subscription goes too)
  if p == '' then
    redis.call('HDEL', KPATS, q)
  else
    redis.call('HSET', KPATS, q, since .. ' ' .. p)
  end
else
  local have = redis.call('HGET', KPATS, q)
  if redis.call('EXISTS', KLOG) == 1 then
    since = tomap(redis.call('XINFO', 'STREAM', KLOG))['last-generated-id']
  else
    since = redis.call('HGET', KSUBS, q)
  end
  -- without patterns it takes every kind already
  if have then
    if p == '' then
      redis.call('HDEL', KPATS, q)
    else
      local found = false
      for _, l in ipairs(pat_lines(have)) do
        if l[2] == p then found = true end
      end
      if not found then redis.call('HSET', KPATS, q, have .. '\n' .. since .. ' ' .. p) end
    end
  end
end
local lines = redis.call('HGET', KPATS, q)
return {redis.call('HGET', KSUBS, q), redis.call('HGET', KSUBS, 'n:' .. q) or '0', since, lines and 0 or 1, lines or ''}
