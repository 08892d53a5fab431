-- Schema version 10: a topic's retention and rewind in the log mode.
--
-- Retention: rotation keeps a topic's rows for p_retention_us after their
-- enqueue (the driver's fila_topic_retention), even once every
-- subscription has read them, so that a subscription can read them again.
-- A kept row is copied at every rotation that empties its generation, as
-- an unread one is: the cost is one copy per row and three rotation
-- intervals of retention.
--
-- Rewind: log_topic_rewind moves a subscription's cursor to a point in
-- time (see there).

DROP FUNCTION {{schema}}.log_rotate_copy(bigint);

CREATE FUNCTION {{schema}}.log_rotate_copy(p_interval_us bigint, p_retention_us bigint DEFAULT 0) RETURNS text
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
    -- qc: the sweep watermarks of every queue holding claims, leases or
    -- timers. A sweep passes a lease, claim or timer only once it is
    -- settled, superseded or delivered again, so what lies before them is
    -- needed by nobody. live: the message rows the others still need.
    -- sc: each subscription's cursor over its topic's stream. Each is
    -- computed once: per message row, the lease and cursor probes (a copy
    -- id hashed per row and subscription) made a copy of a busy topic take
    -- longer than a rotation interval.
    WITH qc AS MATERIALIZED (
        SELECT q.queue, c.lwm, c.lwm_pos, c.twm, c.twm_pos
        FROM (SELECT x.queue FROM {{schema}}.log_claims x
            UNION SELECT x.queue FROM {{schema}}.log_leases x
            UNION SELECT x.queue FROM {{schema}}.log_timers x) q
        CROSS JOIN LATERAL {{schema}}.log_newest_cursor(q.queue) c
    ), live AS MATERIALIZED (
        SELECT u.pos FROM {{schema}}.log_claims k
        JOIN qc ON qc.queue = k.queue AND (k.deadline, k.pos) > (qc.lwm, qc.lwm_pos)
        CROSS JOIN LATERAL unnest(k.ids, k.msg_pos) AS u(id, pos)
        WHERE NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = k.token AND x.id IS NULL)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = k.token AND x.id = u.id)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = k.queue AND l2.id = u.id AND l2.pos > k.pos)
        UNION
        SELECT l.msg_pos FROM {{schema}}.log_leases l
        JOIN qc ON qc.queue = l.queue AND (l.deadline, l.pos) > (qc.lwm, qc.lwm_pos)
        WHERE NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = l.queue AND l2.id = l.id AND l2.pos > l.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = l.token AND (x.id = l.id OR x.id IS NULL))
        UNION
        SELECT t.msg_pos FROM {{schema}}.log_timers t
        JOIN qc ON qc.queue = t.queue AND (t.run_at, t.pos) > (qc.twm, qc.twm_pos)
        WHERE NOT EXISTS (SELECT FROM {{schema}}.log_leases l WHERE l.id = t.id AND l.queue = t.queue AND l.pos > t.pos)
    ), sc AS MATERIALIZED (
        SELECT '~t:' || substr(sm.queue, 12) AS stream, c.lo, c.hi, c.ctxid, c.cpos
        FROM {{schema}}.log_marks sm
        CROSS JOIN LATERAL {{schema}}.log_newest_cursor('~s:' || substr(sm.name, 5) || '/' || substr(sm.queue, 12)) c
        WHERE sm.name >= 'sub/' AND sm.name < 'sub0' AND left(sm.queue, 11) = 'fila.topic.'
            AND (sm.until IS NULL OR sm.until > now())
    ), mc AS (
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
            AND (m.pos IN (SELECT live.pos FROM live)
                OR CASE WHEN left(m.queue, 3) <> '~t:' THEN k.pos IS NULL
                    OR (NOT pg_visible_in_snapshot(m.txid, k.lo)
                        AND NOT (pg_visible_in_snapshot(m.txid, k.hi) AND (m.txid, m.pos) <= (k.ctxid, k.cpos)))
                -- A topic's row: kept for the retention period, and
                -- after it while a subscription has not read it.
                ELSE (p_retention_us > 0 AND m.enqueued_at > clock_timestamp() - p_retention_us * interval '1 microsecond')
                    OR EXISTS (SELECT FROM sc WHERE sc.stream = m.queue
                    AND NOT pg_visible_in_snapshot(m.txid, sc.lo)
                    AND NOT (pg_visible_in_snapshot(m.txid, sc.hi) AND (m.txid, m.pos) <= (sc.ctxid, sc.cpos)))
                END)
        RETURNING 1
    ), lc AS (
        INSERT INTO {{schema}}.log_leases (gen, pos, queue, id, msg_pos, attempt, token, deadline, run_at)
        SELECT s.cur, l.pos, l.queue, l.id, l.msg_pos, l.attempt, l.token, l.deadline, l.run_at
        FROM {{schema}}.log_leases l
        JOIN qc ON qc.queue = l.queue AND (l.deadline, l.pos) > (qc.lwm, qc.lwm_pos)
        WHERE l.gen = p
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = l.queue AND l2.id = l.id AND l2.pos > l.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l3 WHERE l3.queue = l.queue AND l3.id = l.id AND l3.pos = l.pos AND l3.gen <> p)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = l.token AND (x.id = l.id OR x.id IS NULL))
        RETURNING 1
    ), kc AS (
        -- A claim is copied with its live members only: the settlements
        -- of the others are not copied, and go with their generation.
        INSERT INTO {{schema}}.log_claims (gen, pos, queue, token, deadline, ids, msg_pos, attempts)
        SELECT s.cur, k.pos, k.queue, k.token, k.deadline, lv.ids, lv.msg_pos, lv.attempts
        FROM {{schema}}.log_claims k
        JOIN qc ON qc.queue = k.queue AND (k.deadline, k.pos) > (qc.lwm, qc.lwm_pos)
        CROSS JOIN LATERAL (
            SELECT array_agg(u.id ORDER BY u.ord) AS ids, array_agg(u.pos ORDER BY u.ord) AS msg_pos,
                array_agg(u.att ORDER BY u.ord) AS attempts
            FROM unnest(k.ids, k.msg_pos, k.attempts) WITH ORDINALITY AS u(id, pos, att, ord)
            WHERE NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = k.token AND x.id = u.id)
                AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = k.queue AND l2.id = u.id AND l2.pos > k.pos)
        ) lv
        WHERE k.gen = p AND lv.ids IS NOT NULL
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = k.token AND x.id IS NULL)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_claims k2 WHERE k2.pos = k.pos AND k2.gen <> p)
        RETURNING 1
    ), tc AS (
        INSERT INTO {{schema}}.log_timers (gen, pos, queue, id, msg_pos, run_at)
        SELECT s.cur, t.pos, t.queue, t.id, t.msg_pos, t.run_at
        FROM {{schema}}.log_timers t
        JOIN qc ON qc.queue = t.queue AND (t.run_at, t.pos) > (qc.twm, qc.twm_pos)
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
    SELECT (SELECT count(*) FROM mc) + (SELECT count(*) FROM lc) + (SELECT count(*) FROM kc) + (SELECT count(*) FROM tc)
        + (SELECT count(*) FROM cc)
    INTO v_copied;
    UPDATE {{schema}}.log_state SET copied = p, copied_snap = v_snap;
    RETURN 'copied ' || v_copied;
END $$;

-- log_topic_rewind moves subscription p_queue of p_topic to p_to: the
-- topic's rows from the first one enqueued at or after p_to (in the log's
-- order: by transaction, then position) are read again, the rows before
-- it are not, whether read already or not. The new cursor is a snapshot
-- whose xmin and xmax are that row's transaction: every transaction before
-- it counts as read, it and every later one as unread, so each row stamped
-- p_to or later is read again (with a row of a later transaction stamped a
-- little earlier). With no row at or after p_to the cursor moves to the
-- current snapshot, as a fresh subscribe's (what was unread is skipped).
-- The subscription's unsettled leases of the rows read again (its own
-- leases and claim members, expired or not) are settled with kind 'w', so
-- their holders' acks report the lease lost, the sweep does not deliver
-- them again besides the new read, and each row has one holder at a time. It
-- runs under the queue's receive lock, and returns false when p_queue is
-- not subscribed to p_topic.
CREATE FUNCTION {{schema}}.log_topic_rewind(p_topic text, p_queue text, p_to timestamptz) RETURNS boolean
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_snap   pg_snapshot;
    v_lo     pg_snapshot;
    v_x      xid8;
    v_gen    smallint;
    v_stream text := '~t:' || p_topic;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue));
    IF NOT EXISTS (SELECT FROM {{schema}}.log_marks mk WHERE mk.queue = 'fila.topic.' || p_topic
            AND mk.name = 'sub/' || p_queue AND (mk.until IS NULL OR mk.until > now())) THEN
        RETURN false;
    END IF;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    v_snap := pg_current_snapshot();
    SELECT m.txid INTO v_x FROM {{schema}}.log_messages m
    WHERE m.queue = v_stream AND m.enqueued_at >= p_to
    ORDER BY m.txid, m.pos LIMIT 1;
    IF v_x IS NULL THEN
        v_lo := v_snap;
    ELSE
        v_lo := (v_x::text || ':' || v_x::text || ':')::pg_snapshot;
        -- One holder at a time: the leases of the rows read again end.
        INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind)
        SELECT DISTINCT v_gen, l.queue, l.id, l.token, 'w'
        FROM {{schema}}.log_leases l
        JOIN {{schema}}.log_messages m ON m.pos = l.msg_pos
        WHERE l.queue = p_queue
            AND m.queue = v_stream AND m.txid >= v_x
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = l.token AND (s.id = l.id OR s.id IS NULL));
        INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind)
        SELECT DISTINCT v_gen, k.queue, u.id, k.token, 'w'
        FROM {{schema}}.log_claims k
        CROSS JOIN LATERAL unnest(k.ids, k.msg_pos) AS u(id, pos)
        JOIN {{schema}}.log_messages m ON m.pos = u.pos
        WHERE k.queue = p_queue
            AND m.queue = v_stream AND m.txid >= v_x
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = k.token AND (s.id = u.id OR s.id IS NULL));
    END IF;
    INSERT INTO {{schema}}.log_cursors (gen, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
    VALUES (v_gen, '~s:' || p_queue || '/' || p_topic, v_lo, v_snap, '0', 0, '-infinity', 0, '-infinity', 0);
    RETURN true;
END $$;
