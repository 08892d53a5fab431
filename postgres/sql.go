package postgres

import (
	"fmt"
	"strings"

	"github.com/fila-go/fila/backend"
)

// statements holds the SQL text of every operation for one schema. The
// schema is inlined (validated and quoted) so pgx can cache one prepared
// statement per text.
type statements struct {
	channel string

	enqueue      string // plain insert, no dedup keys in the batch
	enqueueDedup string // insert with ON CONFLICT DO NOTHING RETURNING id
	enqueueOne   string // one message, no dedup key
	enqueueOneDe string // one message with a dedup key
	holders      string
	notify       string
	notifyAsync  string
	notifyMany   string

	claim        string
	claimDelayed string
	nextDue      string

	ack string
	// ackClaim settles a whole claim of the log mode at once (log_ack_claim;
	// empty in the skip-locked mode).
	ackClaim string
	// ackWhole settles a whole claim from its token and runs alone
	// (log_ack_whole; empty in the skip-locked mode).
	ackWhole string
	retry    string
	dead     string
	extend   string

	stats      string
	deadCounts string
	deadList   string
	deadReplay string
	deadPurge  string
	deadImport string

	queueList   string
	queueDelete string

	// MessageList (skip-locked mode only; empty in the log mode): a page
	// of one state's messages, and the messages named by id.
	listReady   string
	listDelayed string
	listLeased  string
	listIDs     string

	markSet    string // create or replace
	markSetNew string // create unless a live mark exists (onlyNew)
	markGet    string
	markDelete string
	markList   string

	rotateCopy     string // log mode only
	rotateTruncate string // log mode only

	subscribe     string    // log mode only
	rewind        string    // log mode only
	unsubscribe   string    // log mode only
	publish       string    // log mode only
	publishCopy   [4]string // log mode only: a publish by COPY, around the topic's and the kinds' literals
	subscriptions string    // log mode only
	lag           string    // log mode only
}

// channelName returns the LISTEN/NOTIFY channel of a schema.
func channelName(schema string) string { return "fila_" + schema }

func newStatements(schema string) statements {
	s := quoteIdent(schema)
	r := strings.NewReplacer("{{s}}", s)
	// The enqueue statements take the levels as $12 (enqueueArgs.params);
	// the log mode's, which store none, take the first eleven parameters
	// only.
	const insert = `INSERT INTO {{s}}.messages
	(id, queue, kind, body, headers, enqueued_at, visible_at, max_attempts, dedup_key, attempts, priority)
SELECT r.id, $1, r.kind, r.body, r.headers::json, r.enq,
	COALESCE(r.run_at, now() + r.delay_us * interval '1 microsecond'), r.max_attempts, r.dedup, r.attempts, r.priority
FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::timestamptz[],
	$8::int8[], $9::int4[], $10::text[], $11::int4[], $12::int2[]) WITH ORDINALITY
	AS r(id, kind, body, headers, enq, run_at, delay_us, max_attempts, dedup, attempts, priority, ord)
ORDER BY r.ord`
	const insertOne = `INSERT INTO {{s}}.messages
	(id, queue, kind, body, headers, enqueued_at, visible_at, max_attempts, dedup_key, attempts, priority)
VALUES ($2, $1, $3, $4, $5::json, $6,
	COALESCE($7::timestamptz, now() + $8::int8 * interval '1 microsecond'), $9, $10, $11, $12::int2)`
	const onConflict = `
ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
RETURNING id::text`
	return statements{
		channel:      channelName(schema),
		enqueue:      r.Replace(insert),
		enqueueDedup: r.Replace(insert + onConflict),
		enqueueOne:   r.Replace(insertOne),
		enqueueOneDe: r.Replace(insertOne + onConflict),
		holders:      r.Replace(`SELECT dedup_key, id::text FROM {{s}}.messages WHERE queue = $1 AND dedup_key = ANY($2::text[])`),
		notify:       `SELECT pg_notify($1, $2)`,
		// A wake-up sent after the messages committed needs no durability:
		// commit it without waiting for the WAL flush.
		notifyAsync: `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`,
		// The same for several queues, in one transaction (the notifier's).
		notifyMany: `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, q) FROM unnest($2::text[]) AS q`,

		// One statement claims ready messages and expired leases: both are
		// rows whose visible_at has passed. It takes them in the order
		// priority DESC, visible_at, id: level by level, highest first
		// (levels, a VALUES list in that order, is the outer side of a
		// nested loop, whose rows come out in its order), each level's
		// claimable rows one range of messages_claim (queue, priority DESC,
		// visible_at, id) that ends at the level's first row not yet due.
		// One scan of the queue in index order would instead read past
		// every leased and delayed row of a level before reaching the next.
		// The rows are pulled, and locked, one at a time: the outer LIMIT
		// stops the loop, so no level is read, or locked, beyond what the
		// claim takes. SKIP LOCKED lets competing receivers take disjoint
		// rows without waiting. A rare expired lease taken before its run-at
		// (run_at set, see ReceiveDelayed) is not handed out: the claim
		// turns it back into a delayed message due at its run-at. Keeping
		// that check out of the WHERE clause keeps each level's plan an
		// ordered index scan that stops after LIMIT rows, even on a table
		// without statistics.
		claim: r.Replace(`WITH c AS (
	SELECT m.id, m.visible_at FROM ` + levels + ` AS p(l)
	CROSS JOIN LATERAL (
		SELECT id, visible_at FROM {{s}}.messages
		WHERE queue = $1 AND priority = p.l AND visible_at <= now()
		ORDER BY visible_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) m
	LIMIT $2
), u AS (
	UPDATE {{s}}.messages m
	SET attempts = CASE WHEN m.run_at > now() THEN m.attempts ELSE m.attempts + 1 END,
		lease_token = CASE WHEN m.run_at > now() THEN NULL ELSE gen_random_uuid() END,
		visible_at = CASE WHEN m.run_at > now() THEN m.run_at ELSE now() + $3 * interval '1 microsecond' END,
		run_at = NULL
	FROM c
	WHERE m.id = c.id
	RETURNING m.id, m.kind, m.body, m.headers, m.enqueued_at, m.attempts, m.max_attempts,
		m.dedup_key, m.lease_token, m.visible_at, m.last_error, c.visible_at AS was, m.priority
)
SELECT id::text, kind, body, headers, enqueued_at, attempts, max_attempts,
	COALESCE(dedup_key, ''), lease_token::text, visible_at, COALESCE(last_error, ''), was, priority
FROM u WHERE lease_token IS NOT NULL`),
		// Delayed messages not leased and expired leases taken before their
		// run-at (ReceiveDelayed), oldest run-at first, whatever their
		// level (they take it when due; the level is returned, for the
		// relay to carry over). run_at keeps the run-at while the early
		// lease lasts.
		claimDelayed: r.Replace(`WITH c AS (
	SELECT id, COALESCE(run_at, visible_at) AS due FROM {{s}}.messages
	WHERE queue = $1 AND (
		(lease_token IS NULL AND visible_at > now()) OR
		(lease_token IS NOT NULL AND visible_at <= now() AND run_at > now()))
	ORDER BY due, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.messages m
SET attempts = m.attempts + 1,
	lease_token = gen_random_uuid(),
	visible_at = now() + $3 * interval '1 microsecond',
	run_at = c.due
FROM c
WHERE m.id = c.id
RETURNING m.id::text, m.kind, m.body, m.headers, m.enqueued_at, m.attempts, m.max_attempts,
	COALESCE(m.dedup_key, ''), m.lease_token::text, m.visible_at, COALESCE(m.last_error, ''), c.due, m.priority`),
		// How long until the queue's next message becomes claimable (a
		// delayed run-at or a lease deadline), in microseconds; NULL when the
		// queue is empty. An expired early lease counts as due now: the next
		// claim turns it back into a delayed message. It runs in the claim's
		// transaction, after the claim: clock_timestamp(), not the
		// transaction's start, is now. The least of the levels' first
		// visible_at: one probe of messages_claim per level, where a min
		// over the queue would read all its rows (visible_at comes after
		// priority in the index).
		nextDue: r.Replace(`SELECT (extract(epoch FROM (min(n.visible_at) - clock_timestamp())) * 1e6)::int8
FROM ` + levels + ` AS p(l)
CROSS JOIN LATERAL (
	SELECT visible_at FROM {{s}}.messages WHERE queue = $1 AND priority = p.l ORDER BY visible_at LIMIT 1
) n`),

		ack: r.Replace(`DELETE FROM {{s}}.messages m
USING unnest($1::uuid[], $2::uuid[]) AS r(id, token)
WHERE m.id = ANY($1::uuid[]) AND m.id = r.id AND m.lease_token = r.token AND m.visible_at > now()
RETURNING m.id::text`),
		// Retry notifies the queue so receivers blocked elsewhere, sleeping
		// until the old lease deadline, see the earlier run-at.
		retry: r.Replace(`WITH u AS (
	UPDATE {{s}}.messages
	SET lease_token = NULL,
		-- GREATEST skips NULL: only a message taken early keeps its run-at.
		visible_at = GREATEST(now() + $3 * interval '1 microsecond', run_at),
		run_at = NULL,
		last_error = COALESCE(NULLIF($4, ''), last_error)
	WHERE id = $1 AND lease_token = $2 AND visible_at > now()
	RETURNING queue
)
SELECT pg_notify($5, queue) FROM u`),
		dead: r.Replace(`WITH d AS (
	DELETE FROM {{s}}.messages WHERE id = $1 AND lease_token = $2 AND visible_at > now()
	RETURNING id, queue, kind, body, headers, enqueued_at, max_attempts, dedup_key, priority
)
INSERT INTO {{s}}.dead (id, queue, kind, body, headers, enqueued_at, attempts, max_attempts, dedup_key, reason, priority)
SELECT id, queue, kind, body, headers, enqueued_at, $4, max_attempts, dedup_key, $3, priority FROM d`),
		extend: r.Replace(`UPDATE {{s}}.messages
SET visible_at = now() + $3 * interval '1 microsecond'
WHERE id = $1 AND lease_token = $2 AND visible_at > now()
RETURNING visible_at`),

		// Ready: claimable now (expired leases included). Delayed: not
		// leased and not due, or an expired early lease whose run-at is
		// ahead. Leased: lease current.
		stats: r.Replace(`SELECT
	count(*) FILTER (WHERE visible_at <= now() AND (run_at IS NULL OR run_at <= now())),
	count(*) FILTER (WHERE (lease_token IS NULL AND visible_at > now()) OR (visible_at <= now() AND run_at > now())),
	count(*) FILTER (WHERE lease_token IS NOT NULL AND visible_at > now()),
	min(GREATEST(visible_at, run_at)) FILTER (WHERE visible_at <= now() AND (run_at IS NULL OR run_at <= now())),
	ARRAY[` + readyByLevel() + `]
FROM {{s}}.messages WHERE queue = $1`),
		deadCounts: r.Replace(`SELECT kind, count(*) FROM {{s}}.dead WHERE queue = $1 GROUP BY kind`),
		deadList:   r.Replace(strings.ReplaceAll(deadListSQL, "{{priority}}", "priority")),
		// Replayed messages are ready at once, at their level, with attempts
		// reset, the dedup key dropped and no last error (like a fresh
		// enqueue).
		deadReplay: r.Replace(`WITH d AS (
	DELETE FROM {{s}}.dead
	WHERE queue = $1 AND ($2 = '' OR kind = $2) AND ($3::uuid[] IS NULL OR id = ANY($3::uuid[]))
	RETURNING id, queue, kind, body, headers, enqueued_at, max_attempts, priority
)
INSERT INTO {{s}}.messages (id, queue, kind, body, headers, enqueued_at, visible_at, attempts, max_attempts, priority)
SELECT id, queue, kind, body, headers, enqueued_at, now(), 0, max_attempts, priority FROM d`),
		// The levels are $12 (the log mode's statement, which stores none,
		// takes the first eleven parameters only).
		deadImport: r.Replace(`INSERT INTO {{s}}.dead
	(id, queue, kind, body, headers, enqueued_at, attempts, max_attempts, dedup_key, reason, dead_at, priority)
SELECT r.id, $1, r.kind, r.body, r.headers::json, r.enq, r.attempts, r.max_attempts, r.dedup, r.reason,
	COALESCE(r.dead_at, now()), r.priority
FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::int4[], $8::int4[],
	$9::text[], $10::text[], $11::timestamptz[], $12::int2[]) WITH ORDINALITY
	AS r(id, kind, body, headers, enq, attempts, max_attempts, dedup, reason, dead_at, priority, ord)
ORDER BY r.ord
ON CONFLICT (id) DO NOTHING`),
		deadPurge: r.Replace(`DELETE FROM {{s}}.dead
WHERE queue = $1 AND ($2 = '' OR kind = $2) AND ($3::uuid[] IS NULL OR id = ANY($3::uuid[]))`),

		// The distinct queue names of both tables by a loose index scan:
		// each step of the recursion is one probe of an index whose leading
		// column is queue (messages_claim, dead_list) for the next name
		// after the last one, so the cost grows with the number of queues,
		// not of rows. The final sort is bytewise (COLLATE "C"), like Go's.
		queueList: r.Replace(`WITH RECURSIVE m(queue) AS (
	(SELECT queue FROM {{s}}.messages ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT n.queue FROM m, LATERAL (
		SELECT queue FROM {{s}}.messages WHERE queue > m.queue ORDER BY queue LIMIT 1) n
), d(queue) AS (
	(SELECT queue FROM {{s}}.dead ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT n.queue FROM d, LATERAL (
		SELECT queue FROM {{s}}.dead WHERE queue > d.queue ORDER BY queue LIMIT 1) n
)
SELECT queue FROM (SELECT queue FROM m UNION SELECT queue FROM d) u
ORDER BY queue COLLATE "C"`),
		// The deletes run in one statement, so atomically; a data-modifying
		// WITH runs whether or not the main query reads it.
		queueDelete: r.Replace(`WITH m AS (
	DELETE FROM {{s}}.messages WHERE queue = $1
), d AS (
	DELETE FROM {{s}}.dead WHERE queue = $1
), k AS (
	DELETE FROM {{s}}.marks WHERE queue = $1
)
SELECT 1`),

		// See browse.go: each level's rows of the state, by one range of
		// messages_claim, levels highest first, from the cursor on.
		listReady:   r.Replace(messageListSQL(condReady)),
		listDelayed: r.Replace(messageListSQL(condDelayed)),
		listLeased:  r.Replace(messageListSQL(condLeased)),
		listIDs:     r.Replace(messageListIDsSQL),

		// A plain upsert. The WITH deletes a few of the queue's other
		// expired marks on the way (see markSweep).
		markSet: r.Replace(markSweep + `
INSERT INTO {{s}}.marks AS k (queue, name, until) VALUES ($1, $2, $3::timestamptz)
ON CONFLICT (queue, name) DO UPDATE SET until = EXCLUDED.until`),
		// Inserts the mark, or takes over a row whose mark has expired; a
		// live one is left alone and the command tag says 0 rows. INSERT ...
		// ON CONFLICT decides under the row's lock, on its latest committed
		// version, so of concurrent callers in any number of sessions
		// exactly one stores the mark.
		markSetNew: r.Replace(markSweep + `
INSERT INTO {{s}}.marks AS k (queue, name, until) VALUES ($1, $2, $3::timestamptz)
ON CONFLICT (queue, name) DO UPDATE SET until = EXCLUDED.until
WHERE k.until IS NOT NULL AND k.until <= now()`),
		markGet: r.Replace(`SELECT EXISTS (SELECT FROM {{s}}.marks
	WHERE queue = $1 AND name = $2 AND (until IS NULL OR until > now()))`),
		markDelete: r.Replace(`DELETE FROM {{s}}.marks WHERE queue = $1 AND name = $2`),
		// The prefix test compares the first length($2) characters, so
		// '%', '_' and '\' in a name or prefix are plain characters (no
		// LIKE pattern); name >= $2 lets the primary key (bytewise, COLLATE
		// "C" on the column) start the range at the prefix. The WITH deletes
		// the queue's expired marks (all of them, up to 1000) while the
		// list is read: the snapshot is the same, so the list filters them
		// out itself.
		markList: r.Replace(`WITH gone AS (
	DELETE FROM {{s}}.marks
	WHERE queue = $1 AND name = ANY(ARRAY(
		SELECT name FROM {{s}}.marks
		WHERE queue = $1 AND until <= now()
		LIMIT 1000
		FOR UPDATE SKIP LOCKED))
)
SELECT name FROM {{s}}.marks
WHERE queue = $1 AND name >= $2::text AND left(name, length($2::text)) = $2::text
	AND (until IS NULL OR until > now())
ORDER BY name`),
	}
}

// levels is a VALUES list of the message levels, highest first: the outer
// side of the claim's and nextDue's per-level probes of messages_claim.
var levels = func() string {
	var b strings.Builder
	b.WriteString("(VALUES ")
	for p := backend.MaxPriority; p >= 0; p-- {
		fmt.Fprintf(&b, "(%d::int2)", p)
		if p > 0 {
			b.WriteString(", ")
		}
	}
	b.WriteString(")")
	return b.String()
}()

// deadListSQL pages through a queue's dead letters; {{priority}} is the
// level's column (the log mode's log_dead has none, and its statement reads
// 0 there).
const deadListSQL = `SELECT id::text, kind, CASE WHEN $7 THEN NULL ELSE body END, headers, enqueued_at, attempts, max_attempts,
	COALESCE(dedup_key, ''), reason, dead_at, {{priority}}
FROM {{s}}.dead
WHERE queue = $1 AND ($2 = '' OR kind = $2) AND ($3::timestamptz IS NULL OR (dead_at, id) > ($3, $4::uuid))
	AND ($6::uuid[] IS NULL OR id = ANY($6::uuid[]))
ORDER BY dead_at, id
LIMIT $5`

// markSweep is the WITH clause of MarkSet: it deletes up to 16 of the
// queue's expired marks other than the one being set (a statement must
// not touch the row its INSERT ... ON CONFLICT may update), found by
// marks_expiry. Rows another transaction has locked (being set again, or
// swept by another caller) are skipped rather than waited for, so the sweep
// never blocks or deadlocks a MarkSet. It only keeps the table from
// growing: an expired mark counts as absent whether or not it was swept.
const markSweep = `WITH gone AS (
	DELETE FROM {{s}}.marks
	WHERE queue = $1 AND name = ANY(ARRAY(
		SELECT name FROM {{s}}.marks
		WHERE queue = $1 AND until <= now() AND name <> $2
		LIMIT 16
		FOR UPDATE SKIP LOCKED))
)`

// readyByLevel returns the stats statement's ready count of each level,
// 0 to backend.MaxPriority, as a list of columns.
func readyByLevel() string {
	cols := make([]string, backend.MaxPriority+1)
	for l := range cols {
		cols[l] = fmt.Sprintf("count(*) FILTER (WHERE priority = %d AND visible_at <= now() AND (run_at IS NULL OR run_at <= now()))", l)
	}
	return strings.Join(cols, ", ")
}
