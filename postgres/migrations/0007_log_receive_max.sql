-- Fila schema version 7: log_receive never returns more than p_max rows,
-- and ReceiveDelayed (p_early) reads past ready rows.
--
-- After the part of a batch that reads the transactions in progress at its
-- start (a late commit) returned fewer rows than its limit, the range scan
-- that follows kept that limit instead of what was left of p_max: a
-- Receive(Max 5) could return 7 deliveries, and a worker that counted its
-- free slots by Max then blocked forever (TestLogReceiveNeverOverMax).
--
-- An early read (ReceiveDelayed) stopped at the first ready row of a
-- batch, so a delayed message behind ready ones was never found. It now
-- reads on, leaving each ready row to Receive as a timer that is due at
-- once: at its run-at, or at the timer watermark if that is later, so the
-- next timer sweep takes it (conformance: ReceiveDelayedBehindReady).
--
-- The function is otherwise the same as in version 5.

-- log_receive leases up to p_max messages of the queue for p_lease_us
-- microseconds: first messages whose lease expired unsettled (attempt + 1),
-- then due timers, then the rows of the queue's batches in order. A batch
-- row whose run-at is ahead becomes a timer. The last column is the due
-- time the message had before this lease.
CREATE OR REPLACE FUNCTION {{schema}}.log_receive(p_queue text, p_max integer, p_lease_us bigint, p_early boolean DEFAULT false)
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
                        -- Ready: left to Receive as a timer due now, so
                        -- that the delayed rows behind it are read too.
                        c.ctxid := m.txid;
                        c.cpos := m.pos;
                        v_changed := true;
                        INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                        VALUES (v_gen, p_queue, m.id, m.pos, GREATEST(m.run_at, c.twm));
                        CONTINUE;
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
                -- The xip part is read: go on after it, with what is
                -- left of p_max as the limit.
                c.ctxid := v_lox;
                c.cpos := 0;
                v_xip := '{}';
                v_got := 0;
                v_limit := p_max - v_n;
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
                    -- Ready: left to Receive as a timer due now (above).
                    c.ctxid := m.txid;
                    c.cpos := m.pos;
                    v_changed := true;
                    INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                    VALUES (v_gen, p_queue, m.id, m.pos, GREATEST(m.run_at, c.twm));
                    CONTINUE;
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
