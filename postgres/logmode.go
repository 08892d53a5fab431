package postgres

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Storage modes (Options.Mode, URL parameter fila_mode).
const (
	// ModeSkipLocked keeps one row per pending message, updated by claims
	// and deleted by acks, claimed with FOR UPDATE SKIP LOCKED. It is the
	// default.
	ModeSkipLocked = "skiplocked"
	// ModeLog keeps append-only rows in three rotating generations of
	// tables, emptied by TRUNCATE: no dead tuple per message, so an open
	// transaction that holds back vacuum does not slow it down.
	ModeLog = "log"
)

// Defaults of the log mode.
const (
	// DefaultRotateInterval is how long a generation of the log mode's
	// tables takes new rows before rotation empties the oldest one.
	DefaultRotateInterval = time.Minute
	// rotateLockTimeout bounds how long rotation's TRUNCATE waits for the
	// partitions' locks, during which the queries that need them wait
	// behind it.
	rotateLockTimeout = 50 * time.Millisecond
	// rotateLockTries is how many times one check tries the TRUNCATE's
	// locks, rotateLockPause apart.
	rotateLockTries = 5
	rotateLockPause = 100 * time.Millisecond
	// maxRotateCheck is the longest pause between two rotation checks.
	maxRotateCheck = 5 * time.Second
)

// newLogStatements returns the statements of the log mode. The functions
// they call are defined in migrations/0005_log.sql and replaced by later
// ones (0009_log_topics.sql adds topics and batch leases, and is the newest
// version of log_receive, log_ack, log_current, log_retry, log_bury,
// log_stats, log_queue_delete and rotation's two);
// the statements keep the
// parameters and result columns of the skip-locked mode's, so the Go code
// around them (notifications, waiting, dedup holders, paging) is shared.
// Message levels (schema version 18, 0018_log_priority.sql) are a column of
// the rows and choose a message's stream (levelStream).
func newLogStatements(schema string) statements {
	base := newStatements(schema)
	s := quoteIdent(schema)
	r := strings.NewReplacer("{{s}}", s)
	// Dead letters and marks use the log mode's own tables, of the same
	// shape.
	retable := strings.NewReplacer(s+".dead ", s+".log_dead ", s+".dead\n", s+".log_dead\n",
		s+".marks ", s+".log_marks ", s+".marks\n", s+".log_marks\n")
	insert := `INSERT INTO {{s}}.log_messages
	(gen, id, queue, kind, body, headers, enqueued_at, run_at, max_attempts, dedup_key, attempts, priority)
SELECT (SELECT cur FROM {{s}}.log_state), r.id, ` + levelStream("r.priority", "$1") + `, r.kind, r.body, r.headers::json, r.enq,
	COALESCE(r.run_at, now() + r.delay_us * interval '1 microsecond'), r.max_attempts, r.dedup, r.attempts, r.priority
FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::timestamptz[],
	$8::int8[], $9::int4[], $10::text[], $11::int4[], $12::int2[]) WITH ORDINALITY
	AS r(id, kind, body, headers, enq, run_at, delay_us, max_attempts, dedup, attempts, priority, ord)
ORDER BY r.ord`
	// With dedup keys: the keys go into log_dedup first; a message whose
	// key is taken (by a pending message or an earlier one of the batch) is
	// not stored. RETURNING names the stored ones.
	insertDedup := `WITH r AS (
	SELECT * FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::timestamptz[],
		$8::int8[], $9::int4[], $10::text[], $11::int4[], $12::int2[]) WITH ORDINALITY
		AS r(id, kind, body, headers, enq, run_at, delay_us, max_attempts, dedup, attempts, priority, ord)
), k AS (
	INSERT INTO {{s}}.log_dedup (queue, key, id)
	SELECT $1, r.dedup, r.id FROM r WHERE r.dedup IS NOT NULL ORDER BY r.ord
	ON CONFLICT DO NOTHING
	RETURNING id
)
INSERT INTO {{s}}.log_messages
	(gen, id, queue, kind, body, headers, enqueued_at, run_at, max_attempts, dedup_key, attempts, priority)
SELECT (SELECT cur FROM {{s}}.log_state), r.id, ` + levelStream("r.priority", "$1") + `, r.kind, r.body, r.headers::json, r.enq,
	COALESCE(r.run_at, now() + r.delay_us * interval '1 microsecond'), r.max_attempts, r.dedup, r.attempts, r.priority
FROM r WHERE r.dedup IS NULL OR r.id IN (SELECT id FROM k)
ORDER BY r.ord
RETURNING id::text`
	insertOne := `INSERT INTO {{s}}.log_messages
	(gen, id, queue, kind, body, headers, enqueued_at, run_at, max_attempts, dedup_key, attempts, priority)
VALUES ((SELECT cur FROM {{s}}.log_state), $2, ` + levelStream("$12::int2", "$1::text") + `, $3, $4, $5::json, $6,
	COALESCE($7::timestamptz, now() + $8::int8 * interval '1 microsecond'), $9, $10, $11, $12)`
	insertOneDedup := `WITH k AS (
	INSERT INTO {{s}}.log_dedup (queue, key, id) VALUES ($1, $10, $2)
	ON CONFLICT DO NOTHING
	RETURNING id
)
INSERT INTO {{s}}.log_messages
	(gen, id, queue, kind, body, headers, enqueued_at, run_at, max_attempts, dedup_key, attempts, priority)
SELECT (SELECT cur FROM {{s}}.log_state), $2, ` + levelStream("$12::int2", "$1::text") + `, $3, $4, $5::json, $6,
	COALESCE($7::timestamptz, now() + $8::int8 * interval '1 microsecond'), $9, $10, $11, $12
FROM k
RETURNING id::text`
	q := base
	q.enqueue = r.Replace(insert)
	q.enqueueDedup = r.Replace(insertDedup)
	q.enqueueOne = r.Replace(insertOne)
	q.enqueueOneDe = r.Replace(insertOneDedup)
	q.holders = r.Replace(`SELECT key, id::text FROM {{s}}.log_dedup WHERE queue = $1 AND key = ANY($2::text[])`)
	// log_claim (schema version 12) returns member receipts short, for
	// claim to write out; log_receive, over it, is for older drivers.
	// log_claim_levels (schema version 18) adds each delivery's level.
	q.claim = r.Replace(`SELECT * FROM {{s}}.log_claim_levels($1, $2, $3)`)
	q.claimDelayed = r.Replace(`SELECT * FROM {{s}}.log_claim_levels($1, $2, $3, true)`)
	// log_claim leaves the next due time of a queue it found less in than
	// it could take in a transaction-local setting: reading it costs
	// nothing. The parameter
	// is unused but keeps the skip-locked statement's signature.
	q.nextDue = `SELECT NULLIF(current_setting('fila.next_due', true), '')::int8 WHERE $1::text IS NOT NULL`
	q.ack = r.Replace(`SELECT * FROM {{s}}.log_ack($1::uuid[], $2::uuid[])`)
	q.ackClaim = r.Replace(`SELECT * FROM {{s}}.log_ack_claim($1::uuid, $2::int8[], $3::uuid[], $4::uuid[])`)
	q.ackWhole = r.Replace(`SELECT {{s}}.log_ack_whole($1::uuid, $2::int8[])`)
	q.retry = r.Replace(`SELECT pg_notify($5, q) FROM {{s}}.log_retry($1::uuid, $2::uuid, $3, $4) AS q`)
	q.dead = r.Replace(`SELECT 1 FROM {{s}}.log_bury($1::uuid, $2::uuid, $3, $4)`)
	q.extend = r.Replace(`SELECT * FROM {{s}}.log_extend($1::uuid, $2::uuid, $3)`)
	// No counts per level (NULL): a due timer's or an expired lease's
	// level is its message row's, which log_stats does not read.
	q.stats = r.Replace(`SELECT *, NULL::int8[] FROM {{s}}.log_stats($1)`)
	q.deadCounts = retable.Replace(base.deadCounts)
	// Dead letters keep their level in log_dead.priority (schema version
	// 18).
	q.deadList = retable.Replace(r.Replace(strings.ReplaceAll(deadListSQL, "{{priority}}", "priority")))
	q.deadPurge = retable.Replace(base.deadPurge)
	q.deadImport = r.Replace(`INSERT INTO {{s}}.log_dead
	(id, queue, kind, body, headers, enqueued_at, attempts, max_attempts, dedup_key, reason, dead_at, priority)
SELECT r.id, $1, r.kind, r.body, r.headers::json, r.enq, r.attempts, r.max_attempts, r.dedup, r.reason,
	COALESCE(r.dead_at, now()), r.priority
FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::int4[], $8::int4[],
	$9::text[], $10::text[], $11::timestamptz[], $12::int2[]) WITH ORDINALITY
	AS r(id, kind, body, headers, enq, attempts, max_attempts, dedup, reason, dead_at, priority, ord)
ORDER BY r.ord
ON CONFLICT (id) DO NOTHING`)
	q.deadReplay = r.Replace(`WITH d AS (
	DELETE FROM {{s}}.log_dead
	WHERE queue = $1 AND ($2 = '' OR kind = $2) AND ($3::uuid[] IS NULL OR id = ANY($3::uuid[]))
	RETURNING id, queue, kind, body, headers, enqueued_at, max_attempts, priority
)
INSERT INTO {{s}}.log_messages (gen, id, queue, kind, body, headers, enqueued_at, run_at, attempts, max_attempts, priority)
SELECT (SELECT cur FROM {{s}}.log_state), id, ` + levelStream("priority", "queue") + `, kind, body, headers, enqueued_at, now(), 0,
	max_attempts, priority FROM d`)
	// The queues with rows, with dead letters, or subscribed to a topic
	// (whose messages are the topic's rows); topics' streams and
	// subscriptions' cursors ('~' names) are not queues, and a level
	// stream ('~p<level>:<queue>') names its queue.
	q.queueList = r.Replace(`WITH RECURSIVE m(queue) AS (
	(SELECT queue FROM {{s}}.log_messages ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT n.queue FROM m, LATERAL (
		SELECT queue FROM {{s}}.log_messages WHERE queue > m.queue ORDER BY queue LIMIT 1) n
), d(queue) AS (
	(SELECT queue FROM {{s}}.log_dead ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT n.queue FROM d, LATERAL (
		SELECT queue FROM {{s}}.log_dead WHERE queue > d.queue ORDER BY queue LIMIT 1) n
)
SELECT queue FROM (
	SELECT CASE WHEN left(queue, 2) = '~p' THEN substr(queue, 5) ELSE queue END AS queue FROM m
	UNION SELECT queue FROM d
	UNION SELECT substr(name, 5) FROM {{s}}.log_marks
	WHERE name >= 'sub/' AND name < 'sub0' AND left(queue, 11) = 'fila.topic.' AND (until IS NULL OR until > now())
) u
WHERE left(queue, 1) <> '~'
ORDER BY queue COLLATE "C"`)
	q.queueDelete = r.Replace(`SELECT {{s}}.log_queue_delete($1)`)
	// No message listing: the log mode keeps no row per pending message
	// (MessageList returns ErrUnsupported).
	q.listReady, q.listDelayed, q.listLeased, q.listIDs = "", "", "", ""
	q.markSet = retable.Replace(base.markSet)
	q.markSetNew = retable.Replace(base.markSetNew)
	q.markGet = retable.Replace(base.markGet)
	q.markDelete = retable.Replace(base.markDelete)
	q.markList = retable.Replace(base.markList)
	q.rotateCopy = r.Replace(`SELECT {{s}}.log_rotate_copy($1, $2)`)
	q.rotateTruncate = r.Replace(`SELECT {{s}}.log_rotate_truncate($1)`)
	topicStatements(&q, s)
	return q
}

// levelStream returns the SQL expression of the stream a message of level
// (a smallint expression) of queue goes to in the log mode (schema version
// 18): the queue's own for level 0, '~p<level>:<queue>' above it.
func levelStream(level, queue string) string {
	return "CASE WHEN " + level + " > 0 THEN '~p' || " + level + " || ':' || " + queue + " ELSE " + queue + " END"
}

// rotate runs until Close: every check (a quarter of the rotation interval,
// at most maxRotateCheck) it tries the TRUNCATE of a generation copied
// before, then the copy of the next one once the current generation is old
// enough. Drivers of one schema in any number of processes take turns
// through an advisory lock; each step is one short statement.
func (d *Driver) rotate(every time.Duration) {
	defer d.lwg.Done()
	check := min(every/4, maxRotateCheck)
	check = max(check, 10*time.Millisecond)
	t := time.NewTicker(check)
	defer t.Stop()
	var heldSince, heldLogged time.Time // rotation refused since; last said so
	var lagLogged time.Time             // last warning about a lagging subscription
	report := max(time.Minute, 2*every)
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(10*check, 30*time.Second))
		go func() { // Close ends a step in flight
			select {
			case <-d.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		var res string
		err := d.pool.QueryRow(ctx, d.q.rotateTruncate, int32(rotateLockTimeout/time.Millisecond)).Scan(&res)
		// Under load the partitions' locks are rarely free for 50 ms in a
		// row: try a few times at once rather than once per check (in a
		// run at full CPU, one try per check held rotation back for
		// minutes and the tables grew).
		for try := 1; err == nil && res == "locked" && try < rotateLockTries; try++ {
			select {
			case <-d.done:
			case <-time.After(rotateLockPause):
			}
			err = d.pool.QueryRow(ctx, d.q.rotateTruncate, int32(rotateLockTimeout/time.Millisecond)).Scan(&res)
		}
		switch {
		case err != nil:
			d.rotateFailed(ctx, "truncate", err)
		case res == "rotated":
			heldSince = time.Time{}
			d.log.Debug("postgres log mode: rotated to the next generation")
		case res == "locked" || res == "late":
			now := time.Now()
			if heldSince.IsZero() {
				heldSince = now
			}
			// Brief refusals are normal under load; a long one means a
			// long transaction, which the operator should know about.
			// Another driver may have rotated meanwhile: the hold began
			// at the last rotation at the earliest.
			if now.Sub(heldSince) >= report && now.Sub(heldLogged) >= report {
				if last, ok := d.lastRotation(ctx); ok && last.After(heldSince) {
					heldSince = last
				}
			}
			if now.Sub(heldSince) >= report && now.Sub(heldLogged) >= report {
				heldLogged = now
				d.log.Warn("postgres log mode: rotation held back: a transaction keeps a lock on the oldest generation's tables (a long read or an open enqueue transaction); the tables grow until it ends",
					slog.String("outcome", res), slog.Duration("held_for", now.Sub(heldSince).Round(time.Second)))
			}
		}
		if err == nil {
			err = d.pool.QueryRow(ctx, d.q.rotateCopy, every.Microseconds(), d.retention.Microseconds()).Scan(&res)
			if err != nil {
				d.rotateFailed(ctx, "copy", err)
			} else if strings.HasPrefix(res, "copied ") {
				d.log.Debug("postgres log mode: copied the rows the oldest generation still needs", slog.String("outcome", res))
				// A rotation ran: say which subscriptions keep old rows,
				// at most once per report period.
				if now := time.Now(); now.Sub(lagLogged) >= report && d.warnLag(ctx, max(2*every, time.Duration(minLagAge.Load()))) {
					lagLogged = now
				}
			}
		}
		cancel()
	}
}

// minLagAge is the youngest unread event that makes a subscription lag:
// below a minute a subscription is busy, not stalled (tests lower it).
var minLagAge atomic.Int64

func init() { minLagAge.Store(int64(time.Minute)) }

// warnLag logs a warning for each topic subscription whose oldest unread
// event is older than older, and reports whether there was one. Rotation
// keeps a topic's rows until every subscription has read them, so one that
// nobody consumes makes the tables grow.
func (d *Driver) warnLag(ctx context.Context, older time.Duration) bool {
	rows, err := d.pool.Query(ctx, d.q.lag, older.Microseconds())
	if err != nil {
		d.rotateFailed(ctx, "lag check", err)
		return false
	}
	var (
		topic, queue string
		unread       int64
		oldest       time.Time
		found        bool
	)
	_, err = pgx.ForEachRow(rows, []any{&topic, &queue, &unread, &oldest}, func() error {
		found = true
		d.log.Warn("postgres log mode: a topic subscription is not keeping up: rotation keeps the topic's events it has not read, and the tables grow until it reads them; consume the subscription's queue, or end the subscription with TopicUnsubscribe (\"fila topic unsubscribe\")",
			slog.String("topic", topic), slog.String("subscription", queue), slog.Int64("unread", unread),
			slog.Duration("oldest_age", time.Since(oldest).Round(time.Second)))
		return nil
	})
	if err != nil {
		d.rotateFailed(ctx, "lag check", err)
	}
	return found
}

// lastRotation reads when the current generation began, by the server's
// clock converted to this process's: the time of the last rotation by any
// driver of the schema.
func (d *Driver) lastRotation(ctx context.Context) (time.Time, bool) {
	var ago time.Duration
	err := d.pool.QueryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp() - since) * 1e6)::int8 * 1000 FROM `+
		quoteIdent(d.schema)+`.log_state`).Scan(&ago)
	if err != nil {
		return time.Time{}, false
	}
	return time.Now().Add(-ago), true
}

func (d *Driver) rotateFailed(ctx context.Context, step string, err error) {
	if d.isClosed() {
		return
	}
	d.log.Warn("postgres log mode: rotation failed; it is tried again at the next check",
		slog.String("step", step), slog.Any("error", mapErr(ctx, "rotate "+step, err)))
}
