-- The start of the scripts that run on a topic's keys (topic_publish.lua,
-- topic_subscribe.lua, topic_advance.lua, topic_unsubscribe.lua): the keys,
-- and trim. Like every script, a topic script is linked (link.go) after
-- prelude.lua's head and the helpers it names.
--
-- A topic has a log, a stream of the events published to it (fields as a
-- queue's entries, the message id being the published one), and a hash of
-- its subscriptions: queue -> the stream id up to which that queue has
-- copied the log (a lower bound: the queue's own "topics" hash holds the
-- exact one), and "n:<queue>" -> the log's entries-added count when the
-- queue subscribed. Queue names have no ':', so the two never meet.

local KLOG, KSUBS = KEYS[1], KEYS[2]

-- trim deletes the log's entries that every subscription has copied: those
-- up to the lowest cursor. Without subscriptions, it deletes them all.
-- Returns the slowest subscription and its cursor, or nil.
local function trim()
  local all = redis.call('HGETALL', KSUBS)
  local slow, min
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) ~= 'n:' and (min == nil or sid_after(min, all[i + 1])) then
      slow, min = all[i], all[i + 1]
    end
  end
  if redis.call('EXISTS', KLOG) == 0 then return slow, min end
  if min then
    local ms, seq = sid_parse(min)
    redis.call('XTRIM', KLOG, 'MINID', string.format('%.0f-%.0f', ms, seq + 1))
  else
    redis.call('XTRIM', KLOG, 'MAXLEN', 0)
  end
  return slow, min
end
