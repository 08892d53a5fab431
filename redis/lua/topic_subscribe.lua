-- Topic subscribe: makes a queue a subscription of the topic, its cursor at
-- the log's end, so it copies what is published from now on. Run after
-- topic_prelude.lua.
-- KEYS: the topic's log and subscriptions hash.
--
-- ARGV: queue. Returns {cursor, entries-added at the cursor}: the
-- subscription's, kept when it existed already.

local q = ARGV[1]
if not redis.call('HGET', KSUBS, q) then
  if redis.call('EXISTS', KLOG) == 0 then
    -- an empty log with a last id: the cursor must exist before any event
    redis.call('XADD', KLOG, 'MAXLEN', '0', '*', 'x', '')
  end
  local info = tomap(redis.call('XINFO', 'STREAM', KLOG))
  redis.call('HSET', KSUBS, q, info['last-generated-id'], 'n:' .. q, info['entries-added'])
end
return {redis.call('HGET', KSUBS, q), redis.call('HGET', KSUBS, 'n:' .. q) or '0'}
