-- Fila schema version 1: the hot table and the dead-letter table.
--
-- messages holds every pending message of every queue: ready, delayed and
-- leased. visible_at is the one time that decides claimability: for a message
-- that is not leased it is its run-at (when it becomes ready), for a leased
-- one it is the lease deadline. A claim therefore takes the rows of a queue
-- whose visible_at has passed, which covers ready messages and expired leases
-- with one range scan of messages_claim. lease_token is the receipt of the
-- current lease (NULL when not leased).
CREATE TABLE {{schema}}.messages (
    id           uuid        PRIMARY KEY,
    queue        text        NOT NULL,
    kind         text        NOT NULL,
    body         bytea       NOT NULL,
    headers      jsonb,
    enqueued_at  timestamptz NOT NULL,
    visible_at   timestamptz NOT NULL,
    attempts     integer     NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL DEFAULT 0,
    dedup_key    text,
    lease_token  uuid,
    last_error   text
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX messages_claim ON {{schema}}.messages (queue, visible_at, id);

-- A dedup key is unique among a queue's pending messages; acked and
-- dead-lettered messages leave this table, which frees the key.
CREATE UNIQUE INDEX messages_dedup ON {{schema}}.messages (queue, dedup_key) WHERE dedup_key IS NOT NULL;

-- Dead letters live apart so the hot table stays small.
CREATE TABLE {{schema}}.dead (
    id           uuid        PRIMARY KEY,
    queue        text        NOT NULL,
    kind         text        NOT NULL,
    body         bytea       NOT NULL,
    headers      jsonb,
    enqueued_at  timestamptz NOT NULL,
    attempts     integer     NOT NULL,
    max_attempts integer     NOT NULL,
    dedup_key    text,
    reason       text        NOT NULL,
    dead_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dead_list ON {{schema}}.dead (queue, dead_at, id);
CREATE INDEX dead_kind ON {{schema}}.dead (queue, kind, dead_at, id);
