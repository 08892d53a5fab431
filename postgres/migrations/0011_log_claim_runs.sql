-- Fila schema version 11: a claim stores its members as runs of positions,
-- and a member's receipt says which one it is.
--
-- Until version 10 a claim (log_claims, one row per receive that read batch
-- rows) held each member's id, message position and attempt in three
-- arrays: 28 bytes a member, which made a topic event read by ten
-- subscriptions cost 280 bytes of WAL besides its own row. Each of the
-- three follows from the position: the id is the message row's (a topic
-- row's copy id for the claim's queue), the attempt is the row's attempts
-- + 1 (a claim is only ever a row's first lease). So a claim now stores the
-- positions alone, as runs (runs: first and last position of each run of
-- consecutive ones; a receive's rows are mostly consecutive), and a
-- member's receipt carries its position: the claim's token is 8 random
-- bytes with the version nibble cleared and 8 zero bytes, and a member's
-- receipt is the same 8 bytes and then its position. A lease's own token is
-- a version 4 UUID, so the two never meet. Settlements, extensions and the
-- receipt locks of a member stay under the claim's token, as before.
--
-- Claims made before this version are converted; their members' receipts
-- are the claim's token, and fencing still finds them, by id.
--
-- log_receive also reads a batch part with one statement instead of a
-- PL/pgSQL loop over its rows, and returns a topic row's event id marked
-- '~' for the driver to compute the copy id. An ack of all of one claim's
-- members is one short call, log_ack_claim.

ALTER TABLE {{schema}}.log_claims ADD COLUMN runs bigint[];

-- log_runs returns the runs of the distinct positions p: first and last
-- position of each run of consecutive ones, in order; NULL for none.
CREATE FUNCTION {{schema}}.log_runs(p bigint[]) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
-- (PL/pgSQL, so that the plans are cached: as a SQL function, which is
-- planned at every call, it cost a microsecond a position.)
DECLARE
    s bigint[];
    e bigint[];
BEGIN
    SELECT array_agg(d.p ORDER BY d.p) FILTER (WHERE d.pr IS DISTINCT FROM d.p - 1),
        array_agg(d.p ORDER BY d.p) FILTER (WHERE d.nx IS DISTINCT FROM d.p + 1)
    INTO s, e
    FROM (SELECT u.p, lag(u.p) OVER w AS pr, lead(u.p) OVER w AS nx
          FROM (SELECT DISTINCT unnest(p) AS p) u WINDOW w AS (ORDER BY u.p)) d;
    RETURN (SELECT array_agg(v.x ORDER BY u.i, v.k) FROM unnest(s, e) WITH ORDINALITY AS u(s, e, i)
        CROSS JOIN LATERAL (VALUES (u.s, 0), (u.e, 1)) AS v(x, k));
END $$;

UPDATE {{schema}}.log_claims SET runs = {{schema}}.log_runs(msg_pos);
ALTER TABLE {{schema}}.log_claims ALTER COLUMN runs SET NOT NULL;
ALTER TABLE {{schema}}.log_claims DROP COLUMN ids, DROP COLUMN msg_pos, DROP COLUMN attempts;

-- log_in_runs reports whether position p is in runs r.
CREATE FUNCTION {{schema}}.log_in_runs(p bigint, r bigint[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT FROM generate_series(1, cardinality(r), 2) AS i WHERE p BETWEEN r[i] AND r[i + 1])
$$;

-- log_runs_size counts the positions in runs r.
CREATE FUNCTION {{schema}}.log_runs_size(r bigint[]) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT COALESCE(sum(r[i + 1] - r[i] + 1), 0)::bigint FROM generate_series(1, cardinality(r), 2) AS i
$$;

-- log_members returns the members of a claim of queue p_queue with runs
-- p_runs whose message rows are still there: position, delivered id (a
-- topic row's copy id) and the claim's attempt, by position.
CREATE FUNCTION {{schema}}.log_members(p_queue text, p_runs bigint[])
RETURNS TABLE (pos bigint, id uuid, attempt integer)
LANGUAGE plpgsql STABLE ROWS 20 SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT m.pos, CASE WHEN left(m.queue, 3) = '~t:' THEN {{schema}}.log_copy_id(m.id, p_queue) ELSE m.id END,
        m.attempts + 1
    FROM generate_series(1, cardinality(p_runs), 2) AS i
    CROSS JOIN LATERAL generate_series(p_runs[i], p_runs[i + 1]) AS g(p)
    CROSS JOIN LATERAL (SELECT x.pos, x.queue, x.id, x.attempts FROM {{schema}}.log_messages x
        WHERE x.pos = g.p LIMIT 1) m
    ORDER BY m.pos;
END $$;

-- log_rcpt_token returns the token a receipt's lease is kept under: a
-- claim member's (the version nibble of its UUID is 0; its first 8 bytes
-- are its claim's token's, its last 8 its position) its claim's, else the
-- receipt itself.
CREATE FUNCTION {{schema}}.log_rcpt_token(r uuid) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN get_byte(uuid_send(r), 6) < 16
        THEN encode(substring(uuid_send(r) FROM 1 FOR 8) || '\x0000000000000000'::bytea, 'hex')::uuid ELSE r END
$$;

-- log_rcpt_pos returns a member receipt's position (-1, no position, for
-- one that cannot be: 2^62 or more), else NULL.
CREATE FUNCTION {{schema}}.log_rcpt_pos(r uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN get_byte(uuid_send(r), 6) >= 16 THEN NULL
        WHEN get_byte(uuid_send(r), 8) >= 64 THEN -1
        ELSE ('x' || right(replace(r::text, '-', ''), 16))::bit(64)::bigint END
$$;

-- log_current returns the lease of message p_id under receipt p_token if
-- it is current, else NULL; its token is the one the lease is kept under
-- (a member's: its claim's). A member's lease is its claim's unless a
-- log_leases row of the message is newer: an extension (the claim's token)
-- or a redelivery (another token: the member's lease is over). It holds the
-- token's advisory lock until the transaction ends, so settlements of one
-- claim or lease are one after the other, and the expiry sweep, which takes
-- the same lock before it redelivers, never overlaps one.
CREATE OR REPLACE FUNCTION {{schema}}.log_current(p_id uuid, p_token uuid) RETURNS {{schema}}.log_leases
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l     {{schema}}.log_leases%ROWTYPE;
    n     {{schema}}.log_leases%ROWTYPE;
    k     {{schema}}.log_claims%ROWTYPE;
    v_tok uuid := {{schema}}.log_rcpt_token(p_token);
    v_pos bigint := {{schema}}.log_rcpt_pos(p_token);
    v_id  uuid;
    v_att integer;
BEGIN
    -- A lease row under the token: a lease of its own, or a claim member's
    -- extension, which outlives its claim when rotation leaves the claim
    -- behind (no member of it is live but through its extension).
    SELECT * INTO l FROM {{schema}}.log_leases x WHERE x.token = v_tok AND x.id = p_id LIMIT 1;
    IF l.pos IS NULL THEN
        SELECT * INTO k FROM {{schema}}.log_claims x WHERE x.token = v_tok LIMIT 1;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        IF v_pos IS NULL THEN
            -- A claim made before version 11: find the member by its id.
            SELECT u.pos, u.attempt INTO v_pos, v_att FROM {{schema}}.log_members(k.queue, k.runs) u
            WHERE u.id = p_id LIMIT 1;
            IF v_pos IS NULL THEN
                RETURN NULL;
            END IF;
        ELSE
            IF NOT {{schema}}.log_in_runs(v_pos, k.runs) THEN
                RETURN NULL;
            END IF;
            SELECT CASE WHEN left(m.queue, 3) = '~t:' THEN {{schema}}.log_copy_id(m.id, k.queue) ELSE m.id END,
                m.attempts + 1
            INTO v_id, v_att FROM {{schema}}.log_messages m WHERE m.pos = v_pos LIMIT 1;
            IF v_id IS DISTINCT FROM p_id THEN
                RETURN NULL;
            END IF;
        END IF;
        l.gen := k.gen; l.pos := k.pos; l.queue := k.queue; l.id := p_id; l.msg_pos := v_pos;
        l.attempt := v_att; l.token := v_tok; l.deadline := k.deadline; l.run_at := NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(v_tok::text));
    SELECT * INTO n FROM {{schema}}.log_leases x WHERE x.queue = l.queue AND x.id = p_id ORDER BY x.pos DESC LIMIT 1;
    IF FOUND AND n.pos >= l.pos THEN
        IF n.token <> v_tok THEN
            RETURN NULL;
        END IF;
        l := n;
    END IF;
    IF l.deadline <= clock_timestamp() THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = v_tok AND (s.id = p_id OR s.id IS NULL)) THEN
        RETURN NULL;
    END IF;
    RETURN l;
END $$;

-- log_ack settles the current leases among the refs and returns their ids.
-- The receipts' locks are taken first, in key order so two calls settling
-- the same leases cannot deadlock. Per claim: when the refs hold every
-- member (their positions are exactly the claim's), before its deadline,
-- and none of them was settled or extended alone, one settlement row ends
-- them all; otherwise each current lease gets its own.
CREATE OR REPLACE FUNCTION {{schema}}.log_ack(p_ids uuid[], p_tokens uuid[]) RETURNS SETOF text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_gen  smallint;
    v_tok  uuid;
    v_ids  uuid[];
    v_rs   uuid[];
    v_pos  bigint[];
    r_ids  uuid[] := '{}';
    r_rs   uuid[] := '{}';
    k      {{schema}}.log_claims%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), x.k)
    FROM (SELECT DISTINCT hashtext({{schema}}.log_rcpt_token(t)::text) AS k FROM unnest(p_tokens) AS t ORDER BY 1) x;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    FOR v_tok, v_ids, v_rs, v_pos IN
        SELECT u.tok, array_agg(u.id), array_agg(u.r), array_agg(DISTINCT u.pos) FILTER (WHERE u.pos IS NOT NULL)
        FROM (SELECT DISTINCT t.id, t.r, {{schema}}.log_rcpt_token(t.r) AS tok, {{schema}}.log_rcpt_pos(t.r) AS pos
              FROM unnest(p_ids, p_tokens) AS t(id, r)) u
        GROUP BY u.tok ORDER BY u.tok
    LOOP
        k := NULL;
        IF v_pos IS NOT NULL AND cardinality(v_pos) = cardinality(v_ids) THEN
            SELECT * INTO k FROM {{schema}}.log_claims x WHERE x.token = v_tok LIMIT 1;
        END IF;
        IF k.pos IS NOT NULL AND k.deadline > clock_timestamp()
            AND {{schema}}.log_runs(v_pos) = k.runs
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = v_tok)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases x WHERE x.token = v_tok) THEN
            INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind) VALUES (v_gen, k.queue, NULL, v_tok, 'a');
            DELETE FROM {{schema}}.log_dedup d WHERE d.queue = k.queue AND d.id = ANY (v_ids);
            RETURN QUERY SELECT x::text FROM unnest(v_ids) AS x;
        ELSE
            r_ids := r_ids || v_ids;
            r_rs := r_rs || v_rs;
        END IF;
    END LOOP;
    IF cardinality(r_ids) = 0 THEN
        RETURN;
    END IF;
    -- The others one by one, in one statement: log_current's rule, set-based.
    RETURN QUERY WITH u AS (
        SELECT t.id, {{schema}}.log_rcpt_token(t.r) AS token, {{schema}}.log_rcpt_pos(t.r) AS mpos
        FROM unnest(r_ids, r_rs) AS t(id, r)
    ), cur AS (
        SELECT u.id, u.token, COALESCE(pl.queue, kc.queue) AS queue
        FROM u
        -- A lease row under this token: a lease of its own or a claim
        -- member's extension.
        LEFT JOIN LATERAL (SELECT x.queue, x.pos FROM {{schema}}.log_leases x
            WHERE x.token = u.token AND x.id = u.id LIMIT 1) pl ON true
        -- Else the claim, if the receipt's position is a member's and the
        -- message there is this one (found by id for a claim made before
        -- version 11).
        LEFT JOIN LATERAL (SELECT c.queue, c.pos, c.deadline FROM {{schema}}.log_claims c
            WHERE pl.pos IS NULL AND c.token = u.token
                AND CASE WHEN u.mpos IS NOT NULL THEN {{schema}}.log_in_runs(u.mpos, c.runs)
                        AND EXISTS (SELECT FROM {{schema}}.log_messages m WHERE m.pos = u.mpos
                            AND CASE WHEN left(m.queue, 3) = '~t:' THEN {{schema}}.log_copy_id(m.id, c.queue)
                                ELSE m.id END = u.id)
                    ELSE EXISTS (SELECT FROM {{schema}}.log_members(c.queue, c.runs) z WHERE z.id = u.id) END
            LIMIT 1) kc ON true
        -- The message's newest lease row, which decides when it is newer.
        LEFT JOIN LATERAL (SELECT x.pos, x.token, x.deadline FROM {{schema}}.log_leases x
            WHERE x.queue = COALESCE(pl.queue, kc.queue) AND x.id = u.id ORDER BY x.pos DESC LIMIT 1) n ON true
        WHERE COALESCE(pl.pos, kc.pos) IS NOT NULL
            AND CASE WHEN n.pos >= COALESCE(pl.pos, kc.pos) THEN n.token = u.token AND n.deadline > clock_timestamp()
                ELSE kc.deadline > clock_timestamp() END
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles z WHERE z.token = u.token AND (z.id = u.id OR z.id IS NULL))
    ), s AS (
        INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind)
        SELECT DISTINCT v_gen, cur.queue, cur.id, cur.token, 'a' FROM cur
        RETURNING queue, id
    ), d AS (
        DELETE FROM {{schema}}.log_dedup x USING s WHERE x.id = s.id AND x.queue = s.queue
    )
    SELECT s.id::text FROM s;
END $$;

-- log_ack_claim is log_ack for refs that the driver found to be members
-- of one claim, each once, p_runs being the runs of their positions: when
-- those are the claim's runs, before its deadline, and no member was
-- settled or extended alone, one settlement row ends the claim and the
-- result is the one row '*' (every ref acked). Otherwise it is log_ack's.
-- A dedup key held by a member is found from the claim, and only when the
-- queue holds a key at all.
CREATE FUNCTION {{schema}}.log_ack_claim(p_token uuid, p_runs bigint[], p_ids uuid[], p_tokens uuid[])
RETURNS SETOF text
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    k     {{schema}}.log_claims%ROWTYPE;
    v_gen smallint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fila.log.token.{{schema}}'), hashtext(p_token::text));
    SELECT * INTO k FROM {{schema}}.log_claims x WHERE x.token = p_token LIMIT 1;
    IF NOT FOUND OR k.deadline <= clock_timestamp() OR k.runs <> p_runs
        OR EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = p_token)
        OR EXISTS (SELECT FROM {{schema}}.log_leases x WHERE x.token = p_token) THEN
        RETURN QUERY SELECT * FROM {{schema}}.log_ack(p_ids, p_tokens);
        RETURN;
    END IF;
    SELECT s.cur INTO v_gen FROM {{schema}}.log_state s;
    INSERT INTO {{schema}}.log_settles (gen, queue, id, token, kind) VALUES (v_gen, k.queue, NULL, p_token, 'a');
    IF EXISTS (SELECT FROM {{schema}}.log_dedup d WHERE d.queue = k.queue) THEN
        DELETE FROM {{schema}}.log_dedup d WHERE d.queue = k.queue
            AND d.id IN (SELECT u.id FROM {{schema}}.log_members(k.queue, k.runs) u);
    END IF;
    RETURN NEXT '*';
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
    v_limit    integer;
    v_got      integer;
    v_lwm      timestamptz;
    v_lwm_pos  bigint;
    v_ticks    integer;
    v_topic    text;
    v_stream   text;
    v_key      text;
    v_xipart   boolean;
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
                        last_error := COALESCE(m.last_error, ''); was := r.deadline;
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
    -- A stream without a row has nothing to read, and no batch need be
    -- kept for it: one index probe instead of two batch reads. (A
    -- subscription's own stream, which holds only its retries, is empty
    -- nearly always.)
    -- (Per partition, each an ordered index scan that stops at its first
    -- row: over the parent the plan was a bitmap of every row of the
    -- stream, 4.5 ms for 121,000 of them.)
    CONTINUE WHEN NOT EXISTS (
        (SELECT FROM {{schema}}.log_messages_0 x WHERE x.queue = v_stream ORDER BY x.txid, x.pos LIMIT 1)
        UNION ALL
        (SELECT FROM {{schema}}.log_messages_1 x WHERE x.queue = v_stream ORDER BY x.txid, x.pos LIMIT 1)
        UNION ALL
        (SELECT FROM {{schema}}.log_messages_2 x WHERE x.queue = v_stream ORDER BY x.txid, x.pos LIMIT 1));

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
            -- An earlier call read the batch to its end (below).
            EXIT WHEN NOT v_xipart AND k.ctxid >= v_hix;
            IF NOT v_xipart AND k.ctxid < v_lox THEN
                -- Past the in-progress part: the range part starts at
                -- xmax(lo). The row comparison alone then positions the
                -- index scan; beside a scalar txid >= xmax(lo) it was only
                -- a filter, and each receive walked the batch from its
                -- start (a drain of one large batch was quadratic).
                k.ctxid := v_lox;
                k.cpos := 0;
            END IF;
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
            ), t AS (
                INSERT INTO {{schema}}.log_timers (gen, queue, id, msg_pos, run_at)
                SELECT v_gen, p_queue, CASE WHEN v_topic IS NULL THEN b.id ELSE {{schema}}.log_copy_id(b.id, p_queue) END,
                    -- Ready, read by ReceiveDelayed: a timer due now, so that
                    -- the delayed rows behind it are read too.
                    b.pos, CASE WHEN b.run_at > v_now THEN b.run_at ELSE GREATEST(b.run_at, c.twm) END
                FROM b WHERE p_early OR b.run_at > v_now
            ), z AS (
                -- Rows read, the last one's place, rows leased, and the
                -- first and the last positions of the runs they make.
                SELECT set_config('fila.log_part', (SELECT count(*) FROM b) || ' ' || l.txid || ' ' || l.pos || ' '
                    || r.n || ' ' || COALESCE(r.starts::text, '{}') || ' ' || COALESCE(r.ends::text, '{}'), true) AS s
                FROM (SELECT b.txid, b.pos FROM b ORDER BY b.txid DESC, b.pos DESC LIMIT 1) l,
                    (SELECT count(*) AS n,
                        array_agg(d.pos ORDER BY d.pos) FILTER (WHERE d.pr IS DISTINCT FROM d.pos - 1) AS starts,
                        array_agg(d.pos ORDER BY d.pos) FILTER (WHERE d.nx IS DISTINCT FROM d.pos + 1) AS ends
                    FROM (SELECT r.pos, lag(r.pos) OVER w AS pr, lead(r.pos) OVER w AS nx
                        FROM b r WHERE NOT (p_early OR r.run_at > v_now) WINDOW w AS (ORDER BY r.pos)) d) r
            )
            -- A topic row is delivered under its copy id, which the driver
            -- computes from the event's id marked with a '~' (no id starts
            -- with one): SHA-256 in SQL cost about 5 us a row here.
            SELECT
                CASE WHEN v_topic IS NULL THEN x.id::text ELSE '~' || x.id::text END,
                x.kind, x.body, x.headers, x.enqueued_at, x.attempts + 1, x.max_attempts, COALESCE(x.dedup_key, ''),
                v_cpfx || left(lpad(to_hex(x.pos), 16, '0'), 4) || '-' || right(lpad(to_hex(x.pos), 16, '0'), 12),
                v_deadline, COALESCE(x.last_error, ''), x.run_at
            FROM b AS x
            WHERE NOT (p_early OR x.run_at > v_now)
            -- z is read to its end whatever the rows: a branch of its own.
            UNION ALL
            SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM z WHERE z.s IS NULL;
            v_s := string_to_array(current_setting('fila.log_part'), ' ');
            v_got := COALESCE(v_s[1]::integer, 0);
            IF v_got > 0 THEN
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
                -- Full: the part being read may hold more.
                CONTINUE WHEN v_n < p_max; -- some rows became timers: read on
                v_done := false;
                EXIT;
            END IF;
            IF NOT v_xipart THEN
                -- The batch is read to its end. The cursor says so (its
                -- place is past every row the batch can hold: they all
                -- have txids below xmax(hi)), so that the next call does
                -- not read the batch again to find it empty.
                k.ctxid := v_hix;
                k.cpos := 0;
                EXIT;
            END IF;
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
    ), claims AS (
        SELECT DISTINCT ON (k.pos) k.* FROM {{schema}}.log_claims k
        WHERE k.queue = p_queue AND (k.deadline, k.pos) > (c.lwm, c.lwm_pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = k.token AND s.id IS NULL)
    ), claimed AS (
        -- Members of claims that are neither settled nor leased again. Before
        -- its deadline, a member leased again was extended first, under the
        -- claim's token, so counting the ids settled or leased under it is
        -- enough; after it, each member is looked at.
        SELECT k.deadline, {{schema}}.log_runs_size(k.runs) - (SELECT count(*) FROM (
                SELECT s.id FROM {{schema}}.log_settles s WHERE s.token = k.token AND s.id IS NOT NULL
                UNION SELECT l.id FROM {{schema}}.log_leases l WHERE l.token = k.token) z) AS n
        FROM claims k WHERE k.deadline > v_now
        UNION ALL
        SELECT k.deadline, 1 FROM claims k
        CROSS JOIN LATERAL {{schema}}.log_members(p_queue, k.runs) cm
        WHERE k.deadline <= v_now
            AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = p_queue AND l2.id = cm.id AND l2.pos > k.pos)
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = k.token AND s.id = cm.id)
    ), due AS (
        SELECT run_at AS at, false AS held, 1::bigint AS n FROM timers
        UNION ALL SELECT CASE WHEN deadline > v_now THEN deadline ELSE GREATEST(deadline, run_at) END,
            deadline > v_now, 1 FROM leases
        UNION ALL SELECT deadline, deadline > v_now, n FROM claimed
    )
    SELECT COALESCE(sum(n) FILTER (WHERE NOT held AND at <= v_now), 0)::bigint,
        COALESCE(sum(n) FILTER (WHERE NOT held AND at > v_now), 0)::bigint,
        COALESCE(sum(n) FILTER (WHERE held), 0)::bigint,
        min(at) FILTER (WHERE NOT held AND at <= v_now AND n > 0)
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

-- log_rotate_copy: a claim's members are read from its runs.
CREATE OR REPLACE FUNCTION {{schema}}.log_rotate_copy(p_interval_us bigint, p_retention_us bigint DEFAULT 0) RETURNS text
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
        CROSS JOIN LATERAL {{schema}}.log_members(k.queue, k.runs) u
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
        INSERT INTO {{schema}}.log_claims (gen, pos, queue, token, deadline, runs)
        SELECT s.cur, k.pos, k.queue, k.token, k.deadline, lv.runs
        FROM {{schema}}.log_claims k
        JOIN qc ON qc.queue = k.queue AND (k.deadline, k.pos) > (qc.lwm, qc.lwm_pos)
        CROSS JOIN LATERAL (
            SELECT {{schema}}.log_runs(array_agg(u.pos)) AS runs
            FROM {{schema}}.log_members(k.queue, k.runs) u
            WHERE NOT EXISTS (SELECT FROM {{schema}}.log_settles x WHERE x.token = k.token AND x.id = u.id)
                AND NOT EXISTS (SELECT FROM {{schema}}.log_leases l2 WHERE l2.queue = k.queue AND l2.id = u.id AND l2.pos > k.pos)
        ) lv
        WHERE k.gen = p AND lv.runs IS NOT NULL
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

-- log_topic_rewind: a claim's members are read from its runs.
CREATE OR REPLACE FUNCTION {{schema}}.log_topic_rewind(p_topic text, p_queue text, p_to timestamptz) RETURNS boolean
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
        CROSS JOIN LATERAL {{schema}}.log_members(k.queue, k.runs) u
        JOIN {{schema}}.log_messages m ON m.pos = u.pos
        WHERE k.queue = p_queue
            AND m.queue = v_stream AND m.txid >= v_x
            AND NOT EXISTS (SELECT FROM {{schema}}.log_settles s WHERE s.token = k.token AND (s.id = u.id OR s.id IS NULL));
    END IF;
    INSERT INTO {{schema}}.log_cursors (gen, queue, lo, hi, ctxid, cpos, lwm, lwm_pos, twm, twm_pos)
    VALUES (v_gen, '~s:' || p_queue || '/' || p_topic, v_lo, v_snap, '0', 0, '-infinity', 0, '-infinity', 0);
    RETURN true;
END $$;

-- No JIT compilation in the mode's functions. log_members expands runs with
-- two generate_series, which the planner estimates at a million rows: over
-- jit_above_cost, so every call compiled its plan with LLVM, 170 ms for a
-- claim of 16 members, and a receive sweeping the claims of crashed workers
-- ran for seconds (rotation's copy ran into its 30 s bound). The statements
-- here are short; none gains from JIT. The GUC a function sets holds for the
-- functions it calls; log_copy_id, which runs no query, is left as it is
-- (a SET clause costs each call), and the SQL functions, so that they are
-- inlined.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = '{{schema}}'::regnamespace AND p.proname LIKE 'log\_%' AND l.lanname = 'plpgsql'
            AND p.proname <> 'log_copy_id'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET jit = off', f);
    END LOOP;
END $$;
