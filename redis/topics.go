package redis

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// Topics (backend.Topics): a topic is one stream, its log, and a publish is
// one XADD per message whatever the number of subscriptions. Each
// subscription queue keeps a cursor on the log (in its own "topics" hash,
// in the queue's slot), and its Receives copy what lies beyond the cursor
// into the queue's stream as they need it: a read of the log (XRANGE,
// beside the receive), then the copy script in the claim's own transaction,
// which moves the cursor and skips what another Receive copied first. From
// there a copy is a queue entry like any other, with its copy id, its lease,
// retries and dead letters. The log is trimmed to what the slowest
// subscription has not copied yet (topic_advance.lua), so events wait once
// in the log, not once per subscription, until each subscription's
// consumers ask for them.
//
// A subscription made with kind patterns keeps them on both sides: in the
// topic's patterns hash (queue -> patterns), which a publish reads to count
// the subscriptions a batch reaches and to append only the messages some
// subscription takes, and in the queue's own (topic -> patterns, each with
// the log id from which it applies), which the copy script reads to pass
// over the events it does not take (lua/prelude.lua's kmatch is
// backend.KindMatch). A subscription without patterns takes every kind.
//
// Every step touches one slot (a script never spans a topic and a queue),
// so topics work on Redis Cluster too. Messages with a dedup key, a delay
// or a run-at are still copied into each subscription at publish (the
// enqueue script holds the keys and the delays), so a publish that mixes
// them is not atomic across subscriptions.

var (
	// scriptTopicSubscribe adds a subscription to a topic:
	// lua/topic_subscribe.lua.
	scriptTopicSubscribe = script("topic_prelude.lua", "topic_subscribe.lua")
	// scriptTopicJoin records it on the queue's side:
	// lua/topic_join.lua.
	scriptTopicJoin = script("topic_join.lua")
	// scriptTopicUnsubscribe ends one: lua/topic_unsubscribe.lua.
	scriptTopicUnsubscribe = script("topic_prelude.lua", "topic_trim.lua", "topic_unsubscribe.lua")
	// scriptTopicPublish appends to a topic's log: lua/topic_publish.lua.
	scriptTopicPublish = script("topic_prelude.lua", "topic_publish.lua")
	// scriptTopicAdvance records a subscription's progress and trims the
	// log: lua/topic_advance.lua.
	scriptTopicAdvance = script("topic_prelude.lua", "topic_trim.lua", "topic_advance.lua")
	// scriptTopicCopy copies log events into a queue: lua/topic_copy.lua.
	scriptTopicCopy = script("topic_copy.lua")
	// scriptTopicSkip moves a queue's cursor to the log's end:
	// lua/topic_skip.lua.
	scriptTopicSkip = script("topic_skip.lua")
)

var _ backend.Topics = (*Driver)(nil)

// Fila versions before the topic log kept a topic's subscriptions as marks
// of the portable layer: mark "sub/<queue>" of queue "fila.topic.<topic>"
// (the root package's topicMarkQueue and topicSubMark), and since kind
// patterns one mark "sub/<queue>/<pattern>" per pattern of a subscription
// that has some (the root package's subMarkName). The driver still writes
// them, so such versions keep copying to subscriptions made by this one,
// and adopts those it finds (adoptLegacy).
const (
	legacyTopicQueue = "fila.topic."
	legacySubMark    = "sub/"
)

// A Receive that copies at all copies ahead of its Max: up to pullBytes
// of events from each log (by the mean event size of the queue's earlier
// copies; its Max the first time), at most pullMax. The copies it does not
// claim itself wait in the queue's stream for the next claims, which then
// need no copy of their own.
const (
	pullBytes = 1 << 20
	pullMax   = 1000
)

// pullEvery bounds how long a driver's Receives on a subscription queue go
// without reading its topics' logs while their claims keep finding enough
// in the queue's own stream, so the log is never starved by it.
const pullEvery = 50 * time.Millisecond

// lagCheckEvery is how often a driver's publishes to one topic look at the
// age of the log's oldest event (see lagCheckDue). A variable for the tests.
var lagCheckEvery = time.Second

// lagWarnAge is the age of the oldest event of a topic's log past which the
// driver warns, at most once per lagWarnAge and topic, that its slowest
// subscription lags. A variable for the tests.
var lagWarnAge = time.Minute

// topicKeys names a topic's keys. They share the hash tag of the queue of
// the same name, with suffixes no queue key has.
type topicKeys struct {
	log  string // stream: the events published, up to what every subscription copied
	subs string // hash: queue -> cursor (a lower bound), "n:<queue>" -> entries-added when it subscribed
	pats string // hash: queue -> its patterns, "<since> <pattern>" lines (none: every kind)
}

func (t topicKeys) list() []string { return []string{t.log, t.subs, t.pats} }

func (d *Driver) topicKeys(topic string) topicKeys {
	tag := "{" + d.o.Prefix + ":" + topic + "}"
	return topicKeys{log: tag + ":topic-log", subs: tag + ":topic-subs", pats: tag + ":topic-pats"}
}

// patLine is one line of a subscription's patterns as the scripts store
// them (lua/prelude.lua's pat_lines): the pattern ("": every kind) and the
// log id after which it applies.
type patLine struct{ since, pattern string }

// parsePatLines parses a subscription's pattern lines.
func parsePatLines(s string) []patLine {
	var out []patLine
	for _, l := range strings.Split(s, "\n") {
		if since, p, ok := strings.Cut(l, " "); ok {
			out = append(out, patLine{since, p})
		}
	}
	return out
}

// patterns returns the sorted patterns of lines, or nil when one takes
// every kind.
func patterns(lines []patLine) []string {
	var ps []string
	for _, l := range lines {
		if l.pattern == "" {
			return nil
		}
		if !slices.Contains(ps, l.pattern) {
			ps = append(ps, l.pattern)
		}
	}
	slices.Sort(ps)
	return ps
}

// takes reports whether a subscription with pattern lines (none: every
// kind) takes the event of log id lid and kind, as lua/topic_copy.lua
// decides.
func takes(lines []patLine, lid, kind string) bool {
	if len(lines) == 0 {
		return true
	}
	for _, l := range lines {
		if sidLess(l.since, lid) && backend.KindMatch(l.pattern, kind) {
			return true
		}
	}
	return false
}

// queueTopics is what a driver knows of one queue's subscriptions.
type queueTopics struct {
	mu   sync.Mutex
	cur  map[string]string // topic -> the queue's cursor, as last seen
	told map[string]string // topic -> the cursor last recorded on the topic's side
	// pulling is set while one Receive of the driver reads and copies the
	// logs for the queue; the others claim meanwhile without copying.
	pulling bool
	// full: the driver's last claim on the queue filled its Max, so the
	// queue's stream likely holds copies made ahead; lastPull: when the
	// logs were last read (see topicPull).
	full     bool
	lastPull time.Time
	// size is the mean size of the events copied last (0: unknown).
	size int
}

// topicState returns the driver's record of queue's subscriptions.
func (d *Driver) topicState(queue string) *queueTopics {
	d.mu.Lock()
	defer d.mu.Unlock()
	qt := d.qtopics[queue]
	if qt == nil {
		qt = &queueTopics{cur: map[string]string{}, told: map[string]string{}}
		d.qtopics[queue] = qt
	}
	return qt
}

// setTopics records the queue's topics hash as read from Redis, and
// reports whether it names a topic the driver did not know.
func (qt *queueTopics) setTopics(h map[string]string) (added bool) {
	qt.mu.Lock()
	defer qt.mu.Unlock()
	for t := range qt.cur {
		if _, ok := h[t]; !ok {
			delete(qt.cur, t)
			delete(qt.told, t)
		}
	}
	for t, c := range h {
		if strings.HasPrefix(t, "n:") {
			continue
		}
		old, ok := qt.cur[t]
		if !ok {
			added = true
		}
		if !ok || sidLess(old, c) {
			qt.cur[t] = c
		}
	}
	return added
}

// TopicSubscribe makes queue a subscription of topic, its cursor at the
// log's end, or adds pattern to its subscription. The topic's side is
// written first, so a publish that starts after this returns appends for
// it; a pattern applies on the queue's side from the log's end at that
// point, so it does not take the older events the queue has not copied yet.
func (d *Driver) TopicSubscribe(ctx context.Context, topic, queue, pattern string) error {
	if err := d.adoptLegacy(ctx, topic); err != nil {
		return err
	}
	return d.subscribe(ctx, topic, queue, pattern)
}

func (d *Driver) subscribe(ctx context.Context, topic, queue, pattern string) error {
	v, err := runOnce(ctx, d.c, scriptTopicSubscribe, d.topicKeys(topic).list(), queue, pattern).Slice()
	if err != nil {
		return d.fail(ctx, err)
	}
	if len(v) != 5 {
		return fmt.Errorf("fila/redis: topic subscribe script returned %d values", len(v))
	}
	k := d.keys(queue)
	if err := runOnce(ctx, d.c, scriptTopicJoin, []string{k.topics, k.tpats}, topic, v[0], v[1], v[2], v[3], v[4]).Err(); err != nil {
		return d.fail(ctx, err)
	}
	if _, err := d.MarkSet(ctx, legacyTopicQueue+topic, legacySubMarkName(queue, pattern), time.Time{}, false); err != nil {
		return err
	}
	return nil
}

// legacySubMarkName names the mark that keeps queue's subscription with
// pattern ("": every kind), as the root package's subMarkName.
func legacySubMarkName(queue, pattern string) string {
	if pattern == "" {
		return legacySubMark + queue
	}
	return legacySubMark + queue + "/" + pattern
}

// parseLegacySubMark returns the queue and the pattern of a subscription
// mark, as the root package's parseSubMark. Queue names hold no '/'.
func parseLegacySubMark(name string) (queue, pattern string) {
	rest := strings.TrimPrefix(name, legacySubMark)
	queue, pattern, _ = strings.Cut(rest, "/")
	return queue, pattern
}

// TopicUnsubscribe ends the subscription on the topic's side (publishes
// stop counting it, the log is trimmed without it), then on the queue's.
func (d *Driver) TopicUnsubscribe(ctx context.Context, topic, queue string) error {
	if err := runOnce(ctx, d.c, scriptTopicUnsubscribe, d.topicKeys(topic).list(), queue).Err(); err != nil {
		return d.fail(ctx, err)
	}
	k := d.keys(queue)
	if _, err := d.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HDel(ctx, k.topics, topic, "n:"+topic)
		p.HDel(ctx, k.tpats, topic)
		return nil
	}); err != nil {
		return d.fail(ctx, err)
	}
	// every mark of the subscription: one per pattern
	marks, err := d.MarkList(ctx, legacyTopicQueue+topic, legacySubMark+queue)
	if err != nil {
		return err
	}
	for _, m := range marks {
		if q, _ := parseLegacySubMark(m); q == queue {
			if err := d.MarkDelete(ctx, legacyTopicQueue+topic, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// TopicSubscriptions lists the topic's subscriptions and patterns hashes.
func (d *Driver) TopicSubscriptions(ctx context.Context, topic string) ([]backend.Subscription, error) {
	if err := d.adoptLegacy(ctx, topic); err != nil {
		return nil, err
	}
	return d.subscriptions(ctx, topic)
}

func (d *Driver) subscriptions(ctx context.Context, topic string) ([]backend.Subscription, error) {
	tk := d.topicKeys(topic)
	var (
		keys *goredis.StringSliceCmd
		pats *goredis.MapStringStringCmd
	)
	if _, err := d.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		keys = p.HKeys(ctx, tk.subs)
		pats = p.HGetAll(ctx, tk.pats)
		return nil
	}); err != nil {
		return nil, d.fail(ctx, err)
	}
	ps := pats.Val()
	subs := make([]backend.Subscription, 0, len(keys.Val())/2)
	for _, f := range keys.Val() {
		if !strings.HasPrefix(f, "n:") {
			subs = append(subs, backend.Subscription{Queue: f, Patterns: patterns(parsePatLines(ps[f]))})
		}
	}
	slices.SortFunc(subs, func(a, b backend.Subscription) int { return strings.Compare(a.Queue, b.Queue) })
	return subs, nil
}

// adoptLegacy subscribes natively, once per topic and driver, the
// subscriptions that an earlier Fila version kept as marks only.
func (d *Driver) adoptLegacy(ctx context.Context, topic string) error {
	if _, done := d.adopted.Load(topic); done {
		return nil
	}
	marks, err := d.MarkList(ctx, legacyTopicQueue+topic, legacySubMark)
	if err != nil {
		return err
	}
	if len(marks) > 0 {
		have, err := d.subscriptions(ctx, topic)
		if err != nil {
			return err
		}
		// queue -> its patterns; nil: every kind (a mark without one)
		found := map[string][]string{}
		var order []string
		for _, m := range marks {
			q, p := parseLegacySubMark(m)
			ps, seen := found[q]
			if !seen {
				order = append(order, q)
			}
			switch {
			case p == "" || (seen && ps == nil):
				found[q] = nil
			default:
				found[q] = append(ps, p)
			}
		}
		for _, q := range order {
			if slices.ContainsFunc(have, func(s backend.Subscription) bool { return s.Queue == q }) {
				continue
			}
			ps := found[q]
			if ps == nil {
				ps = []string{""}
			}
			for _, p := range ps {
				if err := d.subscribe(ctx, topic, q, p); err != nil {
					return err
				}
			}
			d.o.Logger.Info("fila/redis: adopted a subscription made by an earlier Fila version", slog.String("topic", topic), slog.String("queue", q), slog.Any("patterns", found[q]))
		}
	}
	d.adopted.Store(topic, true)
	return nil
}

// TopicPublish appends the messages due now without a dedup key to the
// topic's log in one script (those that some subscription's patterns
// match; nothing when none does), and enqueues a copy of the others into
// each subscription whose patterns match them. It returns how many
// subscriptions take a message of the batch.
func (d *Driver) TopicPublish(ctx context.Context, topic string, msgs []backend.Message) (int, error) {
	if err := d.adoptLegacy(ctx, topic); err != nil {
		return 0, err
	}
	var special []backend.Message
	args := []any{0, 0, 0}
	plain := 0
	for i := range msgs {
		m := &msgs[i]
		if m.DedupKey != "" || m.Delay != 0 || !m.RunAt.IsZero() {
			special = append(special, *m)
			continue
		}
		at := len(args)
		args = append(args, 0)
		var n int
		var err error
		if args, n, err = appendFields(args, m); err != nil {
			return 0, err
		}
		args[at] = n
		plain++
	}
	subs := 0
	// the subscriptions the log's part reached, when the special messages
	// need them to count the union
	reached := map[string]bool{}
	if plain > 0 {
		if d.lagCheckDue(topic) {
			args[0] = 1
		}
		if len(special) > 0 {
			args[1] = 1
		}
		args[2] = plain
		v, err := d.runDurable(ctx, scriptTopicPublish, d.topicKeys(topic).list(), args...).Slice()
		if err != nil {
			return 0, d.fail(ctx, err)
		}
		if len(v) < 2 {
			return 0, fmt.Errorf("fila/redis: topic publish script returned %d values", len(v))
		}
		subs = int(toInt(v[0]))
		for _, q := range v[2:] {
			reached[str(q)] = true
		}
		d.noteLag(ctx, topic, "", toInt(v[1]))
	}
	if len(special) > 0 {
		ss, err := d.subscriptions(ctx, topic)
		if err != nil {
			return 0, err
		}
		for _, s := range ss {
			var cp []backend.Message
			for i := range special {
				if backend.KindMatchAny(s.Patterns, special[i].Kind) {
					m := special[i]
					m.ID = backend.CopyID(m.ID, s.Queue)
					cp = append(cp, m)
				}
			}
			if len(cp) == 0 {
				continue
			}
			if _, err := d.Enqueue(ctx, s.Queue, cp); err != nil {
				return 0, fmt.Errorf("subscription %s: %w", s.Queue, err)
			}
			reached[s.Queue] = true
		}
		subs = max(subs, len(reached))
	}
	return subs, nil
}

// lagCheckDue reports whether a publish to topic should bring back the age
// of the log's oldest event for noteLag: at most once per second per topic
// and driver, as a publish does not need it.
func (d *Driver) lagCheckDue(topic string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if last, ok := d.lagChecked[topic]; ok && time.Since(last) < lagCheckEvery {
		return false
	}
	d.lagChecked[topic] = time.Now()
	return true
}

// noteLag warns, at most once per lagWarnAge and topic, when the oldest
// event the topic's log keeps (oldest, Unix ms) is older than lagWarnAge
// and the slowest subscription (slow, looked up when empty) has not copied
// it. A subscription whose progress the topic's side does not have yet (its
// receives stopped right after a copy) has it recorded instead, which trims
// the log, and the next slowest is looked at.
func (d *Driver) noteLag(ctx context.Context, topic, slow string, oldest int64) {
	if oldest < 0 || time.Since(msTime(oldest)) < lagWarnAge {
		return
	}
	d.mu.Lock()
	if last, ok := d.lagWarned[topic]; ok && time.Since(last) < lagWarnAge {
		d.mu.Unlock()
		return
	}
	d.lagWarned[topic] = time.Now()
	d.mu.Unlock()
	tk := d.topicKeys(topic)
	for range 10 {
		h, err := d.c.HGetAll(ctx, tk.subs).Result()
		if err != nil {
			return
		}
		if slow == "" {
			var min string
			for q, c := range h {
				if !strings.HasPrefix(q, "n:") && (min == "" || sidLess(c, min)) {
					slow, min = q, c
				}
			}
			if slow == "" {
				return
			}
		}
		qc, err := d.c.HGet(ctx, d.keys(slow).topics, topic).Result()
		if err != nil || !sidLess(h[slow], qc) {
			break // it has not copied past its recorded cursor: it lags
		}
		v, err := runOnce(ctx, d.c, scriptTopicAdvance, tk.list(), slow, qc).Slice()
		if err != nil || len(v) != 3 {
			return
		}
		slow, oldest = str(v[0]), toInt(v[2])
		if slow == "" || oldest < 0 || time.Since(msTime(oldest)) < lagWarnAge {
			return
		}
	}
	d.o.Logger.Warn("fila/redis: a subscription lags: the topic's log keeps every event it has not read",
		slog.String("topic", topic), slog.String("subscription", slow), slog.Duration("oldest_unread", time.Since(msTime(oldest)).Round(time.Second)),
		slog.String("to_do", "run its consumers; or delete its queue (QueueDelete skips what it has not read); or end it with TopicUnsubscribe"))
}

// topicCopy is a claim's part in its queue's subscriptions: the copy of
// what its topics' logs hold beyond its cursors (the copy script's
// arguments, nil when there is nothing to copy), run before the claim in the
// claim's transaction, and the read of the queue's topics hash, after it.
type topicCopy struct {
	qt      *queueTopics
	pulling bool     // it holds qt.pulling
	topics  string   // the queue's topics hash
	keys    []string // the copy script's keys (only when there is a copy)
	args    []any
	cmd     *goredis.Cmd
	read    *goredis.MapStringStringCmd // the topics hash, read in the claim's transaction
}

// release ends tc's hold on its queue's pulling flag.
func (tc *topicCopy) release() {
	if !tc.pulling {
		return
	}
	tc.pulling = false
	tc.qt.mu.Lock()
	tc.qt.pulling = false
	tc.qt.mu.Unlock()
}

// copyFailed handles an error reading the copy's reply or the topics hash
// after a claim that otherwise succeeded: with nothing claimed it is the
// Receive's error; else what was claimed is handed out, the failure logged,
// and the next receive copies again.
func (d *Driver) copyFailed(ctx context.Context, queue string, err error, claimed int) error {
	if claimed == 0 {
		return d.fail(ctx, err)
	}
	d.o.Logger.Warn("fila/redis: copying from the queue's topics failed", slog.String("queue", queue), slog.Any("error", err))
	return nil
}

// claimed records whether the claim filled its Max (see topicPull).
func (tc *topicCopy) claimed(got, max int) {
	tc.qt.mu.Lock()
	tc.qt.full = got >= max
	tc.qt.mu.Unlock()
}

// pre adds the copy script and the topics hash read to the claim's
// transaction.
func (tc *topicCopy) pre(ctx context.Context, p goredis.Pipeliner) {
	if tc.args != nil {
		tc.cmd = scriptTopicCopy.EvalSha(ctx, p, tc.keys, tc.args...)
	}
	tc.read = p.HGetAll(ctx, tc.topics)
}

// finish reads the copy script's reply and the topics hash, and records
// the cursors; it runs the copy again, alone, when Redis did not have the
// script cached. It reports whether the claim should be made again: the
// copy ran after it, or the hash named a topic the claim did not copy from.
func (tc *topicCopy) finish(ctx context.Context, c goredis.UniversalClient) (again bool, err error) {
	defer tc.release()
	if tc.cmd != nil {
		if e := tc.cmd.Err(); e != nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
			tc.cmd = runOnce(ctx, c, scriptTopicCopy, tc.keys, tc.args...)
			again = true
		}
		v, err := tc.cmd.StringSlice()
		if err != nil {
			return false, err
		}
		tc.qt.mu.Lock()
		for i := 0; i+1 < len(v); i += 2 {
			t, cur := v[i], v[i+1]
			if cur == "" {
				delete(tc.qt.cur, t)
				delete(tc.qt.told, t)
			} else if old, ok := tc.qt.cur[t]; !ok || sidLess(old, cur) {
				tc.qt.cur[t] = cur
			}
		}
		tc.qt.mu.Unlock()
	}
	if tc.read == nil {
		return again, nil
	}
	h, err := tc.read.Result()
	if err != nil {
		return again, err
	}
	if tc.qt.setTopics(h) {
		again = true
	}
	return again, nil
}

// claimPre returns the function that adds what pre adds (when not nil),
// then tc's part, to a claim's transaction.
func claimPre(ctx context.Context, tc *topicCopy, pre func(goredis.Pipeliner)) func(goredis.Pipeliner) {
	return func(p goredis.Pipeliner) {
		if pre != nil {
			pre(p)
		}
		tc.pre(ctx, p)
	}
}

// topicPull prepares a claim's part in queue's subscriptions. When the
// driver knows of any, and no other Receive of the driver is copying for
// the queue, and the last claim came back short of its Max or pullEvery
// has passed, one pipeline reads their logs beyond the queue's cursors (up
// to max(want, pullBytes of events) each, at most pullMax) and records those cursors on the
// topics' side (which trims the logs).
func (d *Driver) topicPull(ctx context.Context, queue string, k keys, want int) (*topicCopy, error) {
	qt := d.topicState(queue)
	tc := &topicCopy{qt: qt, topics: k.topics}
	qt.mu.Lock()
	if len(qt.cur) == 0 || qt.pulling || (qt.full && time.Since(qt.lastPull) < pullEvery) {
		qt.mu.Unlock()
		return tc, nil
	}
	qt.pulling = true
	tc.pulling = true
	qt.lastPull = time.Now()
	cur := make(map[string]string, len(qt.cur))
	var tell []string
	for t, c := range qt.cur {
		cur[t] = c
		if qt.told[t] != c {
			tell = append(tell, t)
		}
	}
	size := qt.size
	qt.mu.Unlock()
	count := int64(min(max(want, pullCount(size)), pullMax))
	type read struct {
		topic string
		cmd   *goredis.Cmd
	}
	var (
		reads []read
		tells []tellCmd
	)
	_, err := d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for t, c := range cur {
			// Do, not XRangeN: the generic reply keeps the fields' order
			// and costs less to decode than a map per entry.
			reads = append(reads, read{t, p.Do(ctx, "XRANGE", d.topicKeys(t).log, "("+c, "+", "COUNT", count)})
		}
		for _, t := range tell {
			tells = append(tells, d.tellTopic(ctx, p, queue, t, cur[t]))
		}
		return nil
	})
	if err != nil && !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		tc.release()
		return nil, d.fail(ctx, err)
	}
	d.told(ctx, queue, qt, tells)
	args := []any{group, 0}
	n, events, bytes := 0, 0, 0
	for _, r := range reads {
		es, _ := r.cmd.Val().([]any)
		if len(es) == 0 {
			continue
		}
		n++
		args = append(args, r.topic, len(es))
		for _, x := range es {
			e, ok := x.([]any)
			if !ok || len(e) != 2 {
				tc.release()
				return nil, fmt.Errorf("fila/redis: unexpected XRANGE entry %T", x)
			}
			fs, _ := e[1].([]any)
			args = append(args, str(e[0]), len(fs))
			for i := 0; i+1 < len(fs); i += 2 {
				f, v := str(fs[i]), str(fs[i+1])
				if f == fID {
					v = backend.CopyID(v, queue)
				}
				args = append(args, f, v)
				bytes += len(v)
			}
			events++
		}
	}
	if events > 0 {
		qt.mu.Lock()
		qt.size = max(bytes/events, 1)
		qt.mu.Unlock()
	}
	if n > 0 {
		args[1] = n
		tc.args = args
		tc.keys = append(k.list(), k.topics, k.tpats)
	} else {
		tc.release()
	}
	return tc, nil
}

// pullCount is how many events of mean size size make pullBytes (1
// when the size is not known yet).
func pullCount(size int) int {
	if size <= 0 {
		return 1
	}
	return pullBytes / size
}

// tellCmd is the record of a queue's cursor on a topic's side.
type tellCmd struct {
	topic, cur string
	cmd        *goredis.Cmd
}

// tellTopic adds to p the record of queue's cursor cur on topic's side.
func (d *Driver) tellTopic(ctx context.Context, p goredis.Pipeliner, queue, topic, cur string) tellCmd {
	return tellCmd{topic, cur, scriptTopicAdvance.EvalSha(ctx, p, d.topicKeys(topic).list(), queue, cur)}
}

// told reads the replies of tells (running a script Redis had not cached
// again, alone), notes what was recorded and warns of a lag they report.
func (d *Driver) told(ctx context.Context, queue string, qt *queueTopics, tells []tellCmd) {
	for _, tl := range tells {
		cmd := tl.cmd
		if e := cmd.Err(); e != nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
			cmd = runOnce(ctx, d.c, scriptTopicAdvance, d.topicKeys(tl.topic).list(), queue, tl.cur)
		}
		v, err := cmd.Slice()
		if err != nil || len(v) != 3 {
			continue // told again next time
		}
		qt.mu.Lock()
		qt.told[tl.topic] = tl.cur
		qt.mu.Unlock()
		d.noteLag(ctx, tl.topic, str(v[0]), toInt(v[2]))
	}
}

// topicIdle records, before a Receive waits, the queue's cursors that its
// topics' sides do not have yet, so that a subscription that read
// everything lets the logs be trimmed at once.
func (d *Driver) topicIdle(ctx context.Context, queue string) {
	qt := d.topicState(queue)
	qt.mu.Lock()
	var tell map[string]string
	for t, c := range qt.cur {
		if qt.told[t] != c {
			if tell == nil {
				tell = map[string]string{}
			}
			tell[t] = c
		}
	}
	qt.mu.Unlock()
	if tell == nil {
		return
	}
	var tells []tellCmd
	_, _ = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for t, c := range tell {
			tells = append(tells, d.tellTopic(ctx, p, queue, t, c))
		}
		return nil
	})
	d.told(ctx, queue, qt, tells)
}

// topicWaits returns the logs of queue's topics to watch, each from the
// queue's cursor, as its last claim saw them; none while another Receive
// copies from them (its copy wakes the queue's stream).
func (d *Driver) topicWaits(queue string) []streamAt {
	qt := d.topicState(queue)
	qt.mu.Lock()
	defer qt.mu.Unlock()
	if qt.pulling {
		// the copy under way wakes the queue's stream
		return nil
	}
	out := make([]streamAt, 0, len(qt.cur))
	for t, c := range qt.cur {
		out = append(out, oneStream(d.topicKeys(t).log, c))
	}
	return out
}

// lagScan bounds how many of a subscription's uncopied events its stats
// read to tell those its patterns take from the others.
const lagScan = 1000

// topicLag returns, for queue's stats, how many events its topics' logs
// hold that it has not copied and the id time of the oldest of them (Unix
// ms, or -1), from its topics hash h and its topic patterns hash pats. For
// a subscription with patterns, it counts the events they take among the
// first lagScan it has not copied, and every one beyond those.
func (d *Driver) topicLag(ctx context.Context, h, pats map[string]string) (n int64, oldest int64, err error) {
	type lag struct {
		base  string
		lines []patLine
		info  *goredis.XInfoStreamCmd
		first *goredis.XMessageSliceCmd
	}
	var ls []lag
	_, err = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for t, c := range h {
			if strings.HasPrefix(t, "n:") {
				continue
			}
			tk := d.topicKeys(t)
			l := lag{base: h["n:"+t], lines: parsePatLines(pats[t]), info: p.XInfoStream(ctx, tk.log)}
			count := int64(1)
			if len(l.lines) > 0 {
				count = lagScan
			}
			l.first = p.XRangeN(ctx, tk.log, "("+c, "+", count)
			ls = append(ls, l)
		}
		return nil
	})
	oldest = -1
	if err != nil && err != goredis.Nil && !strings.Contains(err.Error(), "no such key") {
		return 0, -1, d.fail(ctx, err)
	}
	older := func(id string) {
		if ms, _, ok := parseSID(id); ok && (oldest < 0 || int64(ms) < oldest) {
			oldest = int64(ms)
		}
	}
	for _, l := range ls {
		info, err := l.info.Result()
		if err != nil {
			continue // no log yet
		}
		var base int64
		fmt.Sscan(l.base, &base)
		m := max(info.EntriesAdded-base, 0)
		es := l.first.Val()
		if len(l.lines) == 0 {
			n += m
			if len(es) > 0 {
				older(es[0].ID)
			}
			continue
		}
		first := ""
		for _, e := range es {
			p, _ := e.Values[fPayload].(string)
			if takes(l.lines, e.ID, payloadKind(p)) {
				n++
				if first == "" {
					first = e.ID
				}
			}
		}
		if len(es) == lagScan && m > lagScan {
			// beyond the scan: every event, the oldest no older than the
			// scan's last
			n += m - lagScan
			if first == "" {
				first = es[len(es)-1].ID
			}
		}
		if first != "" {
			older(first)
		}
	}
	return n, oldest, nil
}

// skipTopics moves each of queue's cursors to its topic log's end
// (QueueDelete): what was published before is not copied, and the log is
// trimmed without it.
func (d *Driver) skipTopics(ctx context.Context, queue string, k keys) error {
	h, err := d.c.HGetAll(ctx, k.topics).Result()
	if err != nil {
		return d.fail(ctx, err)
	}
	for t := range h {
		if strings.HasPrefix(t, "n:") {
			continue
		}
		info, err := d.c.XInfoStream(ctx, d.topicKeys(t).log).Result()
		if err != nil {
			if strings.Contains(err.Error(), "no such key") {
				continue
			}
			return d.fail(ctx, err)
		}
		if err := runOnce(ctx, d.c, scriptTopicSkip, []string{k.topics}, t, info.LastGeneratedID, info.EntriesAdded).Err(); err != nil {
			return d.fail(ctx, err)
		}
		// the log need not keep what the queue skipped
		if err := runOnce(ctx, d.c, scriptTopicAdvance, d.topicKeys(t).list(), queue, info.LastGeneratedID).Err(); err != nil {
			return d.fail(ctx, err)
		}
	}
	return nil
}
