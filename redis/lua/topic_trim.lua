-- trim, for the topic scripts that trim the log (topic_advance.lua,
-- topic_unsubscribe.lua): run after topic_prelude.lua.

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
