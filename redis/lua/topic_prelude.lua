-- The start of the scripts that run on a topic's keys (topic_publish.lua,
-- topic_subscribe.lua, topic_advance.lua, topic_unsubscribe.lua): the keys.
-- Like every script, a topic script is linked (link.go) after prelude.lua's
-- head and the helpers it names.
--
-- A topic has a log, a stream of the events published to it (fields as a
-- queue's entries, the message id being the published one), and a hash of
-- its subscriptions: queue -> the stream id up to which that queue has
-- copied the log (a lower bound: the queue's own "topics" hash holds the
-- exact one), and "n:<queue>" -> the log's entries-added count when the
-- queue subscribed. Queue names have no ':', so the two never meet. A third
-- hash holds the kind patterns of the subscriptions that have some: queue
-- -> one "<since> <pattern>" line per pattern (pat_lines); a subscription
-- without one takes every kind.

local KLOG, KSUBS, KPATS = KEYS[1], KEYS[2], KEYS[3]
