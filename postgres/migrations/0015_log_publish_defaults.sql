-- Fila schema version 15: a publish by COPY takes one round trip.
--
-- A publish by COPY (the driver's publishCopy) read the topic's
-- subscriptions, the generation and now() in a first round trip and wrote
-- the generation and each row's run-at into the COPY's rows in a second.
-- It now sends one simple query: a first statement reads the subscriptions
-- and puts the generation and whether there are subscriptions into
-- transaction-local settings, and the COPY after it, in the same implicit
-- transaction, takes the generation and the run-at from these defaults and
-- keeps its rows only when there are subscriptions. Both defaults are
-- stable, not volatile, so COPY still inserts a page at a time. A row
-- written without the setting fails (current_setting raises), so a
-- generation is never guessed.

ALTER TABLE {{schema}}.log_messages ALTER COLUMN gen SET DEFAULT current_setting('fila.log_gen')::smallint;
ALTER TABLE {{schema}}.log_messages ALTER COLUMN run_at SET DEFAULT now();
