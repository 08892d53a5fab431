-- Topic publish: appends a batch to the topic's log, once whatever the
-- number of subscriptions; nothing when it has none. Run after
-- topic_prelude.lua.
-- KEYS: the topic's log and subscriptions hash.
--
-- ARGV: 1 to return the log's oldest entry time (else 0), count, then per
-- message: number of fields, fields. Returns {subscriptions, id time (Unix
-- ms) of the log's oldest entry, or -1 when not asked or empty}.

-- every subscription has two fields (its cursor and its count)
local subs = math.floor(redis.call('HLEN', KSUBS) / 2)
if subs == 0 then return {0, -1} end
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local nf = tonumber(ARGV[i])
  redis.call('XADD', KLOG, '*', unpack(ARGV, i + 1, i + nf))
  i = i + nf + 1
end
local oldest = -1
if ARGV[1] == '1' then
  local first = redis.call('XRANGE', KLOG, '-', '+', 'COUNT', 1)
  if #first > 0 then oldest = sid_parse(first[1][1]) end
end
return {subs, oldest}
