-- Fila schema version 17: message priorities in the skip-locked mode.
--
-- A message has a level, 0 (the default, and the lowest) to 3 (the
-- highest; backend.MaxPriority). Among a queue's claimable rows a claim
-- takes the higher levels first; a row keeps its level while it is retried
-- or its lease expires (it stays the same row), and a dead letter keeps it,
-- in dead, for its replay. priority is a new column of messages and of
-- dead: a column with a constant default is added without rewriting the
-- table (PostgreSQL 11 and later), and every row already there is of level
-- 0. The log mode's tables get no level: that mode reads a queue's stream
-- in commit order and has no priorities yet.
--
-- messages_claim becomes (queue, priority DESC, visible_at, id): within a
-- queue, each level's rows by visible_at. The claim reads the levels one
-- after the other, highest first, each with a range scan of its claimable
-- rows that ends at the first row not yet due (a single scan over the
-- whole queue in (priority DESC, visible_at, id) order would walk every
-- leased or delayed row of a level before reaching the next one), and
-- stops once it has LIMIT rows. The next due time is the least of the
-- levels' first visible_at, one probe per level, and QueueList's loose
-- index scan still finds the queues on the leading column.
--
-- The cost: CREATE INDEX reads the whole messages table, and the
-- migration runs in one transaction whose ALTER TABLE holds the table's
-- exclusive lock until it commits, so every enqueue, claim and
-- settlement of the skip-locked mode (reads of the table too) waits while
-- the index builds: two seconds per million rows on a two-CPU test server
-- with the table in memory, more when it must be read from disk. Migrate
-- while the backlog is small, or at a quiet time. The log mode's tables
-- are not touched.
ALTER TABLE {{schema}}.messages ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.dead ADD COLUMN priority smallint NOT NULL DEFAULT 0;

DROP INDEX {{schema}}.messages_claim;
CREATE INDEX messages_claim ON {{schema}}.messages (queue, priority DESC, visible_at, id);
