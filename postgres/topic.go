package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fila-go/fila/backend"
)

// Topics of the log mode (schema version 9, migrations/0009_log_topics.sql):
// a publish appends one row per event to the topic's stream, whatever the
// number of subscriptions, and each subscription reads the stream through a
// cursor of its own. The skip-locked mode keeps no topics: TopicsNative
// reports false there and the portable layer copies into each subscription
// (one transaction, EnqueueMulti).

var (
	_ backend.Topics        = (*Driver)(nil)
	_ backend.TxPublisher   = (*Driver)(nil)
	_ backend.TopicsSwitch  = (*Driver)(nil)
	_ backend.TopicRewinder = (*Driver)(nil)
)

// The portable layer's names for a topic's subscriptions, which the log
// mode keeps (so subscriptions made before schema version 9 still count):
// mark "sub/<queue>" of the queue "fila.topic.<topic>".
const (
	topicMarkQueue = "fila.topic."
	topicSubMark   = "sub/"
)

// TopicsNative reports whether the driver keeps topics itself: in the log
// mode only (backend.TopicsSwitch).
func (d *Driver) TopicsNative() bool { return d.mode == ModeLog }

func (d *Driver) topicsUsable() error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if d.mode != ModeLog {
		return fmt.Errorf("%w: postgres: topics are kept by the driver only in the log mode (fila_mode=log); the portable layer keeps them in the skip-locked mode", backend.ErrUnsupported)
	}
	return nil
}

// TopicSubscribe makes queue a subscription of topic, with a cursor at the
// current snapshot: the topic's rows that committed before are not read. A
// pattern is stored with its regular expression (kindRegexp), which the
// claims and the publishes match kinds with (schema version 16); subscribing
// again adds it.
func (d *Driver) TopicSubscribe(ctx context.Context, topic, queue, pattern string) error {
	if err := d.topicsUsable(); err != nil {
		return err
	}
	re := ""
	if pattern != "" {
		re = kindRegexp(pattern)
	}
	if _, err := d.pool.Exec(ctx, d.q.subscribe, topic, queue, pattern, re); err != nil {
		return mapErr(ctx, "subscribe", err)
	}
	return nil
}

// TopicUnsubscribe ends the subscription and drops its cursor; the topic's
// rows are then no longer kept for it.
func (d *Driver) TopicUnsubscribe(ctx context.Context, topic, queue string) error {
	if err := d.topicsUsable(); err != nil {
		return err
	}
	if _, err := d.pool.Exec(ctx, d.q.unsubscribe, topic, queue); err != nil {
		return mapErr(ctx, "unsubscribe", err)
	}
	return nil
}

// TopicRewind moves queue's read position in topic to the first of the
// topic's kept rows enqueued at or after to (schema version 10,
// log_topic_rewind): those rows are read again, the earlier ones not at
// all. The subscription's unsettled leases of the rows read again end.
func (d *Driver) TopicRewind(ctx context.Context, topic, queue string, to time.Time) error {
	if err := d.topicsUsable(); err != nil {
		return err
	}
	var ok bool
	if err := d.pool.QueryRow(ctx, d.q.rewind, topic, queue, to).Scan(&ok); err != nil {
		return mapErr(ctx, "rewind", err)
	}
	if !ok {
		return backend.Invalidf("postgres: queue %q is not subscribed to topic %q: subscribe it first (TopicSubscribe), then rewind", queue, topic)
	}
	// The rows to read again are news to the subscription's receivers.
	d.notifier.kick(queue)
	return nil
}

// TopicSubscriptions returns topic's subscriptions with their patterns,
// sorted by queue.
func (d *Driver) TopicSubscriptions(ctx context.Context, topic string) ([]backend.Subscription, error) {
	if err := d.topicsUsable(); err != nil {
		return nil, err
	}
	subs, err := d.subscriptions(ctx, d.pool, topic)
	if err != nil {
		return nil, mapErr(ctx, "list subscriptions", err)
	}
	return subs, nil
}

// subscriptions reads topic's subscriptions through q.
func (d *Driver) subscriptions(ctx context.Context, q Querier, topic string) ([]backend.Subscription, error) {
	rows, err := q.Query(ctx, d.q.subscriptions, topicMarkQueue+topic)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (backend.Subscription, error) {
		var s backend.Subscription
		err := row.Scan(&s.Queue, &s.Patterns)
		return s, err
	})
}

// kindRegexp returns a POSIX regular expression (PostgreSQL's advanced
// flavour) that matches '.' || kind exactly when kind matches pattern
// (backend.KindMatch): each word of the kind is read with the dot before
// it, so "*" is one dotted word, "#" any number of them, and any other word
// itself, every character but ASCII letters and digits escaped.
func kindRegexp(pattern string) string {
	var b strings.Builder
	b.WriteByte('^')
	for _, w := range strings.Split(pattern, ".") {
		switch w {
		case "#":
			b.WriteString(`(\.[^.]*)*`)
		case "*":
			b.WriteString(`\.[^.]*`)
		default:
			b.WriteString(`\.`)
			for _, r := range w {
				if r < 0x80 && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('$')
	return b.String()
}

// TopicPublish appends msgs to topic's stream in one statement, which also
// reads the subscriptions: with none it stores nothing. Messages with a
// dedup key are copied into each subscription instead (the key is held per
// subscription), one enqueue per subscription after the stream's rows.
func (d *Driver) TopicPublish(ctx context.Context, topic string, msgs []backend.Message) (int, error) {
	if err := d.topicsUsable(); err != nil {
		return 0, err
	}
	subs, err := d.publish(ctx, d.pool, topic, msgs, false)
	if err != nil {
		return 0, err
	}
	d.notifier.kick(subs...)
	return len(subs), nil
}

// PublishTx is TopicPublish inside the caller's transaction, with the
// wake-ups sent at its commit.
func (d *Driver) PublishTx(ctx context.Context, tx any, topic string, msgs []backend.Message) (int, error) {
	if err := d.topicsUsable(); err != nil {
		return 0, err
	}
	q, ok := tx.(Querier)
	if !ok || q == nil {
		return 0, backend.Invalidf("postgres PublishTx: tx is %T; want a pgx.Tx (or anything with pgx's Exec, Query, QueryRow and SendBatch methods, such as *pgx.Conn or *pgxpool.Conn)", tx)
	}
	subs, err := d.publish(ctx, q, topic, msgs, true)
	if err != nil {
		return 0, err
	}
	return len(subs), nil
}

// publish stores msgs through q and returns the subscriptions they reached.
// With inTx the wake-ups are pg_notify calls in q's transaction.
func (d *Driver) publish(ctx context.Context, q Querier, topic string, msgs []backend.Message, inTx bool) ([]string, error) {
	var plain, keyed []backend.Message
	for i := range msgs {
		if !validUUID(msgs[i].ID) {
			return nil, backend.Invalidf("message id %q is not a UUID", msgs[i].ID)
		}
		if msgs[i].Priority != 0 {
			// A topic's stream is one per topic, read by each subscription
			// in its order: it has no levels.
			return nil, fmt.Errorf("%w: postgres log mode: a topic's events have no level (Priority %d); publish at level 0, or enqueue into the subscriptions' queues",
				backend.ErrUnsupported, msgs[i].Priority)
		}
		if msgs[i].DedupKey != "" {
			keyed = append(keyed, msgs[i])
		} else {
			plain = append(plain, msgs[i])
		}
	}
	var subs []string // the subscriptions that took a plain message
	var a *enqueueArgs
	if len(plain) > 0 {
		var err error
		if a, err = buildArgs(plain); err != nil {
			return nil, err
		}
	}
	if len(plain) >= copyMin && !inTx && byCopy(a) {
		var err error
		if subs, err = d.publishCopy(ctx, topic, a); err != nil {
			return nil, mapErr(ctx, "publish", err)
		}
	} else if len(plain) > 0 {
		err := q.QueryRow(ctx, d.q.publish, "~t:"+topic, a.ids, a.kinds, a.bodies, a.headers, a.enqueuedAt, a.runAt,
			a.delayMicros, a.maxAttempts, a.attempts, topicMarkQueue+topic, distinctKinds(a.kinds)).Scan(&subs)
		if err != nil {
			return nil, mapErr(ctx, "publish", err)
		}
		if inTx && len(subs) > 0 {
			if _, err := q.Exec(ctx, `SELECT pg_notify($1, s) FROM unnest($2::text[]) AS s`, d.q.channel, subs); err != nil {
				return nil, mapErr(ctx, "publish", err)
			}
		}
	}
	if len(keyed) == 0 {
		return subs, nil
	}
	all, err := d.subscriptions(ctx, q, topic)
	if err != nil {
		return nil, mapErr(ctx, "publish", err)
	}
	reached := map[string]bool{}
	for _, sub := range subs {
		reached[sub] = true
	}
	for _, sub := range all {
		var copies []backend.Message
		for i := range keyed {
			if backend.KindMatchAny(sub.Patterns, keyed[i].Kind) {
				c := keyed[i]
				c.ID = backend.CopyID(keyed[i].ID, sub.Queue)
				copies = append(copies, c)
			}
		}
		if len(copies) == 0 {
			continue
		}
		var err error
		if inTx {
			_, err = d.enqueue(ctx, q, sub.Queue, copies, notifyInTx)
		} else {
			_, err = d.Enqueue(ctx, sub.Queue, copies)
		}
		if err != nil {
			return nil, fmt.Errorf("subscription %s: %w", sub.Queue, err)
		}
		if !reached[sub.Queue] {
			reached[sub.Queue] = true
			subs = append(subs, sub.Queue)
		}
	}
	return subs, nil
}

// copyMin is the smallest batch TopicPublish writes by COPY (publishCopy).
// COPY inserts the rows a page at a time, one WAL record per page instead of
// one per row: 46 fewer WAL bytes a row (363 → 317 for a 64-byte body, one
// transaction of 100 rows per COPY or INSERT, BENCHMARKS.md). It costs
// encoding work the publish statement does not, which a batch this small
// does not repay.
const copyMin = 16

// byCopy reports whether publishCopy can write msgs: none has a dedup key
// (the caller's split), none a delay or a run-at of its own, so every row's
// run-at is the transaction's now(), the column's default. A delayed row's
// run-at counts from the server's now(), which COPY cannot compute; such a
// batch goes by the publish statement.
func byCopy(a *enqueueArgs) bool {
	for i := range a.ids {
		if a.runAt[i].Valid || a.delayMicros[i] != 0 {
			return false
		}
	}
	return true
}

// copyColumns are the columns a publish by COPY writes, in the order
// copyRows encodes them. The others take their defaults: gen the
// generation the first statement read (schema version 15), run_at now(),
// pos nextval and txid the inserting transaction, none of which stops
// COPY's page-at-a-time insert.
var copyColumns = []string{"id", "queue", "kind", "body", "headers", "enqueued_at", "max_attempts", "attempts"}

// publishCopy appends msgs (byCopy) to topic's stream by COPY when the
// topic has subscriptions, and returns them. It writes what the publish
// statement writes, in one round trip and one transaction: one simple query
// whose first statement reads the subscriptions and sets the generation and
// whether to write (transaction-local settings), and whose COPY reads its
// rows, sent with the query, and keeps them only then. The rows go before
// the server asks for them (it reads them once the COPY starts, and drops
// them unread when the first statement fails), so the driver talks the
// protocol itself: pgx's CopyFrom waits for the COPY to start and ignores
// the first statement's row.
//
// (Before schema version 15 it took two round trips, the first to read the
// generation and now(); in a fan-out to ten subscriptions whose consumers
// keep both CPUs busy the publisher waits for a CPU at each, BENCHMARKS.md.)
func (d *Driver) publishCopy(ctx context.Context, topic string, a *enqueueArgs) (subs []string, err error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	pc := conn.Conn().PgConn()
	// Anything but a clean end leaves the protocol mid-way: the connection
	// is closed, and Release drops it.
	clean := false
	defer func() {
		if !clean {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = pc.Close(cctx)
			cancel()
		}
	}()
	query := d.q.publishCopy[0] + quoteLiteral(topicMarkQueue+topic) + d.q.publishCopy[1] +
		quoteLiteral(kindsArray(a.kinds)) + d.q.publishCopy[2] + d.q.publishCopy[3]
	out, err := (&pgproto3.Query{String: query}).Encode(nil)
	if err != nil {
		return nil, err
	}
	msgs := net.Buffers{out}
	for data := copyRows("~t:"+topic, a); len(data) > 0; {
		n := min(len(data), copyChunk)
		msgs = append(msgs, binary.BigEndian.AppendUint32([]byte{'d'}, uint32(n+4)), data[:n])
		data = data[n:]
	}
	msgs = append(msgs, []byte{'c', 0, 0, 0, 4}) // CopyDone
	nc := pc.Conn()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetWriteDeadline(time.Unix(1, 0)) })
	_, werr := msgs.WriteTo(nc)
	if !stop() {
		return nil, context.Cause(ctx)
	}
	if werr != nil {
		return nil, werr
	}
	var (
		pgErr  error
		rows   int64
		copied bool
	)
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			// The subscriptions, then the two settings' values.
			if len(m.Values) == 3 {
				err = conn.Conn().TypeMap().Scan(pgtype.TextArrayOID, pgx.TextFormatCode, m.Values[0], &subs)
			} else {
				err = fmt.Errorf("the publish's first statement returned %d columns, want 3", len(m.Values))
			}
			if err != nil && pgErr == nil {
				pgErr = err
			}
		case *pgproto3.CommandComplete:
			if tag := pgconn.NewCommandTag(string(m.CommandTag)); strings.HasPrefix(tag.String(), "COPY ") {
				rows, copied = tag.RowsAffected(), true
			}
		case *pgproto3.ErrorResponse:
			if pgErr == nil {
				pgErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			clean = m.TxStatus == 'I'
			if pgErr != nil {
				return nil, pgErr
			}
			if !clean || !copied {
				return nil, fmt.Errorf("the publish by COPY ended without its COPY (transaction status %q)", m.TxStatus)
			}
			if want := int64(len(a.ids)); len(subs) > 0 && rows != want || len(subs) == 0 && rows != 0 {
				return nil, fmt.Errorf("the publish by COPY wrote %d rows for %d messages and %d subscriptions", rows, want, len(subs))
			}
			d.copyPublishes.Add(1)
			return subs, nil
		}
	}
}

// copyChunk is the most COPY data one CopyData message carries.
const copyChunk = 1 << 20

// copyRows encodes the rows of a publish by COPY in COPY's binary format,
// the columns of copyColumns, with the values the publish statement would
// store.
func copyRows(stream string, a *enqueueArgs) []byte {
	be := binary.BigEndian
	buf := make([]byte, 0, 64*len(a.ids))
	buf = append(buf, "PGCOPY\n\377\r\n\000"...)
	buf = be.AppendUint32(buf, 0) // flags
	buf = be.AppendUint32(buf, 0) // header extension
	for i := range a.ids {
		buf = be.AppendUint16(buf, uint16(len(copyColumns)))
		buf = appendField(buf, a.ids[i].Bytes[:])
		buf = appendField(buf, stream)
		buf = appendField(buf, a.kinds[i])
		buf = appendField(buf, a.bodies[i])
		if a.headers[i].Valid {
			buf = appendField(buf, a.headers[i].String) // json's binary form is its text
		} else {
			buf = be.AppendUint32(buf, 0xFFFFFFFF) // NULL
		}
		buf = be.AppendUint64(be.AppendUint32(buf, 8), uint64(pgMicros(a.enqueuedAt[i])))
		buf = be.AppendUint32(be.AppendUint32(buf, 4), uint32(a.maxAttempts[i]))
		buf = be.AppendUint32(be.AppendUint32(buf, 4), uint32(a.attempts[i]))
	}
	return be.AppendUint16(buf, 0xFFFF) // trailer
}

// appendField appends v to buf as a field of COPY's binary format: its
// length, then its bytes.
func appendField[T []byte | string](buf []byte, v T) []byte {
	return append(binary.BigEndian.AppendUint32(buf, uint32(len(v))), v...)
}

// pgMicros is t as PostgreSQL's binary timestamptz: microseconds since
// 2000-01-01 UTC, computed as pgx computes it for the publish statement.
func pgMicros(t time.Time) int64 {
	const y2k = 946684800 * 1000000 // 2000-01-01 in microseconds since 1970
	return t.Unix()*1000000 + int64(t.Nanosecond())/1000 - y2k
}

// quoteLiteral returns s as an SQL string literal in the escape syntax,
// which means the same whatever standard_conforming_strings says. s holds
// no NUL (names are checked in the root package; PostgreSQL text cannot
// hold one).
func quoteLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// topicStatements adds the log mode's topic statements to q.
func topicStatements(q *statements, s string) {
	r := strings.NewReplacer("{{s}}", s)
	q.subscribe = r.Replace(`SELECT {{s}}.log_subscribe($1, $2, $3, $4)`)
	q.subscriptions = r.Replace(`SELECT substr(k.name, 5), k.kinds FROM {{s}}.log_marks k
WHERE k.queue = $1 AND left(k.name, 4) = 'sub/' AND (k.until IS NULL OR k.until > now())
ORDER BY k.name`)
	q.unsubscribe = r.Replace(`SELECT {{s}}.log_unsubscribe($1, $2)`)
	q.rewind = r.Replace(`SELECT {{s}}.log_topic_rewind($1, $2, $3)`)
	q.lag = r.Replace(`SELECT topic, queue, unread, oldest FROM {{s}}.log_lag($1)`)
	// One statement: read the subscriptions that take a kind of the batch
	// and, when there are any, append the batch to the topic's stream. A
	// publish that starts after a subscribe committed sees it, and its rows
	// commit after the subscription's cursor was taken, so the subscription
	// reads them.
	q.publish = r.Replace(`WITH s AS (
	SELECT COALESCE(array_agg(substr(k.name, 5) ORDER BY k.name), '{}') AS subs FROM {{s}}.log_marks k
	WHERE k.queue = $11 AND left(k.name, 4) = 'sub/' AND (k.until IS NULL OR k.until > now())
		AND (k.kinds_re IS NULL OR EXISTS (SELECT FROM unnest($12::text[]) AS u(kind) WHERE ('.' || u.kind) ~ k.kinds_re))
), i AS (
	INSERT INTO {{s}}.log_messages
		(gen, id, queue, kind, body, headers, enqueued_at, run_at, max_attempts, attempts)
	SELECT (SELECT cur FROM {{s}}.log_state), r.id, $1, r.kind, r.body, r.headers::json, r.enq,
		COALESCE(r.run_at, now() + r.delay_us * interval '1 microsecond'), r.max_attempts, r.attempts
	FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::timestamptz[],
		$8::int8[], $9::int4[], $10::int4[]) WITH ORDINALITY
		AS r(id, kind, body, headers, enq, run_at, delay_us, max_attempts, attempts, ord)
	WHERE cardinality((SELECT subs FROM s)) > 0
	ORDER BY r.ord
)
SELECT subs FROM s`)
	// A publish by COPY (publishCopy), one simple query around the topic's
	// mark queue as a literal: the first statement reads the subscriptions
	// and sets the generation and whether to write for the COPY's defaults
	// and its WHERE (schema version 15).
	q.publishCopy = [4]string{r.Replace(`SELECT COALESCE(array_agg(substr(k.name, 5) ORDER BY k.name), '{}'),
	set_config('fila.log_gen', (SELECT cur FROM {{s}}.log_state)::text, true),
	set_config('fila.log_write', (count(*) > 0)::text, true)
FROM {{s}}.log_marks k
WHERE left(k.name, 4) = 'sub/' AND (k.until IS NULL OR k.until > now()) AND k.queue = `),
		` AND (k.kinds_re IS NULL OR EXISTS (SELECT FROM unnest(`,
		`::text[]) AS u(kind) WHERE ('.' || u.kind) ~ k.kinds_re))`,
		fmt.Sprintf("; COPY %s.log_messages (%s) FROM STDIN (FORMAT binary) WHERE current_setting('fila.log_write')::boolean",
			s, quoteColumns(copyColumns))}
}

// distinctKinds returns kinds without repeats, in first-seen order: a
// subscription's patterns are matched against each distinct kind of a
// batch once.
func distinctKinds(kinds []string) []string {
	seen := make(map[string]bool, 1)
	out := make([]string, 0, 1)
	for _, k := range kinds {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// kindsArray returns the distinct kinds of kinds as the text of a
// PostgreSQL text array, each element quoted, for the literal of a publish
// by COPY.
func kindsArray(kinds []string) string {
	quote := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	var elems []string
	for _, k := range distinctKinds(kinds) {
		// A NUL cannot be in the query's text; the COPY refuses its row
		// anyway (ErrInvalid), whatever the subscriptions take.
		if strings.IndexByte(k, 0) < 0 {
			elems = append(elems, `"`+quote.Replace(k)+`"`)
		}
	}
	return "{" + strings.Join(elems, ",") + "}"
}

// quoteColumns returns cols as a list of quoted identifiers.
func quoteColumns(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(q, ", ")
}
