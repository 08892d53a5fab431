-- Topic advance: records how far a subscription has copied the log (never
-- backwards, never for a subscription that ended) and trims the log to what
-- the slowest one still needs. Run after topic_prelude.lua.
-- KEYS: the topic's log, subscriptions hash and patterns hash.
--
-- ARGV: queue, cursor. Returns {slowest subscription or '', its cursor or
-- '', id time (Unix ms) of the log's oldest entry or -1}.

local q, c = ARGV[1], ARGV[2]
local cur = redis.call('HGET', KSUBS, q)
if cur and sid_after(c, cur) then redis.call('HSET', KSUBS, q, c) end
local slow, min = trim()
local oldest = -1
local first = redis.call('XRANGE', KLOG, '-', '+', 'COUNT', 1)
if #first > 0 then oldest = sid_parse(first[1][1]) end
return {slow or '', min or '', oldest}
