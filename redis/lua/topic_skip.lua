-- Topic skip: moves a queue's cursor on a topic forward to a given point of
-- the log (QueueDelete: the deleted queue does not copy what was published
-- before), never backwards. Run after the prelude.lua helpers it calls.
-- KEYS: the queue's topics hash.
--
-- ARGV: topic, cursor, the log's entries-added count at the cursor.
-- Returns 1, or 0 when the queue is not subscribed.

local KTOP = KEYS[1]
local t, c, n = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('HGET', KTOP, t)
if not cur then return 0 end
if sid_after(c, cur) then redis.call('HSET', KTOP, t, c, 'n:' .. t, n) end
return 1
