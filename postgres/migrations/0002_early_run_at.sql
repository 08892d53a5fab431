-- Fila schema version 2: messages leased before their run-at.
--
-- A relay moving a queue to another broker may lease a delayed message
-- before its run-at (ReceiveDelayed). run_at keeps that run-at while such a
-- lease is held (NULL otherwise), so that when the lease expires unsettled
-- the message becomes claimable at the later of its deadline and its run-at,
-- never earlier.
ALTER TABLE {{schema}}.messages ADD COLUMN run_at timestamptz;

CREATE INDEX messages_early ON {{schema}}.messages (queue, run_at) WHERE run_at IS NOT NULL;
