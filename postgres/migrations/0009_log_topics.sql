-- Fila schema version 9: a topic of the log mode is one log, and a receive
-- leases its batch with one row.
--
-- Until version 8 a topic publish copied every message into each
-- subscription's queue: N subscriptions wrote N message rows per event.
-- Now a publish appends one row per event under the topic's stream name
-- ('~t:' || topic), and each subscription reads that stream through a
-- cursor of its own ('~s:' || queue || '/' || topic, a log_cursors row like
-- a queue's). Neither name can be a queue's: queue names start with a letter
-- or a digit. A subscription is still a queue to everything else: the rows
-- it reads from the topic are leased, timed, retried, dead-lettered and
-- counted under the subscription's queue name and the copy's id,
-- log_copy_id(event, queue), the id backend.CopyID gives, so leases,
-- settlements, timers and dead letters keep their keys. A retry appends the
-- message under the subscription's own queue name, where only it reads it.
--
-- Subscriptions stay where the portable layer kept them: a mark 'sub/' ||
-- queue of the queue 'fila.topic.' || topic in log_marks, so subscriptions
-- made before this version keep working. Such a subscription has no cursor
-- yet and reads the topic's stream from its start, which holds only what
-- was published after this version.
-- docs/design.md ("Fan-out") explains the design.
--
-- Until this version every delivery inserted a log_leases row and every ack a
-- log_settles row: reading a backlog of N messages wrote 2N rows, and a
-- topic's event read by k subscriptions 2k rows. Now the rows a receive
-- reads from its streams' batches (first deliveries) are leased by one
-- log_claims row: one token and deadline for the batch, with the members'
-- ids, message positions and attempts in arrays. Each member's receipt is
-- (its id, the claim's token). An ack that settles every member of a claim
-- before its deadline, when no member was settled or extended alone,
-- inserts one log_settles row with id NULL for the whole claim. The
-- exceptions keep a row per message, as before: a redelivery after expiry,
-- a due timer, an early lease (ReceiveDelayed), an extension (a log_leases
-- row with the claim's token), and the ack, retry or dead letter of a part
-- of a claim.
--
-- Fencing stays per message. A member's lease is its claim's unless a
-- log_leases row of the message is newer than the claim: an extension (same
-- token, its deadline then counts) or a redelivery (another token: the
-- receipt is lost). A claim is only ever a message row's first lease, and a
-- message gets a newer row (a retry, a replay) only after its lease was
-- settled, so no lease is ever superseded by a newer claim unsettled. A
-- settlement of (token, id) or of (token, NULL) ends the member's lease.

-- Subscriptions by queue: a receive finds the topics its queue reads.
CREATE INDEX log_marks_by_name ON {{schema}}.log_marks (name, queue);

-- log_copy_id is backend.CopyID in SQL: the UUID of the copy of message
-- p_id in subscription p_queue, which keeps p_id's first 48 bits and takes
-- the rest from SHA-256("fila copy" NUL id NUL queue), with the version 7 and
-- variant bits set. Ids are in canonical (lowercase) form, as uuid::text
-- writes them. In PL/pgSQL: as a SQL function (not inlined, its body needing
-- the hash twice) a call cost three times as much; log_receive writes it out
-- for the same reason.
CREATE FUNCTION {{schema}}.log_copy_id(p_id uuid, p_queue text) RETURNS uuid
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    b bytea;
BEGIN
    b := overlay(substring(sha256('\x66696c6120636f707900'::bytea || textsend(p_id::text) || '\x00'::bytea
        || textsend(p_queue)) FROM 1 FOR 16) PLACING substring(uuid_send(p_id) FROM 1 FOR 6) FROM 1 FOR 6);
    RETURN encode(set_byte(set_byte(b, 6, 112 | (get_byte(b, 6) & 15)), 8, 128 | (get_byte(b, 8) & 63)), 'hex')::uuid;
END $$;

-- log_topics returns the topics p_queue subscribes to, in name order.
CREATE FUNCTION {{schema}}.log_topics(p_queue text) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT substr(k.queue, 12) FROM {{schema}}.log_marks k
    WHERE k.name = 'sub/' || p_queue AND left(k.queue, 11) = 'fila.topic.'
        AND (k.until IS NULL OR k.until > now())
    ORDER BY k.queue
$$;

-- log_newest_cursor returns the newest cursor row of key p_key, read per
-- partition (see plan_cache_mode in 0005_log.sql), or the start of the log
-- when it has none.
CREATE FUNCTION {{schema}}.log_newest_cursor(p_key text) RETURNS {{schema}}.log_cursors
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan STABLE AS $$
DECLARE
    c {{schema}}.log_cursors%ROWTYPE;
BEGIN
    SELECT * INTO c FROM (
        (SELECT * FROM {{schema}}.log_cursors_0 k WHERE k.queue = p_key ORDER BY k.pos DESC LIMIT 1)
        UNION ALL
        (SELECT * FROM {{schema}}.log_cursors_1 k WHERE k.queue = p_key ORDER BY k.pos DESC LIMIT 1)
        UNION ALL
        (SELECT * FROM {{schema}}.log_cursors_2 k WHERE k.queue = p_key ORDER BY k.pos DESC LIMIT 1)
    ) k ORDER BY k.pos DESC LIMIT 1;
    IF NOT FOUND THEN
        -- The start: every committed row is after it (log_cursor's, without
        -- its second look).
        c.queue := p_key;
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

-- log_subscribe makes p_queue a subscription of p_topic. A new one gets a
-- cursor at the current snapshot: what committed before is not read, what
-- commits after (or was in progress) is. Subscribing again changes nothing.
-- It runs under the queue's receive lock, so no receive of the queue reads
-- the topic meanwhile.
CREATE FUNCTION {{schema}}.log_subscribe(p_topic text, p_queue text) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_snap pg_snapshot;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue));
    INSERT INTO {{schema}}.log_marks (queue, name, until) VALUES ('fila.topic.' || p_topic, 'sub/' || p_queue, NULL)
    ON CONFLICT (queue, name) DO UPDATE SET until = NULL
        WHERE {{schema}}.log_marks.until IS NOT NULL AND {{schema}}.log_marks.until <= now();
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_snap := pg_current_snapshot();
    INSERT INTO {{schema}}.log_cursors (gen, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
    VALUES ((SELECT s.cur FROM {{schema}}.log_state s), '~s:' || p_queue || '/' || p_topic, v_snap, v_snap, '0', 0,
        '-infinity', 0, '-infinity', 0);
END $$;

-- log_unsubscribe ends the subscription and drops its cursor, so the
-- topic's rows are no longer kept for it.
CREATE FUNCTION {{schema}}.log_unsubscribe(p_topic text, p_queue text) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue));
    DELETE FROM {{schema}}.log_marks WHERE queue = 'fila.topic.' || p_topic AND name = 'sub/' || p_queue;
    DELETE FROM {{schema}}.log_cursors WHERE queue = '~s:' || p_queue || '/' || p_topic;
END $$;

-- Claims: one per receive that read batch rows.
CREATE TABLE {{schema}}.log_claims (
    gen      smallint    NOT NULL,
    pos      bigint      NOT NULL DEFAULT nextval('{{schema}}.log_pos'),
    queue    text        NOT NULL,
    token    uuid        NOT NULL,
    deadline timestamptz NOT NULL,
    ids      uuid[]      NOT NULL,
    msg_pos  bigint[]    NOT NULL,
    attempts integer[]   NOT NULL
) PARTITION BY LIST (gen);
CREATE INDEX log_claims_expiry ON {{schema}}.log_claims (queue, deadline, pos);
CREATE INDEX log_claims_token ON {{schema}}.log_claims (token);
CREATE TABLE {{schema}}.log_claims_0 PARTITION OF {{schema}}.log_claims FOR VALUES IN (0) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_claims_1 PARTITION OF {{schema}}.log_claims FOR VALUES IN (1) WITH (autovacuum_enabled = false);
CREATE TABLE {{schema}}.log_claims_2 PARTITION OF {{schema}}.log_claims FOR VALUES IN (2) WITH (autovacuum_enabled = false);

-- A settlement of a whole claim has no id.
ALTER TABLE {{schema}}.log_settles ALTER COLUMN id DROP NOT NULL;

-- Leases by receipt: the extensions of a claim's members carry its token,
-- and a whole-claim ack looks for them.
CREATE INDEX log_leases_token ON {{schema}}.log_leases (token);

-- log_current returns the lease of message p_id under receipt p_token if
-- it is current: a log_leases row with this token (a lease of its own, or a
-- claim member's extension) or the claim's, not superseded by a newer
-- log_leases row of the message with another token, not expired, not
-- settled. Else NULL. It holds the token's advisory lock until the
-- transaction ends, so settlements of one receipt are one after the other,
-- and the expiry sweep, which takes the same lock before it redelivers,
-- never overlaps one: a settlement that committed is never also
-- redelivered.
CREATE OR REPLACE FUNCTION {{schema}}.log_current(p_id uuid, p_token uuid) RETURNS {{schema}}.log_leases
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l  {{schema}}.log_leases%ROWTYPE;
    n  {{schema}}.log_leases%ROWTYPE;
    k  {{schema}}.log_claims%ROWTYPE;
    i  integer;
BEGIN
    SELECT * INTO l FROM {{schema}}.log_leases x WHERE x.token = p_token AND x.id = p_id LIMIT 1;
    IF NOT FOUND THEN
        SELECT * INTO k FROM {{schema}}.log_claims x WHERE x.token = p_token LIMIT 1;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        i := array_position(k.ids, p_id);
        IF i IS NULL THEN
            RETURN NULL;
        END IF;
        l.gen := k.gen; l.pos := k.pos; l.queue := k.queue; l.id := p_id; l.msg_pos := k.msg_pos[i];
        l.attempt := k.attempts[i]; l.token := p_token; l.deadline := k.deadline; l.run_at := NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(p_token::text));
    SELECT * INTO n FROM {{schema}}.log_leases x WHERE x.queue = l.queue AND x.id = p_id ORDER BY x.pos DESC LIMIT 1;
    IF FOUND AND n.pos >= l.pos THEN
        IF n.token <> p_token THEN
            RETURN NULL;
        END IF;
        l := n;
    END IF;
    IF l.deadline <= clock_timestamp() THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = p_token AND (s.id = p_id OR s.id IS NULL)) THEN
        RETURN NULL;
    END IF;
    RETURN l;
END $$;

-- log_ack settles the current leases among the refs and returns their ids.
-- The receipts' locks are taken first, in key order so two calls settling
-- the same leases cannot deadlock. Per receipt token: when the refs hold
-- every member of a claim, before its deadline, and none of them was
-- settled or extended alone, one settlement row ends them all; otherwise
-- each current lease gets its own.
CREATE OR REPLACE FUNCTION {{schema}}.log_ack(p_ids uuid[], p_tokens uuid[]) RETURNS SETOF text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_gen  smallint;
    v_tok  uuid;
    v_ids  uuid[];
    r_ids  uuid[] := '{}';
    r_toks uuid[] := '{}';
    k      {{schema}}.log_claims%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), x.k)
    FROM (SELECT DISTINCT hashtext(t::text) AS k FROM unnest(p_tokens) AS t ORDER BY 1) x;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    FOR v_tok, v_ids IN SELECT u.token, array_agg(DISTINCT u.id) FROM unnest(p_ids, p_tokens) AS u(id, token)
        GROUP BY u.token ORDER BY u.token
    LOOP
        SELECT * INTO k FROM {{schema}}.log_claims x WHERE x.token = v_tok LIMIT 1;
        -- (EXCEPT, not @>: array containment compares every pair.)
        IF FOUND AND k.deadline > clock_timestamp()
            AND NOT EXISTS (SELECT unnest(k.ids) EXCEPT SELECT unnest(v_ids))
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = v_tok)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases x WHERE x.token = v_tok) THEN
            INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind) VALUES (v_gen, k.queue, NULL, v_tok, 'a');
            DELETE FROM {{schema}}.log_dedup d WHERE d.queue = k.queue AND d.id = ANY (k.ids);
            RETURN QUERY SELECT x::text FROM unnest(k.ids) AS x;
        ELSE
            r_ids := r_ids || v_ids;
            r_toks := r_toks || array_fill(v_tok, ARRAY[cardinality(v_ids)]);
        END IF;
    END LOOP;
    IF cardinality(r_ids) = 0 THEN
        RETURN;
    END IF;
    -- The others one by one, in one statement: log_current's rule, set-based.
    RETURN QUERY WITH u AS (
        SELECT t.id, t.token FROM unnest(r_ids, r_toks) AS t(id, token)
    ), cur AS (
        SELECT u.id, u.token, COALESCE(pl.queue, kc.queue) AS queue
        FROM u
        -- A lease row of this receipt: a lease of its own or a claim member's extension.
        LEFT JOIN LATERAL (SELECT x.queue, x.pos FROM {{schema}}.log_leases x
            WHERE x.token = u.token AND x.id = u.id LIMIT 1) pl ON true
        -- Else the claim of this receipt, if the message is one of its members.
        LEFT JOIN LATERAL (SELECT c.queue, c.pos, c.deadline FROM {{schema}}.log_claims c
            WHERE pl.pos IS NULL AND c.token = u.token AND u.id = ANY (c.ids) LIMIT 1) kc ON true
        -- The message's newest lease row, which decides when it is newer.
        LEFT JOIN LATERAL (SELECT x.pos, x.token, x.deadline FROM {{schema}}.log_leases x
            WHERE x.queue = COALESCE(pl.queue, kc.queue) AND x.id = u.id ORDER BY x.pos DESC LIMIT 1) n ON true
        WHERE COALESCE(pl.pos, kc.pos) IS NOT NULL
            AND CASE WHEN n.pos >= COALESCE(pl.pos, kc.pos) THEN n.token = u.token AND n.deadline > clock_timestamp()
                ELSE kc.deadline > clock_timestamp() END
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles z WHERE z.token = u.token AND (z.id = u.id OR z.id IS NULL))
    ), s AS (
        INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind)
        SELECT v_gen, cur.queue, cur.id, cur.token, 'a' FROM cur
        RETURNING queue, id
    ), d AS (
        DELETE FROM {{schema}}.log_dedup x USING s WHERE x.id = s.id AND x.queue = s.queue
    )
    SELECT s.id::text FROM s;
END $$;

-- log_receive leases up to p_max messages of the queue for p_lease_us
-- microseconds: first messages whose lease or claim expired unsettled
-- (attempt + 1), then due timers, then the rows of the queue's batches in
-- order, first its own stream's (enqueues, retries, replays), then each
-- subscribed topic's, each read through its own cursor. The rows read from
-- the batches are leased together by one log_claims row; the others get a
-- log_leases row each. A batch row whose run-at is ahead becomes a timer.
-- The last column is the due time the message had before this lease.
CREATE OR REPLACE FUNCTION {{schema}}.log_receive(p_queue text, p_max integer, p_lease_us bigint, p_early boolean DEFAULT false)
RETURNS TABLE (id text, kind text, body bytea, headers json, enqueued_at timestamptz, attempts integer,
    max_attempts integer, dedup_key text, token text, deadline timestamptz, last_error text, was timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
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
    v_id       uuid;
    v_b        bytea;
    v_limit    integer;
    v_got      integer;
    v_lwm      timestamptz;
    v_lwm_pos  bigint;
    v_ticks    integer;
    v_topic    text;
    v_stream   text;
    v_key      text;
    v_xipart   boolean;
    v_ctok     uuid;
    v_all      boolean;
    i          integer;
    -- The claim of this call: the batch rows it leases, under one token.
    c_id       uuid[] := '{}';
    c_pos      bigint[] := '{}';
    c_att      integer[] := '{}';
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
    c := {{schema}}.log_newest_cursor(p_queue);

    IF NOT p_early THEN
        -- Leases and claims that ended unsettled since the previous sweep,
        -- in (deadline, pos) order, 256 at a time, each chunk read per
        -- partition (see plan_cache_mode above). A lease's id is the
        -- delivered id (a topic row's copy id), so it, not the message
        -- row's, is delivered again.
        <<sweep>>
        LOOP
        v_got := 0;
        FOR r IN SELECT DISTINCT ON (l.deadline, l.pos) l.* FROM (
                (SELECT l.deadline, l.pos, l.id, l.msg_pos, l.attempt, l.token, l.run_at, NULL::uuid[] AS ids, NULL::bigint[] AS mpos, NULL::integer[] AS atts
                    FROM {{schema}}.log_leases_0 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT l.deadline, l.pos, l.id, l.msg_pos, l.attempt, l.token, l.run_at, NULL::uuid[], NULL::bigint[], NULL::integer[]
                    FROM {{schema}}.log_leases_1 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT l.deadline, l.pos, l.id, l.msg_pos, l.attempt, l.token, l.run_at, NULL::uuid[], NULL::bigint[], NULL::integer[]
                    FROM {{schema}}.log_leases_2 l WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos) AND l.deadline <= v_now ORDER BY l.deadline, l.pos LIMIT 256)
                UNION ALL
                (SELECT k.deadline, k.pos, NULL::uuid, NULL::bigint, NULL::integer, k.token, NULL::timestamptz, k.ids, k.msg_pos, k.attempts
                    FROM {{schema}}.log_claims_0 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) AND k.deadline <= v_now ORDER BY k.deadline, k.pos LIMIT 256)
                UNION ALL
                (SELECT k.deadline, k.pos, NULL::uuid, NULL::bigint, NULL::integer, k.token, NULL::timestamptz, k.ids, k.msg_pos, k.attempts
                    FROM {{schema}}.log_claims_1 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) AND k.deadline <= v_now ORDER BY k.deadline, k.pos LIMIT 256)
                UNION ALL
                (SELECT k.deadline, k.pos, NULL::uuid, NULL::bigint, NULL::integer, k.token, NULL::timestamptz, k.ids, k.msg_pos, k.attempts
                    FROM {{schema}}.log_claims_2 k WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) AND k.deadline <= v_now ORDER BY k.deadline, k.pos LIMIT 256)
            ) l
            ORDER BY l.deadline, l.pos LIMIT 256
        LOOP
            v_got := v_got + 1;
            EXIT sweep WHEN v_n >= p_max;
            IF r.ids IS NOT NULL THEN
                -- A claim: its members neither settled nor leased again
                -- since are delivered again. The watermark passes the claim
                -- once all of them are; a call that fills up before leaves
                -- it for the next, which skips the members leased here.
                IF NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND s.id IS NULL) THEN
                    IF NOT pg_try_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(r.token::text)) THEN
                        EXIT sweep; -- a settlement in flight: let it finish
                    END IF;
                    v_all := true;
                    i := 0;
                    -- Settled as a whole meanwhile: nothing to deliver.
                    IF EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND s.id IS NULL) THEN
                        i := cardinality(r.ids);
                    END IF;
                    WHILE i < cardinality(r.ids) LOOP
                        i := i + 1;
                        CONTINUE WHEN EXISTS (SELECT FROM {{schema}}.log_leases l2
                                WHERE l2.queue = p_queue AND l2.id = r.ids[i] AND l2.pos > r.pos)
                            OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = r.token AND s.id = r.ids[i]);
                        IF v_n >= p_max THEN
                            v_all := false;
                            EXIT;
                        END IF;
                        SELECT * INTO m FROM {{schema}}.log_messages x WHERE x.pos = r.mpos[i] LIMIT 1;
                        CONTINUE WHEN NOT FOUND;
                        v_tok := gen_random_uuid();
                        a_id := a_id || r.ids[i]; a_pos := a_pos || m.pos; a_att := a_att || (r.atts[i] + 1);
                        a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
                        id := r.ids[i]::text; kind := m.kind; body := m.body; headers := m.headers;
                        enqueued_at := m.enqueued_at; attempts := r.atts[i] + 1; max_attempts := m.max_attempts;
                        dedup_key := COALESCE(m.dedup_key, ''); token := v_tok::text;
                        v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
                        deadline := v_deadline;
                        last_error := COALESCE(m.last_error, ''); was := r.deadline;
                        RETURN NEXT;
                        v_n := v_n + 1;
                    END LOOP;
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
            a_id := a_id || r.id; a_pos := a_pos || m.pos; a_att := a_att || (m.attempts + 1);
            a_tok := a_tok || v_tok; a_run := a_run || NULL::timestamptz;
            id := r.id::text; kind := m.kind; body := m.body; headers := m.headers;
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

    -- The streams: the queue's own (v_topic NULL), then each subscribed
    -- topic's, through the subscription's cursor.
    -- (log_topics written out: a SQL function call cost a quarter of an
    -- empty receive.)
    FOREACH v_topic IN ARRAY array_prepend(NULL::text, ARRAY(
        SELECT substr(mk.queue, 12) FROM {{schema}}.log_marks mk
        WHERE mk.name = 'sub/' || p_queue AND left(mk.queue, 11) = 'fila.topic.'
            AND (mk.until IS NULL OR mk.until > now())
        ORDER BY mk.queue)) LOOP
    EXIT WHEN v_n >= p_max;
    IF v_topic IS NULL THEN
        v_stream := p_queue;
        k := c;
    ELSE
        v_stream := '~t:' || v_topic;
        v_key := '~s:' || p_queue || '/' || v_topic;
        k := {{schema}}.log_newest_cursor(v_key);
    END IF;
    v_kchanged := false;
    v_ticks := 0;

    -- The batches: rows visible in snapshot hi and not in lo, by (txid,
    -- pos). Not visible in lo means txid in xip(lo) or txid >= xmax(lo):
    -- read as two index range scans, the first (smaller txids) before the
    -- second, LIMIT rows at a time so the plan is an ordered index scan
    -- that stops early (one OR would scan the whole queue).
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
            IF NOT v_xipart AND k.ctxid < v_lox THEN
                -- Past the in-progress part: the range part starts at
                -- xmax(lo). The row comparison alone then positions the
                -- index scan; beside a scalar txid >= xmax(lo) it was only
                -- a filter, and each receive walked the batch from its
                -- start (a drain of one large batch was quadratic).
                k.ctxid := v_lox;
                k.cpos := 0;
            END IF;
            FOR m IN SELECT DISTINCT ON (b.txid, b.pos) b.* FROM (
                    (SELECT * FROM {{schema}}.log_messages_0 b WHERE v_xipart AND b.queue = v_stream AND b.txid = ANY (v_xip) AND (b.txid, b.pos) > (k.ctxid, k.cpos)
                        AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    UNION ALL
                    (SELECT * FROM {{schema}}.log_messages_1 b WHERE v_xipart AND b.queue = v_stream AND b.txid = ANY (v_xip) AND (b.txid, b.pos) > (k.ctxid, k.cpos)
                        AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    UNION ALL
                    (SELECT * FROM {{schema}}.log_messages_2 b WHERE v_xipart AND b.queue = v_stream AND b.txid = ANY (v_xip) AND (b.txid, b.pos) > (k.ctxid, k.cpos)
                        AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    UNION ALL
                    (SELECT * FROM {{schema}}.log_messages_0 b WHERE NOT v_xipart AND b.queue = v_stream AND (b.txid, b.pos) > (k.ctxid, k.cpos) AND b.txid < v_hix
                        AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    UNION ALL
                    (SELECT * FROM {{schema}}.log_messages_1 b WHERE NOT v_xipart AND b.queue = v_stream AND (b.txid, b.pos) > (k.ctxid, k.cpos) AND b.txid < v_hix
                        AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                    UNION ALL
                    (SELECT * FROM {{schema}}.log_messages_2 b WHERE NOT v_xipart AND b.queue = v_stream AND (b.txid, b.pos) > (k.ctxid, k.cpos) AND b.txid < v_hix
                        AND pg_visible_in_snapshot(b.txid, k.hi) ORDER BY b.txid, b.pos LIMIT v_limit)
                ) b
                ORDER BY b.txid, b.pos LIMIT v_limit
            LOOP
                v_got := v_got + 1;
                k.ctxid := m.txid;
                k.cpos := m.pos;
                v_kchanged := true;
                IF v_topic IS NULL THEN
                    v_id := m.id;
                ELSE
                    -- log_copy_id written out: the call cost as much as the hash.
                    v_b := overlay(substring(sha256('\x66696c6120636f707900'::bytea || textsend(m.id::text) || '\x00'::bytea
                        || textsend(p_queue)) FROM 1 FOR 16) PLACING substring(uuid_send(m.id) FROM 1 FOR 6) FROM 1 FOR 6);
                    v_id := encode(set_byte(set_byte(v_b, 6, 112 | (get_byte(v_b, 6) & 15)), 8,
                        128 | (get_byte(v_b, 8) & 63)), 'hex')::uuid;
                END IF;
                IF p_early AND m.run_at <= v_now THEN
                    -- Ready: left to Receive as a timer due now, so that
                    -- the delayed rows behind it are read too.
                    INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                    VALUES (v_gen, p_queue, v_id, m.pos, GREATEST(m.run_at, c.twm));
                    CONTINUE;
                END IF;
                IF m.run_at > v_now THEN
                    INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                    VALUES (v_gen, p_queue, v_id, m.pos, m.run_at);
                    CONTINUE;
                END IF;
                v_ctok := COALESCE(v_ctok, gen_random_uuid());
                c_id := c_id || v_id; c_pos := c_pos || m.pos; c_att := c_att || (m.attempts + 1);
                id := v_id::text; kind := m.kind; body := m.body; headers := m.headers;
                enqueued_at := m.enqueued_at; attempts := m.attempts + 1; max_attempts := m.max_attempts;
                dedup_key := COALESCE(m.dedup_key, ''); token := v_ctok::text;
                v_deadline := COALESCE(v_deadline, clock_timestamp() + p_lease_us * interval '1 microsecond');
                deadline := v_deadline;
                last_error := COALESCE(m.last_error, ''); was := m.run_at;
                RETURN NEXT;
                v_n := v_n + 1;
            END LOOP;
            IF v_got = v_limit THEN
                -- Full: the part being read may hold more.
                CONTINUE WHEN v_n < p_max; -- some rows became timers: read on
                v_done := false;
                EXIT;
            END IF;
            EXIT WHEN NOT v_xipart; -- batch read to its end
            -- The xip part is read: go on after it.
            k.ctxid := v_lox;
            k.cpos := 0;
            v_xip := '{}';
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

    IF v_topic IS NULL THEN
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
            last_error := COALESCE(m.last_error, ''); was := r.run_at;
            RETURN NEXT;
            v_n := v_n + 1;
        END LOOP;
    END IF;

    IF cardinality(c_id) > 0 THEN
        INSERT INTO {{schema}}.log_claims (gen, queue, token, deadline, ids, msg_pos, attempts)
        VALUES (v_gen, p_queue, v_ctok, v_deadline, c_id, c_pos, c_att);
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
            (SELECT k.deadline FROM {{schema}}.log_claims k
             WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos) ORDER BY k.deadline, k.pos LIMIT 1),
            (SELECT t.run_at FROM {{schema}}.log_timers t
             WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos) ORDER BY t.run_at, t.pos LIMIT 1))
            - clock_timestamp())) * 1e6)::int8::text, ''), true);
    ELSE
        PERFORM set_config('fila.next_due', '', true);
    END IF;
END $$;

-- log_retry ends the lease and re-appends the message with its new run-at
-- (no earlier than the run-at an early lease kept) and last error, under
-- the lease's queue and id: a topic row's retry is the subscription's alone.
-- It returns the queue, or nothing when the lease is not current.
CREATE OR REPLACE FUNCTION {{schema}}.log_retry(p_id uuid, p_token uuid, p_delay_us bigint, p_reason text) RETURNS SETOF text
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
    SELECT v_gen, l.queue, l.id, m.kind, m.body, m.headers, m.enqueued_at,
        GREATEST(now() + p_delay_us * interval '1 microsecond', l.run_at), l.attempt, m.max_attempts, m.dedup_key,
        COALESCE(NULLIF(p_reason, ''), m.last_error)
    FROM {{schema}}.log_messages m WHERE m.pos = l.msg_pos LIMIT 1;
    RETURN NEXT l.queue;
END $$;

-- log_bury ends the lease and stores the message as a dead letter of the
-- lease's queue, under the lease's id. It returns one row, or none when the
-- lease is not current.
CREATE OR REPLACE FUNCTION {{schema}}.log_bury(p_id uuid, p_token uuid, p_reason text, p_attempts integer) RETURNS SETOF integer
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
    SELECT l.id, l.queue, m.kind, m.body, m.headers, m.enqueued_at, p_attempts, m.max_attempts, m.dedup_key, p_reason
    FROM {{schema}}.log_messages m WHERE m.pos = l.msg_pos LIMIT 1
    ON CONFLICT (id) DO UPDATE SET queue = EXCLUDED.queue, kind = EXCLUDED.kind, body = EXCLUDED.body,
        headers = EXCLUDED.headers, enqueued_at = EXCLUDED.enqueued_at, attempts = EXCLUDED.attempts,
        max_attempts = EXCLUDED.max_attempts, dedup_key = EXCLUDED.dedup_key, reason = EXCLUDED.reason,
        dead_at = now();
    DELETE FROM {{schema}}.log_dedup k WHERE k.id = l.id AND k.queue = l.queue;
    RETURN NEXT 1;
END $$;

-- log_unread counts the rows of stream p_stream that cursor c has not read:
-- ready ones (run-at passed), delayed ones, and the oldest ready run-at.
CREATE FUNCTION {{schema}}.log_unread(p_stream text, c {{schema}}.log_cursors, p_now timestamptz,
    OUT ready bigint, OUT delayed bigint, OUT oldest timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan STABLE AS $$
DECLARE
    v_lox xid8 := pg_snapshot_xmax(c.lo);
    v_xip xid8[] := ARRAY(SELECT pg_snapshot_xip(c.lo));
BEGIN
    SELECT count(*) FILTER (WHERE u.run_at <= p_now), count(*) FILTER (WHERE u.run_at > p_now),
        min(u.run_at) FILTER (WHERE u.run_at <= p_now)
    INTO ready, delayed, oldest
    FROM (
        SELECT DISTINCT ON (x.pos) x.run_at FROM (
            SELECT a.pos, a.txid, a.run_at FROM {{schema}}.log_messages a WHERE a.queue = p_stream AND a.txid >= v_lox
            UNION ALL
            SELECT b.pos, b.txid, b.run_at FROM {{schema}}.log_messages b WHERE b.queue = p_stream AND b.txid = ANY (v_xip)
        ) x
        WHERE NOT (pg_visible_in_snapshot(x.txid, c.hi) AND (x.txid, x.pos) <= (c.ctxid, c.cpos))
    ) u;
END $$;

-- log_stats counts the queue's messages: rows of its own stream and of its
-- topics' not yet read by its cursors, pending timers, and unsettled leases
-- and claim members (expired ones count as ready). A subscription that stalls shows its lag
-- here: the topic's rows it has not read count as ready.
CREATE OR REPLACE FUNCTION {{schema}}.log_stats(p_queue text, OUT ready bigint, OUT delayed bigint, OUT leased bigint,
    OUT oldest timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan STABLE AS $$
DECLARE
    c       {{schema}}.log_cursors%ROWTYPE;
    v_now   timestamptz := clock_timestamp();
    v_topic text;
    u       record;
BEGIN
    c := {{schema}}.log_newest_cursor(p_queue);
    WITH timers AS (
        SELECT DISTINCT ON (t.pos) t.run_at FROM {{schema}}.log_timers t
        WHERE t.queue = p_queue AND (t.run_at, t.pos) > (c.twm, c.twm_pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l WHERE l.id = t.id AND l.queue = p_queue AND l.pos > t.pos)
    ), leases AS (
        SELECT DISTINCT ON (l.pos) l.deadline, l.run_at FROM {{schema}}.log_leases l
        WHERE l.queue = p_queue AND (l.deadline, l.pos) > (c.lwm, c.lwm_pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = p_queue AND l2.id = l.id AND l2.pos > l.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = l.token AND (s.id = l.id OR s.id IS NULL))
    ), claimed AS (
        -- Members of claims that are neither settled nor leased again.
        SELECT DISTINCT ON (k.pos, cm.id) k.deadline, NULL::timestamptz AS run_at FROM {{schema}}.log_claims k
        CROSS JOIN LATERAL unnest(k.ids) AS cm(id)
        WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = p_queue AND l2.id = cm.id AND l2.pos > k.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = k.token AND (s.id = cm.id OR s.id IS NULL))
    ), due AS (
        SELECT run_at AS at, false AS held FROM timers
        UNION ALL SELECT CASE WHEN deadline > v_now THEN deadline ELSE GREATEST(deadline, run_at) END,
            deadline > v_now FROM leases
        UNION ALL SELECT deadline, deadline > v_now FROM claimed
    )
    SELECT count(*) FILTER (WHERE NOT held AND at <= v_now),
        count(*) FILTER (WHERE NOT held AND at > v_now),
        count(*) FILTER (WHERE held),
        min(at) FILTER (WHERE NOT held AND at <= v_now)
    INTO ready, delayed, leased, oldest
    FROM due;
    u := {{schema}}.log_unread(p_queue, c, v_now);
    ready := ready + u.ready;
    delayed := delayed + u.delayed;
    oldest := LEAST(oldest, u.oldest);
    FOR v_topic IN SELECT {{schema}}.log_topics(p_queue) LOOP
        u := {{schema}}.log_unread('~t:' || v_topic,
            {{schema}}.log_newest_cursor('~s:' || p_queue || '/' || v_topic), v_now);
        ready := ready + u.ready;
        delayed := delayed + u.delayed;
        oldest := LEAST(oldest, u.oldest);
    END LOOP;
END $$;

-- log_queue_delete deletes everything the queue holds in the log mode. It
-- is the mode's one statement that deletes rows in bulk; rotation's
-- TRUNCATE reclaims them. It takes the rotation lock too: a rotation copy
-- that read the queue's rows before the delete would write them back. A
-- queue that stays subscribed to a topic (QueueDelete without
-- TopicUnsubscribe) gets a cursor at the current snapshot for each topic:
-- the topic's rows published before the delete are gone for it, as copies
-- would have been, and later ones reach it.
CREATE OR REPLACE FUNCTION {{schema}}.log_queue_delete(p_queue text) RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_topic text;
    v_snap  pg_snapshot;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.rotate.{{schema}}'), 0);
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.{{schema}}'), hashtext(p_queue));
    DELETE FROM {{schema}}.log_messages WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_leases WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_claims WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_settles WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_timers WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_cursors WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_dedup WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_dead WHERE queue = p_queue;
    DELETE FROM {{schema}}.log_marks WHERE queue = p_queue;
    v_snap := pg_current_snapshot();
    FOR v_topic IN SELECT {{schema}}.log_topics(p_queue) LOOP
        DELETE FROM {{schema}}.log_cursors WHERE queue = '~s:' || p_queue || '/' || v_topic;
        INSERT INTO {{schema}}.log_cursors (gen, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
        VALUES ((SELECT s.cur FROM {{schema}}.log_state s), '~s:' || p_queue || '/' || v_topic, v_snap, v_snap,
            '0', 0, '-infinity', 0, '-infinity', 0);
    END LOOP;
END $$;

-- log_rotate_copy, once the current generation is p_interval_us old, copies
-- the rows of the oldest generation that are still needed into the current
-- one, keeping their identity, and records the snapshot it read them in.
-- Needed: a message some cursor has not read, or with a live lease, a live
-- claim member or a pending timer; the newest unsettled lease of a message;
-- a claim with a live member (live: not yet passed by its queue's sweep); a pending timer;
-- a queue's or a subscription's newest cursor. A topic's row is needed
-- while one of its subscriptions has not read it, or holds it leased or as
-- a timer. Rows only ever stop being needed (a new subscription starts at
-- the current snapshot), so what is copied from one snapshot stays enough.
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
                -- A topic's row: needed while a subscription has not read it.
                ELSE EXISTS (SELECT FROM sc WHERE sc.stream = m.queue
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
        EXECUTE format('LOCK TABLE {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I IN ACCESS EXCLUSIVE MODE',
            'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
            'log_timers_' || s.copied, 'log_cursors_' || s.copied, 'log_claims_' || s.copied);
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
            ' OR EXISTS (SELECT FROM {{schema}}.%I) OR EXISTS (SELECT FROM {{schema}}.%I) OR EXISTS (SELECT FROM {{schema}}.%I)'
            ' OR EXISTS (SELECT FROM {{schema}}.%I)',
        'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
        'log_timers_' || s.copied, 'log_cursors_' || s.copied, 'log_claims_' || s.copied) INTO v_full;
    IF v_full THEN
        EXECUTE format('TRUNCATE {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I, {{schema}}.%I',
            'log_messages_' || s.copied, 'log_leases_' || s.copied, 'log_settles_' || s.copied,
            'log_timers_' || s.copied, 'log_cursors_' || s.copied, 'log_claims_' || s.copied);
    END IF;
    UPDATE {{schema}}.log_state SET cur = s.copied, since = clock_timestamp(), copied = NULL, copied_snap = NULL,
        seen_pos = (SELECT last_value FROM {{schema}}.log_pos);
    RETURN 'rotated';
END $$;

-- log_lag returns the subscriptions whose oldest unread event of their
-- topic is older than p_older_us: how many of the topic's events each has
-- not read, and the oldest one's time. Rotation keeps those rows for them.
CREATE FUNCTION {{schema}}.log_lag(p_older_us bigint)
RETURNS TABLE (topic text, queue text, unread bigint, oldest timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan STABLE AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    sm    record;
    u     record;
BEGIN
    FOR sm IN SELECT substr(k.queue, 12) AS t, substr(k.name, 5) AS q FROM {{schema}}.log_marks k
        WHERE k.name >= 'sub/' AND k.name < 'sub0' AND left(k.queue, 11) = 'fila.topic.'
            AND (k.until IS NULL OR k.until > now())
        ORDER BY 1, 2
    LOOP
        u := {{schema}}.log_unread('~t:' || sm.t, {{schema}}.log_newest_cursor('~s:' || sm.q || '/' || sm.t), v_now);
        CONTINUE WHEN u.oldest IS NULL OR u.oldest > v_now - p_older_us * interval '1 microsecond';
        topic := sm.t; queue := sm.q; unread := u.ready + u.delayed; oldest := u.oldest;
        RETURN NEXT;
    END LOOP;
END $$;
