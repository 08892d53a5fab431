-- Topic unsubscribe: ends a subscription, with its patterns, and trims the
-- log to what the others still need; the last one's end deletes the log.
-- Run after topic_prelude.lua.
-- KEYS: the topic's log, subscriptions hash and patterns hash.
--
-- ARGV: queue. Returns 1.

redis.call('HDEL', KSUBS, ARGV[1], 'n:' .. ARGV[1])
redis.call('HDEL', KPATS, ARGV[1])
if redis.call('EXISTS', KSUBS) == 0 then
  redis.call('DEL', KLOG)
else
  trim()
end
return 1
