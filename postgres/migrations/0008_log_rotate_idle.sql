-- Fila schema version 8: rotation costs nothing while nothing moves.
--
-- Rotation ran every interval whatever happened: each one updated
-- log_state twice and, by TRUNCATE, gave five partitions and their indexes
-- new files (about 23 rows of pg_class), and every third one copied the
-- rows still needed, a whole unread backlog included. Under a pinned xmin
-- horizon none of those dead catalog and state rows can be vacuumed, so an
-- idle log-mode schema slowed down with time (pg_class 0.5 -> 10.9 MiB and
-- receive p50 3.6 -> 7.4 ms after 1,619 rotations, issue 37).
--
-- Now a rotation is skipped ('idle') while nothing was written since the
-- last one: every write of a receive, an enqueue, a retry or a timer takes
-- a position from log_pos, and log_state.seen_pos remembers the position
-- at the last rotation. Rotation is garbage collection, so skipping it is
-- always safe; it resumes with the first write. And the TRUNCATE is left
-- out when the generation it would empty holds no row (checked under its
-- ACCESS EXCLUSIVE locks, so no writer can be adding one).

ALTER TABLE {{schema}}.log_state ADD COLUMN seen_pos bigint;

-- log_rotate_copy, once the current generation is p_interval_us old, copies
-- the rows of the oldest generation that are still needed into the current
-- one, keeping their identity, and records the snapshot it read them in.
-- Needed: a message some cursor has not read, or with a live lease or a
-- pending timer; the newest unsettled lease of a message; a pending timer;
-- a queue's newest cursor. Rows only ever stop being needed, so what is
-- copied from one snapshot stays enough.
CREATE OR REPLACE FUNCTION {{schema}}.log_rotate_copy(p_interval_us bigint) RETURNS text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    s {{schema}}.log_state%ROWTYPE;
    p smallint;
    v_snap pg_snapshot;
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
    -- Nothing written since the last rotation: nothing to reclaim, and a
    -- copy would only write the same rows again.
    IF s.seen_pos IS NOT NULL AND s.seen_pos = (SELECT last_value FROM {{schema}}.log_pos) THEN
        RETURN 'idle';
    END IF;
    p := (s.cur + 1) % 3;
    -- Taken before the copy reads: a row whose transaction this snapshot
    -- does not see may be missing from the copy, and makes the TRUNCATE
    -- wait for another one.
    v_snap := pg_current_snapshot();
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
    UPDATE {{schema}}.log_state SET copied = p, copied_snap = v_snap;
    RETURN 'copied ' || v_copied;
END $$;

-- log_rotate_truncate empties the copied generation with TRUNCATE and makes
-- it current. It waits at most p_lock_timeout_ms for the partitions'
-- locks; a transaction that holds one (a long enqueue, a long read) makes
-- it return 'locked', to be tried again later. A message row whose
-- transaction the copy's snapshot did not see (an enqueue whose transaction
-- read an old generation and committed after the copy) makes it return
-- 'late', and the next copy takes it.
CREATE OR REPLACE FUNCTION {{schema}}.log_rotate_truncate(p_lock_timeout_ms integer) RETURNS text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    s {{schema}}.log_state%ROWTYPE;
    v_full boolean;
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
    -- Under the lock no transaction can still write here: a row the copy's
    -- snapshot did not see committed after it, and may need copying.
    IF EXISTS (SELECT FROM {{schema}}.log_messages m
            WHERE m.gen = s.copied AND NOT pg_visible_in_snapshot(m.txid, s.copied_snap)) THEN
        UPDATE {{schema}}.log_state SET copied = NULL, copied_snap = NULL;
        RETURN 'late';
    END IF;
    -- An empty generation keeps its files: a TRUNCATE would only give
    -- its tables new ones, and pg_class a dead row for each.
    EXECUTE format('SELECT EXISTS (SELECT FROM {{schema}}.%I) OR EXISTS (SELECT FROM {{schema}}.%I)'
            ' OR EXISTS (SELECT FROM {{schema}}.%I) OR EXISTS (SELECT FROM {{schema}}.%I) OR EXISTS (SELECT FROM {{schema}}.%I)',
        'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
        'log_timers_' || s.copied, 'log_cursors_' || s.copied) INTO v_full;
    IF v_full THEN
        EXECUTE format('TRUNCATE {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I',
            'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
            'log_timers_' || s.copied, 'log_cursors_' || s.copied);
    END IF;
    UPDATE {{schema}}.log_state SET cur = s.copied, since = clock_timestamp(), copied = NULL, copied_snap = NULL,
        seen_pos = (SELECT last_value FROM {{schema}}.log_pos);
    RETURN 'rotated';
END $$;
