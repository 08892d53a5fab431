-- Topic publish: appends a batch to the topic's log, once whatever the
-- number of subscriptions: the messages whose kind some subscription's
-- patterns match (every one when a subscription takes every kind); nothing
-- when none does. Run after topic_prelude.lua.
-- KEYS: the topic's log, subscriptions hash and patterns hash.
--
-- ARGV: 1 to return the log's oldest entry time (else 0), 1 to return the
-- subscriptions that take a message of the batch (else 0), count, then per
-- message: number of fields, fields. Returns {subscriptions that take a
-- message of the batch, id time (Unix ms) of the log's oldest entry, or -1
-- when not asked or empty, then those subscriptions when asked}.

-- every subscription has two fields in KSUBS (its cursor and its count);
-- those with patterns have a line list in KPATS as well
local n = math.floor(redis.call('HLEN', KSUBS) / 2)
if n == 0 then return {0, -1} end
local pats = redis.call('HGETALL', KPATS)
local plain = math.max(n - #pats / 2, 0)
local ask = ARGV[2] == '1'
local subs, names = plain, {}
local every = plain > 0
if every and ask then
  local have = tomap(pats)
  for _, q in ipairs(redis.call('HKEYS', KSUBS)) do
    if string.sub(q, 1, 2) ~= 'n:' and not have[q] then names[#names + 1] = q end
  end
end
-- the messages, and their kinds
local msgs, kinds, kw = {}, {}, {}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local nf = tonumber(ARGV[i])
  local kind = ''
  if #pats > 0 then
    for j = i + 1, i + nf - 1, 2 do
      if ARGV[j] == 'p' then kind = pkind(ARGV[j + 1]) end
    end
    if not kw[kind] then
      kw[kind] = kwords(kind)
      kinds[#kinds + 1] = kind
    end
  end
  msgs[#msgs + 1] = {i + 1, i + nf, kind}
  i = i + nf + 1
end
-- which subscriptions with patterns take a message, which kinds are taken
local taken = {}
local memo = {} -- pattern -> kind -> match
for j = 1, #pats, 2 do
  local got = false
  for _, l in ipairs(pat_lines(pats[j + 1])) do
    local p = l[2]
    local m = memo[p]
    if not m then
      m = {}
      local pw = kwords(p)
      for _, k in ipairs(kinds) do m[k] = p == '' or kmatch(pw, kw[k]) end
      memo[p] = m
    end
    for _, k in ipairs(kinds) do
      if m[k] then
        got = true
        taken[k] = true
      end
    end
  end
  if got then
    subs = subs + 1
    if ask then names[#names + 1] = pats[j] end
  end
end
if subs == 0 then return {0, -1} end
for _, m in ipairs(msgs) do
  if every or taken[m[3]] then redis.call('XADD', KLOG, '*', unpack(ARGV, m[1], m[2])) end
end
local oldest = -1
if ARGV[1] == '1' then
  local first = redis.call('XRANGE', KLOG, '-', '+', 'COUNT', 1)
  if #first > 0 then oldest = sid_parse(first[1][1]) end
end
local out = {subs, oldest}
for _, q in ipairs(names) do out[#out + 1] = q end
return out
