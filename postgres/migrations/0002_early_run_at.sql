-- Fila schema version 2: messages leased before their run-at.
--
-- A relay moving a queue to another broker may lease a delayed message
-- before its run-at (ReceiveDelayed). run_at keeps that run-at while such a
-- lease is held (NULL otherwise), so that when the lease expires unsettled
-- the message goes back to waiting for its run-at instead of becoming ready
-- early. It is rare, so it has no index: the claim checks it on the rows it
-- already picked.
ALTER TABLE {{schema}}.messages ADD COLUMN run_at timestamptz;
