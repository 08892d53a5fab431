-- Topic publish: appends a batch to the topic's log, once whatever the
-- number of subscriptions; nothing when it has none. Run after
-- topic_prelude.lua.
-- KEYS: the topic's log and subscriptions hash.
--
-- ARGV: count, then per message: number of fields, fields. Returns
-- {subscriptions, id time (Unix ms) of the log's oldest entry or -1}.

local subs = 0
for _, f in ipairs(redis.call('HKEYS', KSUBS)) do
  if string.sub(f, 1, 2) ~= 'n:' then subs = subs + 1 end
end
if subs == 0 then return {0, -1} end
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local nf = tonumber(ARGV[i])
  redis.call('XADD', KLOG, '*', unpack(ARGV, i + 1, i + nf))
  i = i + nf + 1
end
local first = redis.call('XRANGE', KLOG, '-', '+', 'COUNT', 1)
local oldest = -1
if #first > 0 then oldest = sid_parse(first[1][1]) end
return {subs, oldest}
