-- Fila schema version 19: a claim skips the level streams it has read to
-- their end.
--
-- log_claim_levels (version 18) looked at a level stream whenever the
-- stream held a row, and a level stream keeps its rows until rotation:
-- once drained, each claim still read its cursor and ran one or two batch
-- statements that found nothing. In a backlog mixing the four levels a
-- claim below the top level paid that for each level above it (the burn-
-- down ran at x0.67-0.70 of one level's). The probe of each level stream
-- now asks for a row the stream's cursor has not passed (see the stream
-- loop below); the rest of the function is version 18's.

CREATE OR REPLACE FUNCTION {{schema}}.log_claim_levels(p_queue text, p_max integer, p_lease_us bigint, p_early boolean DEFAULT false)
RETURNS TABLE (id text, kind text, body bytea, headers json, enqueued_at timestamptz, attempts integer,
    max_attempts integer, dedup_key text, token text, deadline timestamptz, last_error text, was timestamptz,
    priority smallint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
#variable_conflict use_column
DECLARE
    c          {{schema}}.log_cursors%ROWTYPE;
    -- The cursor of the stream being read: c itself for the queue's own
    -- stream, a subscription's cursor for a topic's.
    k          {{schema}}.log_cursors%ROWTYPE;
    v_now      timestamptz;
    v_deadline timestamptz;
    v_gen      smallint;
    v_n        integer := 0;
    v_changed  boolean := false;
    v_kchanged boolean;
    v_done     boolean;
    v_snap     pg_snapshot;
    v_lox      xid8;
    v_hix      xid8;
    v_xip      xid8[];
    v_tok      uuid;
    v_limit    integer;
    v_got      integer;
    v_lwm      timestamptz;
    v_lwm_pos  bigint;
    v_ticks    integer;
    v_topic    text;
    v_stream   text;
    v_key      text;
    v_xipart   boolean;
    -- From the opening statement: the first lease or claim deadline after
    -- the lease watermark, the first timer after the timer watermark, the
    -- subscribed topics, and whether the queue's own stream holds a row.
    v_lhead    timestamptz;
    v_thead    timestamptz;
    v_topics   text[];
    -- Each subscribed topic's kind regular expression (NULL: every kind),
    -- in v_topics' order, and the one of the stream being read.
    v_res      text[];
    v_re       text;
    v_ti       integer := 0;
    v_own      boolean;
    -- Whether one of the queue's level streams holds a row (the opening
    -- statement's probe), how many of them the stream loop reads (3 or 0),
    -- the stream loop's index, and the level of the stream being read.
    v_levels   boolean;
    v_nlev     integer := 0;
    v_si       integer;
    v_lvl      smallint;
    v_nostream boolean;
    -- A sweep ran (the watermarks moved: the next due time is read again),
    -- and the first run-at of the timers this call's batches wrote.
    v_swept    boolean := false;
    v_tmin     timestamptz;
    -- Where the range part of a batch read starts: xmax(lo), or the
    -- cursor once past it.
    v_rtx      xid8;
    v_rpos     bigint;
    -- The claim of this call: its token, and the first 8 bytes every
    -- member's receipt shares (the rest is the member's position).
    v_ctok     uuid;
    v_ckey     bytea;
    v_cpfx     text;
    v_s        text[];
    v_all      boolean;
    i          integer;
    -- The runs of the positions of the batch rows this call's claim
    -- leases, and the number of parts they were read in.
    c_runs     bigint[] := '{}';
    v_parts    integer := 0;
    -- The leases of this call, inserted together at its end.
    a_id       uuid[] := '{}';
    a_pos      bigint[] := '{}';
    a_att      integer[] := '{}';
    a_tok      uuid[] := '{}';
    a_run      timestamptz[] := '{}';
    r          record;
    mb         record;
    m          {{schema}}.log_messages%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue)),
        set_config('synchronous_commit', 'off', true);
    v_now := clock_timestamp();
    v_deadline := NULL;
    -- The opening statement (see the top of this file). Each probe is an
    -- index scan per partition that stops at its first row.
    SELECT s.cur, kc.gen, kc.pos, kc.queue, kc.lo, kc.hi, kc.ctxid, kc.cpos, kc.lwm, kc.lwm_pos, kc.twm, kc.twm_pos,
        h.lhead, h.thead,
        ARRAY(SELECT substr(mk.queue, 12) FROM {{schema}}.log_marks mk
            WHERE mk.name = 'sub/' || p_queue AND left(mk.queue, 11) = 'fila.topic.'
                AND (mk.until IS NULL OR mk.until > now())
            ORDER BY mk.queue),
        ARRAY(SELECT mk.kinds_re FROM {{schema}}.log_marks mk
            WHERE mk.name = 'sub/' || p_queue AND left(mk.queue, 11) = 'fila.topic.'
                AND (mk.until IS NULL OR mk.until > now())
            ORDER BY mk.queue),
        EXISTS (
            (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = p_queue ORDER BY x.txid, x.pos LIMIT 1)),
        -- The level streams: an index probe per stream and partition,
        -- each stopping at its first row (one scan per partition over the
        -- three names, with queue = ANY, was planned as a sequential scan).
        EXISTS (
            (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = '~p3:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = '~p3:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = '~p3:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = '~p2:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = '~p2:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = '~p2:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = '~p1:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = '~p1:' || p_queue ORDER BY x.txid, x.pos LIMIT 1)
            UNION ALL
            (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = '~p1:' || p_queue ORDER BY x.txid, x.pos LIMIT 1))
    INTO v_gen, c.gen, c.pos, c.queue, c.lo, c.hi, c.ctxid, c.cpos, c.lwm, c.lwm_pos, c.twm, c.twm_pos,
        v_lhead, v_thead, v_topics, v_res, v_own, v_levels
    FROM {{schema}}.log_state s
    LEFT JOIN LATERAL (
        SELECT * FROM (
            (SELECT * FROM {{schema}}.log_cursors_0 x WHERE x.queue = p_queue ORDER BY x.pos DESC LIMIT 1)
            UNION ALL
            (SELECT * FROM {{schema}}.log_cursors_1 x WHERE x.queue = p_queue ORDER BY x.pos DESC LIMIT 1)
            UNION ALL
            (SELECT * FROM {{schema}}.log_cursors_2 x WHERE x.queue = p_queue ORDER BY x.pos DESC LIMIT 1)
        ) x ORDER BY x.pos DESC LIMIT 1) kc ON true
    CROSS JOIN LATERAL (SELECT COALESCE(kc.lwm, '-infinity') AS lwm, COALESCE(kc.lwm_pos, 0) AS lwm_pos,
        COALESCE(kc.twm, '-infinity') AS twm, COALESCE(kc.twm_pos, 0) AS twm_pos) w
    CROSS JOIN LATERAL (SELECT
        (SELECT min(d.deadline) FROM (
            (SELECT l.deadline FROM {{schema}}.log_leases_0 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (w.lwm, w.lwm_pos) ORDER BY l.deadline, l.pos LIMIT 1)
            UNION ALL
            (SELECT l.deadline FROM {{schema}}.log_leases_1 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (w.lwm, w.lwm_pos) ORDER BY l.deadline, l.pos LIMIT 1)
            UNION ALL
            (SELECT l.deadline FROM {{schema}}.log_leases_2 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (w.lwm, w.lwm_pos) ORDER BY l.deadline, l.pos LIMIT 1)
            UNION ALL
            (SELECT k.deadline FROM {{schema}}.log_claims_0 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (w.lwm, w.lwm_pos) ORDER BY k.deadline, k.pos LIMIT 1)
            UNION ALL
            (SELECT k.deadline FROM {{schema}}.log_claims_1 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (w.lwm, w.lwm_pos) ORDER BY k.deadline, k.pos LIMIT 1)
            UNION ALL
            (SELECT k.deadline FROM {{schema}}.log_claims_2 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (w.lwm, w.lwm_pos) ORDER BY k.deadline, k.pos LIMIT 1)
        ) d) AS lhead,
        (SELECT min(d.run_at) FROM (
            (SELECT t.run_at FROM {{schema}}.log_timers_0 t WHERE t.queue = p_queue AND (t.run_at, t.pos) > (w.twm, w.twm_pos) ORDER BY t.run_at, t.pos LIMIT 1)
            UNION ALL
            (SELECT t.run_at FROM {{schema}}.log_timers_1 t WHERE t.queue = p_queue AND (t.run_at, t.pos) > (w.twm, w.twm_pos) ORDER BY t.run_at, t.pos LIMIT 1)
            UNION ALL
            (SELECT t.run_at FROM {{schema}}.log_timers_2 t WHERE t.queue = p_queue AND (t.run_at, t.pos) > (w.twm, w.twm_pos) ORDER BY t.run_at, t.pos LIMIT 1)
        ) d) AS thead) h;
    IF c.queue IS NULL THEN
        -- No cursor yet: the start (log_newest_cursor's).
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

    -- Nothing due: no sweep (the heads are the next due times).
    IF NOT p_early AND v_lhead <= v_now THEN
        v_swept := true;
        -- Leases and claims that ended unsettled since the previous sweep,
        -- in (deadline, pos) order, 256 at a time, each chunk read per
        -- partition (see plan_cache_mode above). A lease's id is the
        -- delivered id (a topic row's copy id), so it, not the message
        -- row's, is delivered again.
        <<sweep>>
        LOOP
        v_got := 0;
        FOR r IN SELECT DISTINCT ON (l.deadline, l.pos) l.* FROM (
                (SELECT l.deadline, l.pos, l.id, l.msg_pos, l.attempt, l.token, l.run_at, NULL::bigint[] AS runs
                    FROM {{schema}}.log_leases_0 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT l.deadline, l.pos, l.id, l.msg_pos, l.attempt, l.token, l.run_at, NULL::bigint[]
                    FROM {{schema}}.log_leases_1 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT l.deadline, l.pos, l.id, l.msg_pos, l.attempt, l.token, l.run_at, NULL::bigint[]
                    FROM {{schema}}.log_leases_2 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT k.deadline, k.pos, NULL::uuid, NULL::bigint, NULL::integer, k.token, NULL::timestamptz, k.runs
                    FROM {{schema}}.log_claims_0 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) AND k.deadline <= v_now ORDER BY k.deadline, k.pos LIMIT 256)
                UNION ALL
                (SELECT k.deadline, k.pos, NULL::uuid, NULL::bigint, NULL::integer, k.token, NULL::timestamptz, k.runs
                    FROM {{schema}}.log_claims_1 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) AND k.deadline <= v_now ORDER BY k.deadline, k.pos LIMIT 256)
                UNION ALL
                (SELECT k.deadline, k.pos, NULL::uuid, NULL::bigint, NULL::integer, k.token, NULL::timestamptz, k.runs
                    FROM {{schema}}.log_claims_2 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) AND k.deadline <= v_now ORDER BY k.deadline, k.pos LIMIT 256)
            ) l
            ORDER BY l.deadline, l.pos LIMIT 256
        LOOP
            v_got := v_got + 1;
            EXIT sweep WHEN v_n >= p_max;
            IF r.runs IS NOT NULL THEN
                -- A claim: its members neither settled nor leased again
                -- since are delivered again. The watermark passes the claim
                -- once all of them are; a call that fills up before leaves
                -- it for the next, which skips the members leased here.
                IF NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND s.id IS NULL) THEN
                    IF NOT pg_try_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(r.token::text)) THEN
                        EXIT sweep; -- a settlement in flight: let it finish
                    END IF;
                    v_all := true;
                    -- Settled as a whole meanwhile: nothing to deliver.
                    IF NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND s.id IS NULL) THEN
                    FOR mb IN SELECT * FROM {{schema}}.log_members(p_queue, r.runs) LOOP
                        CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l2
                                WHERE l2.queue = p_queue AND l2.id = mb.id AND l2.pos > r.pos)
                            OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND s.id = mb.id);
                        IF v_n >= p_max THEN
                            v_all := false;
                            EXIT;
                        END IF;
                        SELECT * INTO m FROM {{schema}}.log_messages x WHERE x.pos = mb.pos LIMIT 1;
                        CONTINUE WHEN NOT FOUND;
                        v_tok := gen_random_uuid();
                        a_id := a_id || mb.id; a_pos := a_pos || m.pos; a_att := a_att || (mb.attempt + 1);
                        a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
                        id := mb.id::text; kind := m.kind; body := m.body; headers := m.headers;
                        enqueued_at := m.enqueued_at; attempts := mb.attempt + 1; max_attempts := m.max_attempts;
                        dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
                        v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
                        deadline := v_deadline;
                        last_error := COALESCE(m.last_error, ''); was := r.deadline; priority := m.priority;
                        RETURN NEXT;
                        v_n := v_n + 1;
                    END LOOP;
                    END IF;
                    EXIT sweep WHEN NOT v_all;
                END IF;
                c.lwm := r.deadline;
                c.lwm_pos := r.pos;
                v_changed := true;
                CONTINUE;
            END IF;
            v_lwm := c.lwm;
            v_lwm_pos := c.lwm_pos;
            c.lwm := r.deadline;
            c.lwm_pos := r.pos;
            v_changed := true;
            CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l2
                    WHERE l2.queue = p_queue AND l2.id = r.id AND l2.pos > r.pos)
                OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND (s.id = r.id OR s.id IS NULL));
            -- A settlement of this lease in flight holds its lock: stop
            -- here (the watermark stays before it) and let it finish.
            IF NOT pg_try_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(r.token::text)) THEN
                c.lwm := v_lwm;
                c.lwm_pos := v_lwm_pos;
                EXIT sweep;
            END IF;
            CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l2
                    WHERE l2.queue = p_queue AND l2.id = r.id AND l2.pos > r.pos)
                OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND (s.id = r.id OR s.id IS NULL));
            IF r.run_at IS NOT NULL AND r.run_at > v_now THEN
                -- Taken early (ReceiveDelayed): wait for the run-at again.
                INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                VALUES (v_gen, p_queue, r.id, r.msg_pos, r.run_at);
                CONTINUE;
            END IF;
            SELECT * INTO m FROM {{schema}}.log_messages x WHERE x.pos = r.msg_pos LIMIT 1;
            CONTINUE WHEN NOT FOUND;
            v_tok := gen_random_uuid();
            a_id := a_id || r.id; a_pos := a_pos || m.pos; a_att := a_att || (r.attempt + 1);
            a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
            id := r.id::text; kind := m.kind; body := m.body; headers := m.headers;
            enqueued_at := m.enqueued_at; attempts := r.attempt + 1; max_attempts := m.max_attempts;
            dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
            last_error := COALESCE(m.last_error, ''); was := r.deadline; priority := m.priority;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
        EXIT sweep WHEN v_got < 256;
        END LOOP sweep;
    END IF;

    IF NOT p_early AND v_thead <= v_now THEN
        v_swept := true;
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
            a_id := a_id || r.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
            a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
            id := r.id::text; kind := m.kind; body := m.body; headers := m.headers;
            enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
            dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
            last_error := COALESCE(m.last_error, ''); was := r.run_at; priority := m.priority;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
        EXIT timers WHEN v_got < 256;
        END LOOP timers;
    END IF;

    -- The streams: the queue's level streams, highest first, then its own
    -- (level 0), then each subscribed topic's, through the subscription's
    -- cursor. A level stream ('~p' || level || ':' || queue) is read as a
    -- topic's is, through a cursor of its own (named as the stream), but
    -- its rows are the queue's: delivered under their own ids.
    -- (log_topics written out: a SQL function call cost a quarter of an
    -- empty receive.)
    v_nlev := CASE WHEN v_levels THEN 3 ELSE 0 END;
    FOR v_si IN 1 .. v_nlev + 1 + cardinality(v_topics) LOOP
    EXIT WHEN v_n >= p_max;
    -- A stream without a row has nothing to read, and no batch need be
    -- kept for it: one index probe instead of two batch reads. (A
    -- subscription's own stream, which holds only its retries, is empty
    -- nearly always; the opening statement probed it.)
    -- (Per partition, each an ordered index scan that stops at its first
    -- row: over the parent the plan was a bitmap of every row of the
    -- stream, 4.5 ms for 121,000 of them.)
    IF v_si = v_nlev + 1 THEN
        CONTINUE WHEN NOT v_own;
        v_topic := NULL;
        v_lvl := 0;
        v_stream := p_queue;
        v_re := NULL;
        k := c;
    ELSE
        IF v_si <= v_nlev THEN
            v_topic := NULL;
            v_lvl := 4 - v_si;
            v_re := NULL;
            v_stream := '~p' || v_lvl || ':' || p_queue;
            v_key := v_stream;
        ELSE
            v_ti := v_ti + 1;
            v_topic := v_topics[v_ti];
            v_lvl := NULL;
            v_re := v_res[v_ti];
            v_stream := '~t:' || v_topic;
            v_key := '~s:' || p_queue || '/' || v_topic;
        END IF;
        -- The stream's newest cursor (log_newest_cursor's, written out),
        -- and whether the stream holds a row: for a level stream (schema
        -- version 19), a row its cursor has not passed yet. A level
        -- stream that was drained keeps its rows until rotation, and
        -- reading it found nothing at the cost of one or two batch
        -- statements (a new snapshot on a busy server); in a backlog
        -- mixing the levels, every claim below the top level paid that
        -- for each drained level above it. The rows a claim can still
        -- read are past the cursor in (txid, pos) order (the rest of the
        -- current batch, and every row of a transaction at or after
        -- xmax(hi)), or belong to a transaction in progress at hi whose
        -- txid is below the cursor's: an index probe of each, stopping at
        -- the first row, and a stream with neither is skipped.
        k := NULL;
        IF v_si <= v_nlev THEN
        SELECT kc.gen, kc.pos, kc.queue, kc.lo, kc.hi, kc.ctxid, kc.cpos, kc.lwm, kc.lwm_pos, kc.twm, kc.twm_pos, NOT EXISTS (
                (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = v_stream
                    AND (x.txid, x.pos) > (COALESCE(kc.ctxid, '0'), COALESCE(kc.cpos, 0)) ORDER BY x.txid, x.pos LIMIT 1)
                UNION ALL
                (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = v_stream
                    AND (x.txid, x.pos) > (COALESCE(kc.ctxid, '0'), COALESCE(kc.cpos, 0)) ORDER BY x.txid, x.pos LIMIT 1)
                UNION ALL
                (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = v_stream
                    AND (x.txid, x.pos) > (COALESCE(kc.ctxid, '0'), COALESCE(kc.cpos, 0)) ORDER BY x.txid, x.pos LIMIT 1)
                UNION ALL
                (SELECT FROM pg_snapshot_xip(kc.hi) AS u(t) CROSS JOIN LATERAL (
                        SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = v_stream AND x.txid = u.t LIMIT 1) x
                    WHERE u.t < kc.ctxid)
                UNION ALL
                (SELECT FROM pg_snapshot_xip(kc.hi) AS u(t) CROSS JOIN LATERAL (
                        SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = v_stream AND x.txid = u.t LIMIT 1) x
                    WHERE u.t < kc.ctxid)
                UNION ALL
                (SELECT FROM pg_snapshot_xip(kc.hi) AS u(t) CROSS JOIN LATERAL (
                        SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = v_stream AND x.txid = u.t LIMIT 1) x
                    WHERE u.t < kc.ctxid))
        INTO k.gen, k.pos, k.queue, k.lo, k.hi, k.ctxid, k.cpos, k.lwm, k.lwm_pos, k.twm, k.twm_pos, v_nostream
        FROM (SELECT) AS one
        LEFT JOIN LATERAL (
            SELECT * FROM (
                (SELECT * FROM {{schema}}.log_cursors_0 x WHERE x.queue = v_key ORDER BY x.pos DESC LIMIT 1)
                UNION ALL
                (SELECT * FROM {{schema}}.log_cursors_1 x WHERE x.queue = v_key ORDER BY x.pos DESC LIMIT 1)
                UNION ALL
                (SELECT * FROM {{schema}}.log_cursors_2 x WHERE x.queue = v_key ORDER BY x.pos DESC LIMIT 1)
            ) x ORDER BY x.pos DESC LIMIT 1) kc ON true;
        ELSE
        SELECT kc.gen, kc.pos, kc.queue, kc.lo, kc.hi, kc.ctxid, kc.cpos, kc.lwm, kc.lwm_pos, kc.twm, kc.twm_pos, NOT EXISTS (
                (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = v_stream ORDER BY x.txid, x.pos LIMIT 1)
                UNION ALL
                (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = v_stream ORDER BY x.txid, x.pos LIMIT 1)
                UNION ALL
                (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = v_stream ORDER BY x.txid, x.pos LIMIT 1))
        INTO k.gen, k.pos, k.queue, k.lo, k.hi, k.ctxid, k.cpos, k.lwm, k.lwm_pos, k.twm, k.twm_pos, v_nostream
        FROM (SELECT) AS one
        LEFT JOIN LATERAL (
            SELECT * FROM (
                (SELECT * FROM {{schema}}.log_cursors_0 x WHERE x.queue = v_key ORDER BY x.pos DESC LIMIT 1)
                UNION ALL
                (SELECT * FROM {{schema}}.log_cursors_1 x WHERE x.queue = v_key ORDER BY x.pos DESC LIMIT 1)
                UNION ALL
                (SELECT * FROM {{schema}}.log_cursors_2 x WHERE x.queue = v_key ORDER BY x.pos DESC LIMIT 1)
            ) x ORDER BY x.pos DESC LIMIT 1) kc ON true;
        END IF;
        CONTINUE WHEN v_nostream;
        IF k.queue IS NULL THEN
            k.queue := v_key;
            k.lo := '1:1:';
            k.hi := '1:1:';
            k.ctxid := '0';
            k.cpos := 0;
            k.lwm := '-infinity';
            k.lwm_pos := 0;
            k.twm := '-infinity';
            k.twm_pos := 0;
        END IF;
    END IF;
    v_kchanged := false;
    v_ticks := 0;

    -- The batches: rows visible in snapshot hi and not in lo, by (txid,
    -- pos). Not visible in lo means txid in xip(lo) or txid >= xmax(lo):
    -- the in-progress part and the range part, each read by index ranges
    -- that stop early, LIMIT rows at a time (one OR would scan the whole
    -- queue). Every txid of xip(lo) is below xmax(lo), so one statement
    -- reads both parts in (txid, pos) order: until version 13 they were
    -- two executions of it, and starting a plan over six partition scans
    -- was a large part of a claim.
    LOOP
        EXIT WHEN v_n >= p_max;
        v_lox := pg_snapshot_xmax(k.lo);
        v_hix := pg_snapshot_xmax(k.hi);
        v_xip := ARRAY(SELECT x FROM pg_snapshot_xip(k.lo) AS x WHERE x >= k.ctxid ORDER BY x);
        v_done := true;
        LOOP
            v_limit := p_max - v_n;
            v_got := 0;
            v_xipart := cardinality(v_xip) > 0 AND k.ctxid < v_lox;
            -- An earlier call read the batch to its end (below).
            EXIT WHEN NOT v_xipart AND k.ctxid >= v_hix;
            -- The range part starts at xmax(lo) while the cursor is before
            -- it. The row comparison alone positions the index scan;
            -- beside a scalar txid >= xmax(lo) it was only a filter, and
            -- each receive walked the batch from its start (a drain of one
            -- large batch was quadratic).
            IF k.ctxid < v_lox THEN
                v_rtx := v_lox;
                v_rpos := 0;
            ELSE
                v_rtx := k.ctxid;
                v_rpos := k.cpos;
            END IF;
            -- The in-progress part is read one txid of xip(lo) at a time,
            -- each an index range of (queue, txid): as one scan from the
            -- cursor with txid = ANY (xip) as a filter it read every row of
            -- the stream after the cursor, which under concurrent publishes
            -- (an xip that is never empty) was most of a receive's work.
            --
            -- The part's rows in one statement, which returns the ones
            -- leased here: the claim's. The ones due later (and, for
            -- ReceiveDelayed, all of them) become timers. What the loop
            -- needs back (the rows read, the last one's place and the
            -- claim's positions) the statement leaves in a transaction-
            -- local setting, read below. (Row by row in PL/pgSQL this cost
            -- 15-35 us a row; gathering the rows in an array and returning
            -- them from it, 2 us more than this.)
            IF v_ckey IS NULL THEN
                -- The claim's token: 8 random bytes, the version nibble
                -- cleared (a lease's token is a version 4 UUID), and 8
                -- zero bytes, where a member's receipt has its position.
                v_ckey := substring(uuid_send(gen_random_uuid()) FROM 1 FOR 8);
                v_ckey := set_byte(v_ckey, 6, get_byte(v_ckey, 6) & 15);
                v_ctok := encode(v_ckey || '\x0000000000000000'::bytea, 'hex')::uuid;
                v_cpfx := left(v_ctok::text, 19);
            END IF;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            PERFORM set_config('fila.log_part', '', true);
            RETURN QUERY WITH b AS MATERIALIZED (
                SELECT DISTINCT ON (b.txid, b.pos) b.* FROM (
                        (SELECT b.* FROM unnest(v_xip) AS u(x) CROSS JOIN LATERAL (
                                SELECT * FROM {{schema}}.log_messages_0 b WHERE b.queue = v_stream AND b.txid = u.x AND (b.txid, b.pos) > (k.ctxid, k.cpos)
                                    AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.pos LIMIT v_limit) b
                            WHERE v_xipart ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT b.* FROM unnest(v_xip) AS u(x) CROSS JOIN LATERAL (
                                SELECT * FROM {{schema}}.log_messages_1 b WHERE b.queue = v_stream AND b.txid = u.x AND (b.txid, b.pos) > (k.ctxid, k.cpos)
                                    AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.pos LIMIT v_limit) b
                            WHERE v_xipart ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT b.* FROM unnest(v_xip) AS u(x) CROSS JOIN LATERAL (
                                SELECT * FROM {{schema}}.log_messages_2 b WHERE b.queue = v_stream AND b.txid = u.x AND (b.txid, b.pos) > (k.ctxid, k.cpos)
                                    AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.pos LIMIT v_limit) b
                            WHERE v_xipart ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_0 b WHERE b.queue = v_stream AND (b.txid, b.pos) > (v_rtx, v_rpos) AND b.txid < v_hix
                            AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_1 b WHERE b.queue = v_stream AND (b.txid, b.pos) > (v_rtx, v_rpos) AND b.txid < v_hix
                            AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                        UNION ALL
                        (SELECT * FROM {{schema}}.log_messages_2 b WHERE b.queue = v_stream AND (b.txid, b.pos) > (v_rtx, v_rpos) AND b.txid < v_hix
                            AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    ) b
                ORDER BY b.txid, b.pos LIMIT v_limit
            ), t AS (
                INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                SELECT v_gen, p_queue, CASE WHEN v_topic IS NULL THEN b.id ELSE {{schema}}.log_copy_id(b.id, p_queue) END,
                    -- Ready, read by ReceiveDelayed: a timer due now, so that
                    -- the delayed rows behind it are read too.
                    b.pos, CASE WHEN b.run_at > v_now THEN b.run_at ELSE GREATEST(b.run_at, c.twm) END
                FROM b WHERE (p_early OR b.run_at > v_now) AND (v_re IS NULL OR ('.' || b.kind) ~ v_re)
            ), z AS (
                -- Rows read, the last one's place, rows leased, and the
                -- first and the last positions of the runs they make.
                SELECT set_config('fila.log_part', (SELECT count(*) FROM b) || ' ' || l.txid || ' ' || l.pos || ' '
                    || r.n || ' ' || COALESCE(r.starts::text, '{}') || ' ' || COALESCE(r.ends::text, '{}') || ' '
                    -- The first run-at of the timers written, in microseconds
                    -- since the epoch, rounded down.
                    || COALESCE((SELECT floor(extract(epoch FROM min(b.run_at)) * 1e6)::int8 FROM b
                        WHERE NOT p_early AND b.run_at > v_now AND (v_re IS NULL OR ('.' || b.kind) ~ v_re))::text, ''), true) AS s
                FROM (SELECT b.txid, b.pos FROM b ORDER BY b.txid DESC, b.pos DESC LIMIT 1) l,
                    (SELECT count(*) AS n,
                        array_agg(d.pos ORDER BY d.pos) FILTER (WHERE d.pr IS DISTINCT FROM d.pos - 1) AS starts,
                        array_agg(d.pos ORDER BY d.pos) FILTER (WHERE d.nx IS DISTINCT FROM d.pos + 1) AS ends
                    FROM (SELECT r.pos, lag(r.pos) OVER w AS pr, lead(r.pos) OVER w AS nx
                        FROM b r WHERE NOT (p_early OR r.run_at > v_now) AND (v_re IS NULL OR ('.' || r.kind) ~ v_re)
                        WINDOW w AS (ORDER BY r.pos)) d) r
            )
            -- A topic row is delivered under its copy id, which the driver
            -- computes from the event's id marked with a '~' (no id starts
            -- with one): SHA-256 in SQL cost about 5 us a row here. A
            -- member's receipt is its claim's first 19 characters and its
            -- position in hex, which the driver writes out as a UUID.
            SELECT
                CASE WHEN v_topic IS NULL THEN x.id::text ELSE '~' || x.id::text END,
                x.kind, x.body, x.headers, x.enqueued_at, x.attempts + 1, x.max_attempts, COALESCE(x.dedup_key, ''),
                v_cpfx || to_hex(x.pos),
                v_deadline, COALESCE(x.last_error, ''), x.run_at, x.priority
            FROM b AS x
            WHERE NOT (p_early OR x.run_at > v_now) AND (v_re IS NULL OR ('.' || x.kind) ~ v_re)
            -- z is read to its end whatever the rows: a branch of its own.
            UNION ALL
            SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM z WHERE z.s IS NULL;
            v_s := string_to_array(current_setting('fila.log_part'), ' ');
            v_got := COALESCE(v_s[1]::integer, 0);
            IF v_got > 0 THEN
                IF v_s[7] <> '' THEN
                    v_tmin := LEAST(v_tmin, to_timestamp(v_s[7]::float8 / 1e6));
                END IF;
                k.ctxid := v_s[2]::xid8;
                k.cpos := v_s[3]::bigint;
                v_kchanged := true;
                IF v_s[4]::integer > 0 THEN
                    v_n := v_n + v_s[4]::integer;
                    c_runs := c_runs || ARRAY(SELECT v.x FROM unnest(v_s[5]::bigint[], v_s[6]::bigint[]) WITH ORDINALITY
                        AS u(s, e, i) CROSS JOIN LATERAL (VALUES (u.s, 0), (u.e, 1)) AS v(x, k) ORDER BY u.i, v.k);
                    v_parts := v_parts + 1;
                END IF;
            END IF;
            IF v_got = v_limit THEN
                -- Full: the batch may hold more.
                CONTINUE WHEN v_n < p_max; -- some rows became timers: read on
                v_done := false;
                EXIT;
            END IF;
            -- The batch is read to its end. The cursor says so (its place
            -- is past every row the batch can hold: they all have txids
            -- below xmax(hi)), so that the next call does not read the
            -- batch again to find it empty.
            k.ctxid := v_hix;
            k.cpos := 0;
            EXIT;
        END LOOP;
        EXIT WHEN NOT v_done;
        -- Batch consumed: the next one ends at the current snapshot. The
        -- same snapshot again means no transaction ended since: nothing new.
        -- At most one new batch per stream and call: it holds everything
        -- committed before the call (later commits notify). On a busy server
        -- the snapshot changes between any two reads (every commit changes
        -- it), so a receive that kept ticking while the queue had nothing
        -- new spun through empty batches (it took most of the CPU at 500
        -- msg/s); a second batch per call, allowed until version 9, cost a
        -- query per stream and call for what the next call reads anyway.
        EXIT WHEN v_ticks >= 1;
        v_ticks := v_ticks + 1;
        v_snap := pg_current_snapshot();
        EXIT WHEN v_snap::text = k.hi::text;
        -- The rows the new batch holds committed before now: a row due at
        -- its commit is ready, not a timer.
        v_now := clock_timestamp();
        k.lo := k.hi;
        k.hi := v_snap;
        k.ctxid := '0';
        k.cpos := 0;
        -- An empty batch need not be stored: the next receive reads the
        -- same rows from the older lo.
    END LOOP;

    IF v_stream = p_queue THEN
        c.lo := k.lo; c.hi := k.hi; c.ctxid := k.ctxid; c.cpos := k.cpos;
        v_changed := v_changed OR v_kchanged;
    ELSIF v_kchanged THEN
        INSERT INTO {{schema}}.log_cursors (gen, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
        VALUES (v_gen, v_key, k.lo, k.hi, k.ctxid, k.cpos, '-infinity', 0, '-infinity', 0);
    END IF;
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
            a_id := a_id || r.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
            a_tok := a_tok || v_tok; a_run := a_run || r.run_at::timestamptz;
            id := r.id::text; kind := m.kind; body := m.body; headers := m.headers;
            enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
            dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
            v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
            deadline := v_deadline;
            last_error := COALESCE(m.last_error, ''); was := r.run_at; priority := m.priority;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
    END IF;

    IF v_parts > 1 THEN
        -- Read in several parts (streams, or both parts of a batch): one
        -- set of runs, in order.
        c_runs := {{schema}}.log_runs(ARRAY(SELECT generate_series(c_runs[i], c_runs[i + 1])
            FROM generate_series(1, cardinality(c_runs), 2) AS i));
    END IF;
    IF v_parts > 0 THEN
        INSERT INTO {{schema}}.log_claims (gen, queue, token, deadline, runs)
        VALUES (v_gen, p_queue, v_ctok, v_deadline, c_runs);
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
    -- For a receive that found less than it could take: how long until
    -- the next lease deadline or timer after the watermarks (its own claim's
    -- included), in microseconds, read by the statement that follows in the
    -- same transaction. (Until version 12 only for a receive that found
    -- nothing; the driver now skips the claim of a receive that follows one
    -- that found less, when no notification came and nothing is due.)
    IF v_n < p_max AND NOT p_early AND NOT v_swept THEN
        -- Nothing swept: the watermarks did not move, so the heads of the
        -- opening statement still stand, before what this call wrote.
        PERFORM set_config('fila.next_due', COALESCE((extract(epoch FROM (LEAST(v_lhead, v_thead, v_tmin,
            CASE WHEN v_parts > 0 THEN v_deadline END) - clock_timestamp())) * 1e6)::int8::text, ''), true);
    ELSIF v_n < p_max AND NOT p_early THEN
        PERFORM set_config('fila.next_due', COALESCE((extract(epoch FROM (LEAST(
            (SELECT l.deadline FROM {{schema}}.log_leases l
             WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) ORDER BY l.deadline, l.pos LIMIT 1),
            (SELECT k.deadline FROM {{schema}}.log_claims k
             WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) ORDER BY k.deadline, k.pos LIMIT 1),
            (SELECT t.run_at FROM {{schema}}.log_timers t
             WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos) ORDER BY t.run_at, t.pos LIMIT 1))
            - clock_timestamp())) * 1e6)::int8::text, ''), true);
    ELSE
        PERFORM set_config('fila.next_due', '', true);
    END IF;
END $$;

