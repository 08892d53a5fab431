-- MarkGet: reports a mark (marks.go). Run after mark_prelude.lua.
-- KEYS: the queue's marks key. ARGV: name. Returns 1 for a live mark, else 0.

if live(redis.call('ZSCORE', KM, ARGV[1]), now_ms()) then return 1 end
return 0
