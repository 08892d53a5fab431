package mysql

import (
	"strings"
)

// now is the server's clock in microseconds since the Unix epoch, UTC,
// fixed for the statement: no time zone takes part.
const now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))"

// msgCols are the columns an INSERT into the messages table names, in the
// order of the insertRow placeholders.
const msgCols = "(id, queue, kind, body, headers, enqueued_at, visible_at, max_attempts, dedup_key, attempts, prank)"

// The rows of an INSERT into the messages table differ in visible_at
// alone: the column's default (the server's now) for a message ready at
// once, the run-at when given, the server's now plus the delay otherwise.
// A batch of messages ready at once sends no expression per row.
const (
	insertRowNow   = "(?, ?, ?, ?, ?, ?, DEFAULT, ?, ?, ?, ?)"
	insertRowAt    = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	insertRowDelay = "(?, ?, ?, ?, ?, ?, " + now + " + ?, ?, ?, ?, ?)"
)

// deadCols and deadRow are the same for the dead-letter table (DeadImport):
// a missing dead-at is the server's now.
const (
	deadCols = "(id, queue, kind, body, headers, enqueued_at, attempts, max_attempts, dedup_key, reason, dead_at, priority)"
	deadRow  = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, " + now + "), ?)"
)

// claimCols are the columns a claim reads, in scanClaimed's order.
const claimCols = "id, kind, body, headers, enqueued_at, attempts, max_attempts, dedup_key, last_error, visible_at, run_at, prank, " + now

// statements holds the SQL text of every fixed statement for one table
// prefix; statements whose length depends on a batch are built by the
// functions that run them.
type statements struct {
	msgs, dead, marks string // quoted table names

	insert     string // INSERT ... VALUES, rows appended
	holders    string // dedup-key holders, placeholders appended
	claim      string
	claimLate  string // ReceiveDelayed's
	nextDue    string
	ackOne     string
	retry      string
	extend     string
	leaseOf    string
	deadLock   string
	deadCopy   string
	deadDelete string
	stats      string
	deadCounts string
	queueList  string
	markSet    string
	markInsert string
	markLock   string
	markRenew  string
	markGet    string
	markDelete string
	markList   string
	markSweep  string
}

func newStatements(prefix string) statements {
	m, dt, mk := quoteTable(prefix, "messages"), quoteTable(prefix, "dead"), quoteTable(prefix, "marks")
	r := strings.NewReplacer("{{m}}", m, "{{d}}", dt, "{{k}}", mk, "{{now}}", now)
	return statements{
		msgs: m, dead: dt, marks: mk,
		insert:  r.Replace("INSERT INTO {{m}} " + msgCols + " VALUES "),
		holders: r.Replace("SELECT dedup_key, id FROM {{m}} WHERE queue = ? AND dedup_key IN "),
		// The claim reads the queue's claimable rows (ready, or leased
		// past their deadline: visible_at has passed) in the order of
		// messages_claim, highest level first, and locks them; SKIP LOCKED
		// passes over rows another claim holds. The index order is the
		// ORDER BY, so the scan stops after LIMIT rows it could lock: no
		// sort, and no lock on rows the claim does not take (READ
		// COMMITTED releases the ones the WHERE clause refuses).
		claim: r.Replace(`SELECT ` + claimCols + ` FROM {{m}} FORCE INDEX (messages_claim)
WHERE queue = ? AND visible_at <= {{now}}
ORDER BY prank, visible_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`),
		// Delayed messages not leased, and expired leases taken before
		// their run-at, soonest run-at first whatever their level. This
		// one sorts: it serves moves between brokers, not the hot path.
		claimLate: r.Replace(`SELECT ` + claimCols + ` FROM {{m}}
WHERE queue = ? AND ((lease_token IS NULL AND visible_at > {{now}})
	OR (lease_token IS NOT NULL AND visible_at <= {{now}} AND run_at > {{now}}))
ORDER BY COALESCE(run_at, visible_at), id
LIMIT ?
FOR UPDATE SKIP LOCKED`),
		// Microseconds until the queue's next message becomes claimable:
		// the least of each level's first visible_at, one probe of
		// messages_claim per level; NULL when the queue is empty.
		nextDue: r.Replace(`SELECT LEAST(
	COALESCE((SELECT MIN(visible_at) FROM {{m}} WHERE queue = ? AND prank = 0), 9223372036854775807),
	COALESCE((SELECT MIN(visible_at) FROM {{m}} WHERE queue = ? AND prank = 1), 9223372036854775807),
	COALESCE((SELECT MIN(visible_at) FROM {{m}} WHERE queue = ? AND prank = 2), 9223372036854775807),
	COALESCE((SELECT MIN(visible_at) FROM {{m}} WHERE queue = ? AND prank = 3), 9223372036854775807)), {{now}}`),
		ackOne: r.Replace(`DELETE FROM {{m}} WHERE id = ? AND lease_token = ? AND visible_at > {{now}}`),
		// The assignments run left to right (MariaDB's
		// SIMULTANEOUS_ASSIGNMENT mode gives the same result): visible_at
		// reads run_at before it is cleared. Only a message taken early
		// (ReceiveDelayed) keeps its run-at.
		retry: r.Replace(`UPDATE {{m}}
SET lease_token = NULL,
	visible_at = GREATEST({{now}} + ?, COALESCE(run_at, 0)),
	run_at = NULL,
	last_error = COALESCE(NULLIF(?, ''), last_error)
WHERE id = ? AND lease_token = ? AND visible_at > {{now}}`),
		extend: r.Replace(`UPDATE {{m}} SET visible_at = {{now}} + ?
WHERE id = ? AND lease_token = ? AND visible_at > {{now}}`),
		leaseOf:  r.Replace(`SELECT visible_at, visible_at > {{now}} FROM {{m}} WHERE id = ? AND lease_token = ?`),
		deadLock: r.Replace(`SELECT 1 FROM {{m}} WHERE id = ? AND lease_token = ? AND visible_at > {{now}} FOR UPDATE`),
		// REPLACE: a replayed message that dies again takes its old
		// letter's place.
		deadCopy: r.Replace(`REPLACE INTO {{d}} ` + deadCols + `
SELECT id, queue, kind, body, headers, enqueued_at, ?, max_attempts, dedup_key, ?, {{now}}, 3 - prank
FROM {{m}} WHERE id = ?`),
		deadDelete: r.Replace(`DELETE FROM {{m}} WHERE id = ?`),
		// Ready: claimable now (expired leases included). Delayed: not
		// leased and not due, or an expired early lease whose run-at is
		// ahead. Leased: lease current.
		stats: r.Replace(`SELECT
	COALESCE(SUM(visible_at <= n AND (run_at IS NULL OR run_at <= n)), 0),
	COALESCE(SUM((lease_token IS NULL AND visible_at > n) OR (visible_at <= n AND run_at > n)), 0),
	COALESCE(SUM(lease_token IS NOT NULL AND visible_at > n), 0),
	MIN(CASE WHEN visible_at <= n AND (run_at IS NULL OR run_at <= n) THEN GREATEST(visible_at, COALESCE(run_at, 0)) END),
	COALESCE(SUM(prank = 3 AND visible_at <= n AND (run_at IS NULL OR run_at <= n)), 0),
	COALESCE(SUM(prank = 2 AND visible_at <= n AND (run_at IS NULL OR run_at <= n)), 0),
	COALESCE(SUM(prank = 1 AND visible_at <= n AND (run_at IS NULL OR run_at <= n)), 0),
	COALESCE(SUM(prank = 0 AND visible_at <= n AND (run_at IS NULL OR run_at <= n)), 0)
FROM {{m}} CROSS JOIN (SELECT {{now}} AS n) t WHERE queue = ?`),
		deadCounts: r.Replace(`SELECT kind, COUNT(*) FROM {{d}} WHERE queue = ? GROUP BY kind`),
		// DISTINCT on the leading column of an index is a loose index
		// scan: one probe per queue, not a read of every row. VARBINARY
		// sorts bytewise, as Go does.
		queueList:  r.Replace(`SELECT queue FROM (SELECT DISTINCT queue FROM {{m}} UNION SELECT DISTINCT queue FROM {{d}}) u ORDER BY queue`),
		markSet:    r.Replace(`INSERT INTO {{k}} (queue, name, expires_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE expires_at = ?`),
		markInsert: r.Replace(`INSERT INTO {{k}} (queue, name, expires_at) VALUES (?, ?, ?)`),
		markLock:   r.Replace(`SELECT expires_at IS NOT NULL AND expires_at <= {{now}} FROM {{k}} WHERE queue = ? AND name = ? FOR UPDATE`),
		markRenew:  r.Replace(`UPDATE {{k}} SET expires_at = ? WHERE queue = ? AND name = ?`),
		markGet: r.Replace(`SELECT EXISTS (SELECT 1 FROM {{k}}
	WHERE queue = ? AND name = ? AND (expires_at IS NULL OR expires_at > {{now}}))`),
		markDelete: r.Replace(`DELETE FROM {{k}} WHERE queue = ? AND name = ?`),
		// The prefix test compares the first LENGTH(?) bytes, so '%', '_'
		// and '\' are plain characters; name >= ? starts the primary
		// key's range at the prefix.
		markList: r.Replace(`SELECT name FROM {{k}}
WHERE queue = ? AND name >= ? AND LEFT(name, LENGTH(?)) = ?
	AND (expires_at IS NULL OR expires_at > {{now}})
ORDER BY name`),
		// Expired marks are deleted a few at a time on the way; an expired
		// mark counts as absent whether or not it was swept.
		markSweep: r.Replace(`DELETE FROM {{k}} WHERE queue = ? AND expires_at <= {{now}} LIMIT 100`),
	}
}

// placeholders returns "(?, ?, …)" with n marks.
func placeholders(n int) string {
	var b strings.Builder
	b.Grow(3*n + 2)
	b.WriteByte('(')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
	}
	b.WriteByte(')')
	return b.String()
}

// rows returns n copies of row joined by ", ".
func rows(row string, n int) string {
	var b strings.Builder
	b.Grow((len(row) + 2) * n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}
