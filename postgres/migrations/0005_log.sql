-- Fila schema version 5: the tables and functions of the log mode
-- (fila_mode=log), which stores queues without updating or deleting a row
-- per message. docs/design.md ("PostgreSQL: the log mode") explains the
-- design; this file is its implementation.
--
-- Every row of the five log tables is only ever inserted. The tables are
-- list-partitioned by gen into three generations: new rows go to the
-- current one (log_state.cur), and rotation empties the oldest with
-- TRUNCATE after copying the rows still needed into the current one. A copy
-- keeps the row's identity (pos, and for messages txid), so readers treat
-- the copies of a row as one row (DISTINCT ON, LIMIT 1).
--
-- State is derived from the newest rows: a queue's cursor is its newest
-- log_cursors row; a message's lease is the newest log_leases row of its
-- (queue, id); a lease is settled when log_settles holds its token.
--
-- The functions run with plan_cache_mode = force_generic_plan: their
-- statements are planned once per session, not at every call (custom plans
-- of statements over the partitioned tables cost more to plan than to run).
-- A generic plan is made without statistics when autovacuum is off, or
-- from those of a partition that was small then, so the reads that must
-- stop early (a queue's newest cursor, the next rows of a batch) are
-- written per partition, each an ORDER BY ... LIMIT over one index: over
-- the partitioned parent the plan sorted every matching row of the three
-- partitions, and a queue's receives slowed down as its partitions grew.
--
-- Receives of one queue serialise on a transaction-scoped advisory lock
-- (class hashtext('fila.log.' || schema), key hashtext(queue)). Ack, Retry,
-- Dead and Extend take a lock on the lease's receipt instead, which the
-- expiry sweep takes too before it redelivers (see log_current).

CREATE SEQUENCE {{schema}}.log_pos;

CREATE TABLE {{schema}}.log_state (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    cur         smallint    NOT NULL DEFAULT 0,
    since       timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The partition whose needed rows were copied into cur, waiting for its
    -- TRUNCATE, and how many message rows it held when they were copied.
    copied      smallint,
    copied_rows bigint
);
INSERT INTO {{schema}}.log_state DEFAULT VALUES;

-- Messages: enqueued, re-appended by Retry (same id, new run-at), or
-- replayed from the dead letters. txid is the inserting transaction, which
-- decides the batch a receive reads the row in (see log_receive).
CREATE TABLE {{schema}}.log_messages (
    gen          smallint    NOT NULL,
    pos          bigint      NOT NULL DEFAULT nextval('{{schema}}.log_pos'),
    txid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    queue        text        NOT NULL,
    id           uuid        NOT NULL,
    kind         text        NOT NULL,
    body         bytea       NOT NULL,
    headers      json,
    enqueued_at  timestamptz NOT NULL,
    run_at       timestamptz NOT NULL,
    attempts     integer     NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL DEFAULT 0,
    dedup_key    text,
    last_error   text
) PARTITION BY LIST (gen);
CREATE INDEX log_messages_batch ON {{schema}}.log_messages (queue, txid, pos);
CREATE INDEX log_messages_pos ON {{schema}}.log_messages (pos);

-- Leases: one per delivery, one more per extension (same token). run_at is
-- the run-at a lease taken early (ReceiveDelayed) keeps.
CREATE TABLE {{schema}}.log_leases (
    gen      smallint    NOT NULL,
    pos      bigint      NOT NULL DEFAULT nextval('{{schema}}.log_pos'),
    queue    text        NOT NULL,
    id       uuid        NOT NULL,
    msg_pos  bigint      NOT NULL,
    attempt  integer     NOT NULL,
    token    uuid        NOT NULL,
    deadline timestamptz NOT NULL,
    run_at   timestamptz
) PARTITION BY LIST (gen);
CREATE INDEX log_leases_expiry ON {{schema}}.log_leases (queue, deadline, pos);
-- By message: its newest lease; a receipt's lease (id and token); whether
-- a timer was taken (a lease of the message after the timer).
CREATE INDEX log_leases_id ON {{schema}}.log_leases (id, queue, pos);

-- Settlements: a = ack, r = retry, d = dead.
CREATE TABLE {{schema}}.log_settles (
    gen   smallint    NOT NULL,
    queue text        NOT NULL,
    id    uuid        NOT NULL,
    token uuid        NOT NULL,
    kind  "char"      NOT NULL,
    at    timestamptz NOT NULL DEFAULT clock_timestamp()
) PARTITION BY LIST (gen);
CREATE INDEX log_settles_token ON {{schema}}.log_settles (token);

-- Timers: messages a receive read before their run-at, due at run_at.
CREATE TABLE {{schema}}.log_timers (
    gen     smallint    NOT NULL,
    pos     bigint      NOT NULL DEFAULT nextval('{{schema}}.log_pos'),
    queue   text        NOT NULL,
    id      uuid        NOT NULL,
    msg_pos bigint      NOT NULL,
    run_at  timestamptz NOT NULL
) PARTITION BY LIST (gen);
CREATE INDEX log_timers_due ON {{schema}}.log_timers (queue, run_at, pos);
CREATE INDEX log_timers_msg ON {{schema}}.log_timers (queue, msg_pos);

-- Cursors: a queue's read position. Batch (lo, hi] holds the message rows
-- whose transaction is visible in snapshot hi and not in lo; (ctxid, cpos)
-- is the last row of it taken. (lwm, lwm_pos) and (twm, twm_pos) are the
-- watermarks of the lease-expiry and timer sweeps.
CREATE TABLE {{schema}}.log_cursors (
    gen     smallint    NOT NULL,
    pos     bigint      NOT NULL DEFAULT nextval('{{schema}}.log_pos'),
    queue   text        NOT NULL,
    lo      pg_snapshot NOT NULL,
    hi      pg_snapshot NOT NULL,
    ctxid   xid8        NOT NULL,
    cpos    bigint      NOT NULL,
    lwm     timestamptz NOT NULL,
    lwm_pos bigint      NOT NULL,
    twm     timestamptz NOT NULL,
    twm_pos bigint      NOT NULL
) PARTITION BY LIST (gen);
CREATE INDEX log_cursors_queue ON {{schema}}.log_cursors (queue, pos);

-- Autovacuum is off on the partitions: they have no dead tuples to
-- remove (rotation empties them with TRUNCATE), and its ANALYZE of a
-- partition that was nearly empty then made every later plan of the
-- functions below a sequential scan (see plan_cache_mode above), which got
-- slower with every row. Without statistics the planner sizes a partition
-- by its current file and picks the indexes.
CREATE TABLE {{schema}}.log_messages_0 PARTITION OF {{schema}}.log_messages FOR VALUES IN (0) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_messages_1 PARTITION OF {{schema}}.log_messages FOR VALUES IN (1) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_messages_2 PARTITION OF {{schema}}.log_messages FOR VALUES IN (2) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_leases_0 PARTITION OF {{schema}}.log_leases FOR VALUES IN (0) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_leases_1 PARTITION OF {{schema}}.log_leases FOR VALUES IN (1) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_leases_2 PARTITION OF {{schema}}.log_leases FOR VALUES IN (2) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_settles_0 PARTITION OF {{schema}}.log_settles FOR VALUES IN (0) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_settles_1 PARTITION OF {{schema}}.log_settles FOR VALUES IN (1) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_settles_2 PARTITION OF {{schema}}.log_settles FOR VALUES IN (2) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_timers_0 PARTITION OF {{schema}}.log_timers FOR VALUES IN (0) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_timers_1 PARTITION OF {{schema}}.log_timers FOR VALUES IN (1) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_timers_2 PARTITION OF {{schema}}.log_timers FOR VALUES IN (2) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_cursors_0 PARTITION OF {{schema}}.log_cursors FOR VALUES IN (0) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_cursors_1 PARTITION OF {{schema}}.log_cursors FOR VALUES IN (1) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_cursors_2 PARTITION OF {{schema}}.log_cursors FOR VALUES IN (2) WITH (autovacuum_enabled = false);

-- Dedup keys of pending messages: the one table of the mode with a row
-- deleted per message, and only per message that has a key.
CREATE TABLE {{schema}}.log_dedup (
    queue text NOT NULL,
    key   text NOT NULL,
    id    uuid NOT NULL,
    PRIMARY KEY (queue, key)
);
CREATE INDEX log_dedup_id ON {{schema}}.log_dedup (id);

-- Dead letters and marks of the log mode's queues, apart from the other
-- mode's, so a relay can move a queue between the modes in one schema.
CREATE TABLE {{schema}}.log_dead (LIKE {{schema}}.dead INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE {{schema}}.log_dead ADD PRIMARY KEY (id);
CREATE INDEX log_dead_list ON {{schema}}.log_dead (queue, dead_at, id);
CREATE INDEX log_dead_kind ON {{schema}}.log_dead (queue, kind, dead_at, id);
CREATE TABLE {{schema}}.log_marks (LIKE {{schema}}.marks INCLUDING ALL);

-- log_current returns the newest lease of the message if token is its
-- receipt, it has not expired and it is not settled; else NULL. It holds
-- the token's advisory lock until the transaction ends, so settlements of
-- one lease are one after the other, and the expiry sweep, which takes the
-- same lock before it redelivers, never overlaps one: a settlement that
-- committed is never also redelivered.
CREATE FUNCTION {{schema}}.log_current(p_id uuid, p_token uuid) RETURNS {{schema}}.log_leases
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l {{schema}}.log_leases%ROWTYPE;
BEGIN
    SELECT * INTO l FROM {{schema}}.log_leases x WHERE x.token = p_token AND x.id = p_id LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(p_token::text));
    SELECT * INTO l FROM {{schema}}.log_leases x WHERE x.queue = l.queue AND x.id = p_id ORDER BY x.pos DESC LIMIT 1;
    IF l.token <> p_token OR l.deadline <= clock_timestamp() THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = p_token) THEN
        RETURN NULL;
    END IF;
    RETURN l;
END $$;

-- log_cursor returns the queue's cursor, or the start for a queue without
-- one: every committed row is after it.
CREATE FUNCTION {{schema}}.log_cursor(p_queue text) RETURNS {{schema}}.log_cursors
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan STABLE AS $$
DECLARE
    c {{schema}}.log_cursors%ROWTYPE;
BEGIN
    SELECT * INTO c FROM {{schema}}.log_cursors k WHERE k.queue = p_queue ORDER BY k.pos DESC LIMIT 1;
    IF NOT FOUND THEN
        c.queue := p_queue;
        c.lo := '1:1:';
        c.hi := '1:1:';
        c.ctxid := '0';
        c.cpos := 0;
        c.lwm := '-infinity';
        c.lwm_pos := 0;
        c.twm := '-infinity';
        c.twm_pos := 0;
    END IF;
    RETURN c;
END $$;

-- log_receive leases up to p_max messages of the queue for p_lease_us
-- microseconds: first messages whose lease expired unsettled (attempt + 1),
-- then due timers, then the rows of the queue's batches in order. A batch
-- row whose run-at is ahead becomes a timer. The last column is the due
-- time the message had before this lease.
CREATE FUNCTION {{schema}}.log_receive(p_queue text, p_max integer, p_lease_us bigint, p_early boolean DEFAULT false)
RETURNS TABLE (id text, kind text, body bytea, headers json, enqueued_at timestamptz, attempts integer,
    max_attempts integer, dedup_key text, token text, deadline timestamptz, last_error text, was timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    c          {{schema}}.log_cursors%ROWTYPE;
    v_now      timestamptz;
    v_deadline timestamptz;
    v_gen      smallint;
    v_n        integer := 0;
    v_changed  boolean := false;
    v_done     boolean;
    v_snap     pg_snapshot;
    v_lox      xid8;
    v_hix      xid8;
    v_xip      xid8[];
    v_tok      uuid;
    v_att      integer;
    v_limit    integer;
    v_got      integer;
    v_lwm      timestamptz;
    v_lwm_pos  bigint;
    v_ticks    integer := 0;
    -- The leases of this call, inserted together at its end.
    a_id       uuid[] := '{}';
    a_pos      bigint[] := '{}';
    a_att      integer[] := '{}';
    a_tok      uuid[] := '{}';
    a_run      timestamptz[] := '{}';
    r          record;
    m          {{schema}}.log_messages%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue));
    PERFORM set_config('synchronous_commit', 'off', true);
    v_now := clock_timestamp();
    v_deadline := NULL;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    SELECT * INTO c FROM (
        (SELECT * FROM {{schema}}.log_cursors_0 k WHERE k.queue = p_queue ORDER BY k.pos DESC LIMIT 1)
        UNION ALL
        (SELECT * FROM {{schema}}.log_cursors_1 k WHERE k.queue = p_queue ORDER BY k.pos DESC LIMIT 1)
        UNION ALL
        (SELECT * FROM {{schema}}.log_cursors_2 k WHERE k.queue = p_queue ORDER BY k.pos DESC LIMIT 1)
    ) k ORDER BY k.pos DESC LIMIT 1;
    IF NOT FOUND THEN
        c := {{schema}}.log_cursor(p_queue);
    END IF;

    IF NOT p_early THEN
        -- Leases that ended unsettled since the previous sweep, 256 at a
        -- time, each chunk read per partition (see plan_cache_mode above).
        <<sweep>>
        LOOP
        v_got := 0;
        FOR r IN SELECT DISTINCT ON (l.deadline, l.pos) l.* FROM (
                (SELECT * FROM {{schema}}.log_leases_0 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT * FROM {{schema}}.log_leases_1 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT * FROM {{schema}}.log_leases_2 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
            ) l
            ORDER BY l.deadline, l.pos LIMIT 256
        LOOP
            v_got := v_got + 1;
            EXIT sweep WHEN v_n >= p_max;
            v_lwm := c.lwm;
            v_lwm_pos := c.lwm_pos;
            c.lwm := r.deadline;
            c.lwm_pos := r.pos;
            v_changed := true;
            CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l2
                    WHERE l2.queue = p_queue AND l2.id = r.id AND l2.pos > r.pos)
                OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token);
            -- A settlement of this lease in flight holds its lock: stop
            -- here (the watermark stays before it) and let it finish.
            IF NOT pg_try_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(r.token::text)) THEN
                c.lwm := v_lwm;
                c.lwm_pos := v_lwm_pos;
                EXIT sweep;
            END IF;
            CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l2
                    WHERE l2.queue = p_queue AND l2.id = r.id AND l2.pos > r.pos)
                OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token);
            IF r.run_at IS NOT NULL AND r.run_at > v_now THEN
                -- Taken early (ReceiveDelayed): wait for the run-at again.
                INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                VALUES (v_gen, p_queue, r.id, r.msg_pos, r.run_at);
                CONTINUE;
            END IF;
            SELECT * INTO m FROM {{schema}}.log_messages x WHERE x.pos = r.msg_pos LIMIT 1;
            CONTINUE WHEN NOT FOUND;
            v_tok := gen_random_uuid();
            a_id := a_id || m.id; a_pos := a_pos || m.pos; a_att := a_att || (r.attempt + 1);
            a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
            id := m.id::text; kind := m.kind; body := m.body; headers := m.headers;
            enqueued_at := m.enqueued_at; attempts := r.attempt + 1; max_attempts := m.max_attempts;
            dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
            last_error := COALESCE(m.last_error, ''); was := r.deadline;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
        EXIT sweep WHEN v_got < 256;
        END LOOP sweep;

        -- Timers that came due since the previous sweep, the same way.
        <<timers>>
        LOOP
        v_got := 0;
        FOR r IN SELECT DISTINCT ON (t.run_at, t.pos) t.* FROM (
                (SELECT * FROM {{schema}}.log_timers_0 t WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos) AND t.run_at <= v_now ORDER BY t.run_at, t.pos LIMIT 256)
                UNION ALL
                (SELECT * FROM {{schema}}.log_timers_1 t WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos) AND t.run_at <= v_now ORDER BY t.run_at, t.pos LIMIT 256)
                UNION ALL
                (SELECT * FROM {{schema}}.log_timers_2 t WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos) AND t.run_at <= v_now ORDER BY t.run_at, t.pos LIMIT 256)
            ) t
            ORDER BY t.run_at, t.pos LIMIT 256
        LOOP
            v_got := v_got + 1;
            EXIT timers WHEN v_n >= p_max;
            c.twm := r.run_at;
            c.twm_pos := r.pos;
            v_changed := true;
            -- A lease after the timer: ReceiveDelayed took it early.
            CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l
                WHERE l.id = r.id AND l.queue = p_queue AND l.pos > r.pos);
            SELECT * INTO m FROM {{schema}}.log_messages x WHERE x.pos = r.msg_pos LIMIT 1;
            CONTINUE WHEN NOT FOUND;
            v_tok := gen_random_uuid();
            a_id := a_id || m.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
            a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
            id := m.id::text; kind := m.kind; body := m.body; headers := m.headers;
            enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
            dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
            last_error := COALESCE(m.last_error, ''); was := r.run_at;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
        EXIT timers WHEN v_got < 256;
        END LOOP timers;
    END IF;

    -- The batches: rows visible in snapshot hi and not in lo, by (txid,
    -- pos). Not visible in lo means txid in xip(lo) or txid >= xmax(lo):
    -- read as two index range scans, the first (smaller txids) before the
    -- second, LIMIT rows at a time so the plan is an ordered index scan
    -- that stops early (one OR would scan the whole queue).
    LOOP
        EXIT WHEN v_n >= p_max;
        v_lox := pg_snapshot_xmax(c.lo);
        v_hix := pg_snapshot_xmax(c.hi);
        v_xip := ARRAY(SELECT x FROM pg_snapshot_xip(c.lo) AS x WHERE x >= c.ctxid ORDER BY x);
        v_done := true;
        LOOP
            v_limit := p_max - v_n;
            v_got := 0;
            IF cardinality(v_xip) > 0 AND c.ctxid < v_lox THEN
                FOR m IN SELECT DISTINCT ON (b.txid, b.pos) b.* FROM (
                        (SELECT * FROM {{schema}}.log_messages_0 b WHERE b.queue = p_queue AND b.txid = ANY (v_xip) AND (b.txid, b.pos) > (c.ctxid, c.cpos)
                            AND pg_visible_in_snapshot(b.txid, c.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_1 b WHERE b.queue = p_queue AND b.txid = ANY (v_xip) AND (b.txid, b.pos) > (c.ctxid, c.cpos)
                            AND pg_visible_in_snapshot(b.txid, c.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_2 b WHERE b.queue = p_queue AND b.txid = ANY (v_xip) AND (b.txid, b.pos) > (c.ctxid, c.cpos)
                            AND pg_visible_in_snapshot(b.txid, c.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    ) b
                    ORDER BY b.txid, b.pos LIMIT v_limit
                LOOP
                    v_got := v_got + 1;
                    IF p_early AND m.run_at <= v_now THEN
                        v_done := false;
                        EXIT;
                    END IF;
                    c.ctxid := m.txid;
                    c.cpos := m.pos;
                    v_changed := true;
                    IF m.run_at > v_now THEN
                        INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                        VALUES (v_gen, p_queue, m.id, m.pos, m.run_at);
                        CONTINUE;
                    END IF;
                    v_tok := gen_random_uuid();
                    a_id := a_id || m.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
                    a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
                    id := m.id::text; kind := m.kind; body := m.body; headers := m.headers;
                    enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
                    dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
                    last_error := COALESCE(m.last_error, ''); was := m.run_at;
                    RETURN NEXT;
                    v_n := v_n + 1;
                END LOOP;
                EXIT WHEN NOT v_done;
                IF v_got = v_limit THEN
                    CONTINUE WHEN v_n < p_max;
                    v_done := false;
                    EXIT;
                END IF;
                -- The xip part is read: go on after it.
                c.ctxid := v_lox;
                c.cpos := 0;
                v_xip := '{}';
                v_got := 0;
            END IF;
            FOR m IN SELECT DISTINCT ON (b.txid, b.pos) b.* FROM (
                        (SELECT * FROM {{schema}}.log_messages_0 b WHERE b.queue = p_queue AND b.txid >= v_lox AND b.txid < v_hix AND (b.txid, b.pos) > (c.ctxid, c.cpos)
                            AND pg_visible_in_snapshot(b.txid, c.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_1 b WHERE b.queue = p_queue AND b.txid >= v_lox AND b.txid < v_hix AND (b.txid, b.pos) > (c.ctxid, c.cpos)
                            AND pg_visible_in_snapshot(b.txid, c.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_2 b WHERE b.queue = p_queue AND b.txid >= v_lox AND b.txid < v_hix AND (b.txid, b.pos) > (c.ctxid, c.cpos)
                            AND pg_visible_in_snapshot(b.txid, c.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                ) b
                ORDER BY b.txid, b.pos LIMIT v_limit
            LOOP
                v_got := v_got + 1;
                IF p_early AND m.run_at <= v_now THEN
                    v_done := false;
                    EXIT;
                END IF;
                c.ctxid := m.txid;
                c.cpos := m.pos;
                v_changed := true;
                IF m.run_at > v_now THEN
                    INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                    VALUES (v_gen, p_queue, m.id, m.pos, m.run_at);
                    CONTINUE;
                END IF;
                v_tok := gen_random_uuid();
                a_id := a_id || m.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
                a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
                id := m.id::text; kind := m.kind; body := m.body; headers := m.headers;
                enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
                dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
                last_error := COALESCE(m.last_error, ''); was := m.run_at;
                RETURN NEXT;
                v_n := v_n + 1;
            END LOOP;
            EXIT WHEN NOT v_done;
            EXIT WHEN v_got < v_limit; -- batch read to its end
            IF v_n >= p_max THEN
                v_done := false; -- full: the batch may hold more
                EXIT;
            END IF;
            -- Some rows became timers: read on.
        END LOOP;
        EXIT WHEN NOT v_done;
        -- Batch consumed: the next one ends at the current snapshot. The
        -- same snapshot again means no transaction ended since: nothing new.
        -- At most two new batches per call: on a busy server the snapshot
        -- changes between any two reads (every commit changes it), so a
        -- receive that kept ticking while the queue had nothing new spun
        -- through empty batches (it took most of the CPU at 500 msg/s).
        EXIT WHEN v_ticks >= 2;
        v_ticks := v_ticks + 1;
        v_snap := pg_current_snapshot();
        EXIT WHEN v_snap::text = c.hi::text;
        c.lo := c.hi;
        c.hi := v_snap;
        c.ctxid := '0';
        c.cpos := 0;
        -- An empty batch need not be stored: the next receive reads the
        -- same rows from the older lo.
    END LOOP;

    IF p_early THEN
        -- Delayed messages, soonest first, leased before their run-at,
        -- which the lease keeps.
        FOR r IN SELECT DISTINCT ON (t.run_at, t.pos) t.* FROM {{schema}}.log_timers t
            WHERE t.queue = p_queue AND t.run_at > v_now AND (t.run_at, t.pos) > (c.twm, c.twm_pos)
            ORDER BY t.run_at, t.pos
        LOOP
            EXIT WHEN v_n >= p_max;
            CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l
                WHERE l.id = r.id AND l.queue = p_queue AND l.pos > r.pos);
            SELECT * INTO m FROM {{schema}}.log_messages x WHERE x.pos = r.msg_pos LIMIT 1;
            CONTINUE WHEN NOT FOUND;
            v_tok := gen_random_uuid();
            a_id := a_id || m.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
            a_tok := a_tok || v_tok; a_run := a_run || r.run_at::timestamptz;
            id := m.id::text; kind := m.kind; body := m.body; headers := m.headers;
            enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
            dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
            last_error := COALESCE(m.last_error, ''); was := r.run_at;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
    END IF;

    IF cardinality(a_id) > 0 THEN
        INSERT INTO {{schema}}.log_leases (gen, queue, id, msg_pos, attempt, token, deadline, run_at)
        SELECT v_gen, p_queue, x.id, x.pos, x.att, x.tok, v_deadline, x.run
        FROM unnest(a_id, a_pos, a_att, a_tok, a_run) AS x(id, pos, att, tok, run);
    END IF;
    IF v_changed THEN
        INSERT INTO {{schema}}.log_cursors (gen, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
        VALUES (v_gen, p_queue, c.lo, c.hi, c.ctxid, c.cpos, c.lwm, c.lwm_pos, c.twm, c.twm_pos);
    END IF;
    -- For a receive that found nothing: how long until the next lease
    -- deadline or timer after the watermarks, in microseconds, read by the
    -- statement that follows in the same transaction.
    IF v_n = 0 AND NOT p_early THEN
        PERFORM set_config('fila.next_due', COALESCE((extract(epoch FROM (LEAST(
            (SELECT l.deadline FROM {{schema}}.log_leases l
             WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) ORDER BY l.deadline, l.pos LIMIT 1),
            (SELECT t.run_at FROM {{schema}}.log_timers t
             WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos) ORDER BY t.run_at, t.pos LIMIT 1))
            - clock_timestamp())) * 1e6)::int8::text, ''), true);
    ELSE
        PERFORM set_config('fila.next_due', '', true);
    END IF;
END $$;

-- log_ack settles the current leases among the refs and returns their ids,
-- in one statement for the whole batch. The receipts' locks are taken
-- first, in key order so two calls settling the same leases cannot
-- deadlock; the settling statement then runs on a snapshot taken after
-- them (see log_current).
CREATE FUNCTION {{schema}}.log_ack(p_ids uuid[], p_tokens uuid[]) RETURNS SETOF text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_gen smallint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), k.k)
    FROM (SELECT DISTINCT hashtext(t::text) AS k FROM unnest(p_tokens) AS t ORDER BY 1) k;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    RETURN QUERY WITH u AS (
        SELECT DISTINCT ON (t.token) t.id, t.token FROM unnest(p_ids, p_tokens) AS t(id, token) ORDER BY t.token
    ), s AS (
        INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind)
        SELECT v_gen, l.queue, l.id, l.token, 'a' FROM u
        CROSS JOIN LATERAL (SELECT x.queue FROM {{schema}}.log_leases x WHERE x.token = u.token AND x.id = u.id LIMIT 1) f
        CROSS JOIN LATERAL (SELECT x.* FROM {{schema}}.log_leases x
            WHERE x.queue = f.queue AND x.id = u.id ORDER BY x.pos DESC LIMIT 1) l
        WHERE l.token = u.token AND l.deadline > clock_timestamp()
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles z WHERE z.token = u.token)
        RETURNING queue, id
    ), d AS (
        DELETE FROM {{schema}}.log_dedup k USING s WHERE k.id = s.id AND k.queue = s.queue
    )
    SELECT s.id::text FROM s;
END $$;

-- log_retry ends the lease and re-appends the message with its new run-at
-- (no earlier than the run-at an early lease kept) and last error. It
-- returns the queue, or nothing when the lease is not current.
CREATE FUNCTION {{schema}}.log_retry(p_id uuid, p_token uuid, p_delay_us bigint, p_reason text) RETURNS SETOF text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l     {{schema}}.log_leases%ROWTYPE;
    v_gen smallint;
BEGIN
    l := {{schema}}.log_current(p_id, p_token);
    IF l.pos IS NULL THEN
        RETURN;
    END IF;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind) VALUES (v_gen, l.queue, l.id, l.token, 'r');
    INSERT INTO {{schema}}.log_messages (gen, queue, id, kind, body, headers, enqueued_at, run_at, attempts,
        max_attempts, dedup_key, last_error)
    SELECT v_gen, m.queue, m.id, m.kind, m.body, m.headers, m.enqueued_at,
        GREATEST(now() + p_delay_us * interval '1 microsecond', l.run_at), l.attempt, m.max_attempts, m.dedup_key,
        COALESCE(NULLIF(p_reason, ''), m.last_error)
    FROM {{schema}}.log_messages m WHERE m.pos = l.msg_pos LIMIT 1;
    RETURN NEXT l.queue;
END $$;

-- log_bury ends the lease and stores the message as a dead letter. It
-- returns one row, or none when the lease is not current.
CREATE FUNCTION {{schema}}.log_bury(p_id uuid, p_token uuid, p_reason text, p_attempts integer) RETURNS SETOF integer
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l     {{schema}}.log_leases%ROWTYPE;
    v_gen smallint;
BEGIN
    l := {{schema}}.log_current(p_id, p_token);
    IF l.pos IS NULL THEN
        RETURN;
    END IF;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind) VALUES (v_gen, l.queue, l.id, l.token, 'd');
    INSERT INTO {{schema}}.log_dead (id, queue, kind, body, headers, enqueued_at, attempts, max_attempts, dedup_key, reason)
    SELECT m.id, m.queue, m.kind, m.body, m.headers, m.enqueued_at, p_attempts, m.max_attempts, m.dedup_key, p_reason
    FROM {{schema}}.log_messages m WHERE m.pos = l.msg_pos LIMIT 1
    ON CONFLICT (id) DO UPDATE SET queue = EXCLUDED.queue, kind = EXCLUDED.kind, body = EXCLUDED.body,
        headers = EXCLUDED.headers, enqueued_at = EXCLUDED.enqueued_at, attempts = EXCLUDED.attempts,
        max_attempts = EXCLUDED.max_attempts, dedup_key = EXCLUDED.dedup_key, reason = EXCLUDED.reason,
        dead_at = now();
    DELETE FROM {{schema}}.log_dedup k WHERE k.id = l.id AND k.queue = l.queue;
    RETURN NEXT 1;
END $$;

-- log_extend appends a lease row with the same receipt and a new deadline.
CREATE FUNCTION {{schema}}.log_extend(p_id uuid, p_token uuid, p_lease_us bigint) RETURNS SETOF timestamptz
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l     {{schema}}.log_leases%ROWTYPE;
    v_gen smallint;
    v     timestamptz;
BEGIN
    l := {{schema}}.log_current(p_id, p_token);
    IF l.pos IS NULL THEN
        RETURN;
    END IF;
    -- Shared with receives: the new deadline is read after any sweep that
    -- could pass it has ended, so no sweep's watermark is past it.
    PERFORM pg_advisory_xact_lock_shared(hashtext('fila.log.{{schema}}'), hashtext(l.queue));
    IF l.deadline <= clock_timestamp() THEN
        RETURN; -- ended while this call waited
    END IF;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    v := clock_timestamp() + p_lease_us * interval '1 microsecond';
    INSERT INTO {{schema}}.log_leases (gen, queue, id, msg_pos, attempt, token, deadline, run_at)
    VALUES (v_gen, l.queue, l.id, l.msg_pos, l.attempt, l.token, v, l.run_at);
    RETURN NEXT v;
END $$;

-- log_stats counts the queue's messages: rows not yet read by its cursor,
-- pending timers and unsettled leases (expired ones count as ready).
CREATE FUNCTION {{schema}}.log_stats(p_queue text, OUT ready bigint, OUT delayed bigint, OUT leased bigint,
    OUT oldest timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan STABLE AS $$
DECLARE
    c     {{schema}}.log_cursors%ROWTYPE;
    v_now timestamptz := clock_timestamp();
    v_lox xid8;
    v_xip xid8[];
BEGIN
    c := {{schema}}.log_cursor(p_queue);
    v_lox := pg_snapshot_xmax(c.lo);
    v_xip := ARRAY(SELECT pg_snapshot_xip(c.lo));
    WITH unread AS (
        SELECT DISTINCT ON (x.pos) x.run_at FROM (
            SELECT a.pos, a.txid, a.run_at FROM {{schema}}.log_messages a WHERE a.queue = p_queue AND a.txid >= v_lox
            UNION ALL
            SELECT b.pos, b.txid, b.run_at FROM {{schema}}.log_messages b WHERE b.queue = p_queue AND b.txid = ANY (v_xip)
        ) x
        WHERE NOT (pg_visible_in_snapshot(x.txid, c.hi) AND (x.txid, x.pos) <= (c.ctxid, c.cpos))
    ), timers AS (
        SELECT DISTINCT ON (t.pos) t.run_at FROM {{schema}}.log_timers t
        WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l WHERE l.id = t.id AND l.queue = p_queue AND l.pos > t.pos)
    ), leases AS (
        SELECT DISTINCT ON (l.pos) l.deadline, l.run_at FROM {{schema}}.log_leases l
        WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = p_queue AND l2.id = l.id AND l2.pos > l.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = l.token)
    ), due AS (
        SELECT run_at AS at, false AS held FROM unread
        UNION ALL SELECT run_at, false FROM timers
        UNION ALL SELECT CASE WHEN deadline > v_now THEN deadline ELSE GREATEST(deadline, run_at) END,
            deadline > v_now FROM leases
    )
    SELECT count(*) FILTER (WHERE NOT held AND at <= v_now),
        count(*) FILTER (WHERE NOT held AND at > v_now),
        count(*) FILTER (WHERE held),
        min(at) FILTER (WHERE NOT held AND at <= v_now)
    INTO ready, delayed, leased, oldest
    FROM due;
END $$;

-- log_queue_delete deletes everything the queue holds in the log mode. It
-- is the mode's one statement that deletes rows in bulk; rotation's
-- TRUNCATE reclaims them. It takes the rotation lock too: a rotation copy
-- that read the queue's rows before the delete would write them back.
CREATE FUNCTION {{schema}}.log_queue_delete(p_queue text) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.rotate.{{schema}}'), 0);
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue));
    DELETE FROM {{schema}}.log_messages WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_leases WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_settles WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_timers WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_cursors WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_dedup WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_dead WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_marks WHERE queue = p_queue;
END $$;

-- log_rotate_copy, once the current generation is p_interval_us old, copies
-- the rows of the oldest generation that are still needed into the current
-- one, keeping their identity, and records how many message rows the
-- oldest held before the copy. Needed: a message some cursor has not read,
-- or with a live lease or a pending timer; the newest unsettled lease of a
-- message; a pending timer; a queue's newest cursor. Rows only ever stop
-- being needed, so what is copied from one snapshot stays enough.
CREATE FUNCTION {{schema}}.log_rotate_copy(p_interval_us bigint) RETURNS text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    s {{schema}}.log_state%ROWTYPE;
    p smallint;
    n bigint;
    v_copied bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('fila.log.rotate.{{schema}}'), 0) THEN
        RETURN 'busy';
    END IF;
    SELECT * INTO s FROM {{schema}}.log_state;
    IF s.copied IS NOT NULL THEN
        RETURN 'copied';
    END IF;
    IF clock_timestamp() < s.since + p_interval_us * interval '1 microsecond' THEN
        RETURN 'not due';
    END IF;
    p := (s.cur + 1) % 3;
    -- Counted before the copy reads: rows that commit in between make the
    -- TRUNCATE find more rows than counted and wait for another copy.
    SELECT count(*) INTO n FROM {{schema}}.log_messages WHERE gen = p;
    WITH mc AS (
        INSERT INTO {{schema}}.log_messages (gen, pos, txid, queue, id, kind, body, headers, enqueued_at, run_at,
            attempts, max_attempts, dedup_key, last_error)
        SELECT s.cur, m.pos, m.txid, m.queue, m.id, m.kind, m.body, m.headers, m.enqueued_at, m.run_at,
            m.attempts, m.max_attempts, m.dedup_key, m.last_error
        FROM {{schema}}.log_messages m
        -- The queue's cursor, in this statement's snapshot, per partition so
        -- that each is one index probe.
        LEFT JOIN LATERAL (SELECT * FROM (
            (SELECT * FROM {{schema}}.log_cursors_0 k WHERE k.queue = m.queue ORDER BY k.pos DESC LIMIT 1)
            UNION ALL
            (SELECT * FROM {{schema}}.log_cursors_1 k WHERE k.queue = m.queue ORDER BY k.pos DESC LIMIT 1)
            UNION ALL
            (SELECT * FROM {{schema}}.log_cursors_2 k WHERE k.queue = m.queue ORDER BY k.pos DESC LIMIT 1)
        ) k ORDER BY k.pos DESC LIMIT 1) k ON true
        WHERE m.gen = p
            AND NOT EXISTS (SELECT FROM {{schema}}.log_messages m2 WHERE m2.pos = m.pos AND m2.gen <> p)
            AND (k.pos IS NULL
                OR (NOT pg_visible_in_snapshot(m.txid, k.lo)
                    AND NOT (pg_visible_in_snapshot(m.txid, k.hi) AND (m.txid, m.pos) <= (k.ctxid, k.cpos)))
                OR EXISTS (SELECT FROM {{schema}}.log_leases l
                    WHERE l.id = m.id AND l.queue = m.queue AND l.msg_pos = m.pos
                        AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = l.queue AND l2.id = l.id AND l2.pos > l.pos)
                        AND NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = l.token))
                OR EXISTS (SELECT FROM {{schema}}.log_timers t
                    WHERE t.queue = m.queue AND t.msg_pos = m.pos
                        AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l WHERE l.id = t.id AND l.queue = t.queue AND l.pos > t.pos)))
        RETURNING 1
    ), lc AS (
        INSERT INTO {{schema}}.log_leases (gen, pos, queue, id, msg_pos, attempt, token, deadline, run_at)
        SELECT s.cur, l.pos, l.queue, l.id, l.msg_pos, l.attempt, l.token, l.deadline, l.run_at
        FROM {{schema}}.log_leases l
        WHERE l.gen = p
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = l.queue AND l2.id = l.id AND l2.pos > l.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l3 WHERE l3.queue = l.queue AND l3.id = l.id AND l3.pos = l.pos AND l3.gen <> p)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = l.token)
        RETURNING 1
    ), tc AS (
        INSERT INTO {{schema}}.log_timers (gen, pos, queue, id, msg_pos, run_at)
        SELECT s.cur, t.pos, t.queue, t.id, t.msg_pos, t.run_at
        FROM {{schema}}.log_timers t
        WHERE t.gen = p
            AND NOT EXISTS (SELECT FROM {{schema}}.log_timers t2 WHERE t2.queue = t.queue AND t2.run_at = t.run_at AND t2.pos = t.pos AND t2.gen <> p)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l WHERE l.id = t.id AND l.queue = t.queue AND l.pos > t.pos)
        RETURNING 1
    ), cc AS (
        INSERT INTO {{schema}}.log_cursors (gen, pos, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
        SELECT s.cur, k.pos, k.queue, k.lo, k.hi, k.ctxid, k.cpos, k.lwm, k.lwm_pos, k.twm, k.twm_pos
        FROM {{schema}}.log_cursors k
        WHERE k.gen = p
            AND NOT EXISTS (SELECT FROM {{schema}}.log_cursors k2 WHERE k2.queue = k.queue AND k2.pos >= k.pos AND k2.gen <> p)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_cursors k3 WHERE k3.queue = k.queue AND k3.pos > k.pos)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM mc) + (SELECT count(*) FROM lc) + (SELECT count(*) FROM tc) + (SELECT count(*) FROM cc)
    INTO v_copied;
    UPDATE {{schema}}.log_state SET copied = p, copied_rows = n;
    RETURN 'copied ' || v_copied;
END $$;

-- log_rotate_truncate empties the copied generation with TRUNCATE and makes
-- it current. It waits at most p_lock_timeout_ms for the partitions'
-- locks; a transaction that holds one (a long enqueue, a long read) makes
-- it return 'locked', to be tried again later. A message row that committed
-- in the generation after its copy (an enqueue whose transaction read an
-- old generation) makes it return 'late', and the next copy takes it.
CREATE FUNCTION {{schema}}.log_rotate_truncate(p_lock_timeout_ms integer) RETURNS text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    s {{schema}}.log_state%ROWTYPE;
    n bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('fila.log.rotate.{{schema}}'), 0) THEN
        RETURN 'busy';
    END IF;
    SELECT * INTO s FROM {{schema}}.log_state;
    IF s.copied IS NULL THEN
        RETURN 'not copied';
    END IF;
    PERFORM set_config('lock_timeout', p_lock_timeout_ms::text || 'ms', true);
    BEGIN
        EXECUTE format('LOCK TABLE {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I IN ACCESS EXCLUSIVE MODE',
            'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
            'log_timers_' || s.copied, 'log_cursors_' || s.copied);
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'locked';
    END;
    SELECT count(*) INTO n FROM {{schema}}.log_messages WHERE gen = s.copied;
    IF n <> s.copied_rows THEN
        UPDATE {{schema}}.log_state SET copied = NULL, copied_rows = NULL;
        RETURN 'late';
    END IF;
    EXECUTE format('TRUNCATE {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I',
        'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
        'log_timers_' || s.copied, 'log_cursors_' || s.copied);
    UPDATE {{schema}}.log_state SET cur = s.copied, since = clock_timestamp(), copied = NULL, copied_rows = NULL;
    RETURN 'rotated';
END $$;
