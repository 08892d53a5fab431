-- Topic join: records a subscription on the queue's side after
-- topic_subscribe.lua: its cursor (kept when the queue has one already)
-- and its kind patterns, with the point of the log from which each applies.
-- Run after the prelude.lua helpers it calls.
-- KEYS: the queue's topics hash and its topic patterns hash (topic -> the
-- pattern lines of pat_lines; none: every kind).
--
-- ARGV: topic, cursor, entries-added at the cursor, the log's last id, 1
-- when the subscription takes every kind (else 0), its pattern lines, as
-- topic_subscribe.lua returned them. Returns 1.

local KTOP, KQP = KEYS[1], KEYS[2]
local t, c, n, since, all, lines = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5] == '1', ARGV[6]
if not redis.call('HGET', KTOP, t) then
  redis.call('HSET', KTOP, t, c, 'n:' .. t, n)
  if all then
    redis.call('HDEL', KQP, t)
  else
    redis.call('HSET', KQP, t, lines)
  end
  return 1
end
local have = redis.call('HGET', KQP, t)
-- without patterns it takes every kind already
if not have then return 1 end
-- Add what the queue's side lacks (a concurrent subscribe may have added
-- more already), each line with its own since: a pattern applies to what
-- was published after it was added, not to the log's older events.
local known = {}
for _, l in ipairs(pat_lines(have)) do known[l[2]] = true end
local add = {}
if all then
  if not known[''] then add[1] = since .. ' ' end
else
  for _, l in ipairs(pat_lines(lines)) do
    if not known[l[2]] then
      known[l[2]] = true
      add[#add + 1] = l[1] .. ' ' .. l[2]
    end
  end
end
if #add > 0 then redis.call('HSET', KQP, t, have .. '\n' .. table.concat(add, '\n')) end
return 1
