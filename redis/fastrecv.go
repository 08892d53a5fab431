package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// The fast receive path reads new entries with a native XREADGROUP instead
// of inside the receive script: converting a batch of entries into Lua values
// and back was most of a receive's cost. It is one MULTI/EXEC transaction,
//
//	XREADGROUP  up to Max new entries, as this call's lease consumer
//	EVALSHA     record the consumer's deadline, promote due delayed
//	            messages, run the throttled sweep
//
// and runs atomically, so what the XREADGROUP read always has its deadline.
// The script never sees the entries: the pending list records them under
// the consumer. Should the script be missing from the server's cache
// (NOSCRIPT after a restart or SCRIPT FLUSH), the driver runs it again at
// once, outside the transaction; if the client dies in between, the entries
// are orphans until the sweep finds them (Options.OrphanIdle).
//
// Promotion runs after the read, so a delayed message that just came due is
// read by the next Receive (which follows at once when this one read
// nothing).
//
// The fast path takes over no expired lease (it cannot know, when the
// transaction is built, how many entries the takeover will return), so
// Receive uses it only while the earliest lease deadline the previous call
// saw is in the future; otherwise it runs the receive script, which takes
// over expired leases first.
//
// It reads level 0 only, so Receive uses it only while the queue's last
// claim found no stream of a level above 0. Should the script find one (made
// since by another client, or by the promotion it runs), it undoes the
// XREADGROUP (acks what it read out of the pending list and sets the
// group's last-delivered id back before it: those entries are new again,
// their attempts untouched) and the caller claims with the receive script.

// scriptReceivePost runs after the fast path's XREADGROUP:
// lua/receive_post.lua.
var scriptReceivePost = script("receive_post.lua")

// fastResult is the outcome of one claim, by either path.
type fastResult struct {
	ds []backend.Delivery
	// got: the claim read entries (ds may still be empty, if none could
	// be decoded).
	got bool
	// again: claim again at once. Otherwise, when ds is empty, wake and
	// next are where and until when to wait: wake holds an id per level's
	// stream (keys.streams).
	again bool
	wake  []string
	next  time.Duration // -1: no known due time
	// levels: the fast path found levels above 0 in use and gave back what
	// it read (again is set).
	levels bool
}

// claimFast runs the fast receive transaction, after what pre (when not
// nil) adds to it: AckReceive's ack, the copy from the queue's topics.
func (d *Driver) claimFast(ctx context.Context, queue string, k keys, p backend.ReceiveParams, tok string, pre func(goredis.Pipeliner)) (res fastResult, err error) {
	keys := k.list()
	consumer := leaseConsumer(tok)
	args := []any{group, consumer, ceilMS(p.Lease), defaultPromote, d.sweepMS(), d.o.OrphanIdle.Milliseconds(), p.Max}
	var post *goredis.Cmd
	var xr *goredis.Cmd
	cmds, txErr := d.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		if pre != nil {
			pre(pipe)
		}
		// Do, not XReadGroup: the generic reply costs less to decode.
		xr = pipe.Do(ctx, "XREADGROUP", "GROUP", group, consumer, "COUNT", p.Max, "STREAMS", k.stream, ">")
		post = scriptReceivePost.EvalSha(ctx, pipe, keys, args...)
		return nil
	})
	if err := post.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		// Not cached: record the deadline of what the XREADGROUP read now
		// (Run loads the script).
		post = runOnce(ctx, d.c, scriptReceivePost, keys, args...)
	}
	pv, perr := post.Slice()
	if perr != nil {
		// The transaction did not run, or the script failed: whatever the
		// XREADGROUP read has no deadline and the sweep recovers it.
		if goredis.IsExecAbortError(perr) {
			perr = execAbortCause(txErr, cmds)
		}
		return res, d.fail(ctx, perr)
	}
	if len(pv) != 7 {
		return res, fmt.Errorf("fila/redis: receive post script returned %d values", len(pv))
	}
	now, deadline := toInt(pv[0]), msTime(toInt(pv[1]))
	d.setHint(queue, now, toInt(pv[2]))
	if toInt(pv[6]) > 0 {
		// levels in use: the script gave back what the XREADGROUP read
		d.setLevels(queue, true)
		res.again, res.levels = true, true
		return res, nil
	}
	reply, xerr := xr.Result()
	if xerr != nil && !errors.Is(xerr, goredis.Nil) {
		if toInt(pv[5]) == 1 { // NOGROUP, and the script recreated the group
			res.again = true
			return res, nil
		}
		return res, d.fail(ctx, xerr)
	}
	entries, err := readEntries(reply)
	if err != nil {
		return res, err
	}
	if len(entries) > 0 {
		res.ds = make([]backend.Delivery, 0, len(entries))
	}
	for _, x := range entries {
		e, ok := x.([]any)
		if !ok || len(e) != 2 {
			return res, fmt.Errorf("fila/redis: unexpected XREADGROUP entry %T", x)
		}
		sid := str(e[0])
		receipt := makeReceipt(sid, tok)
		m, prior, lastErr, err := entryMessage(e[1])
		if err != nil {
			d.o.Logger.Error("fila/redis: dead-lettering an undecodable stream entry", "queue", queue, "stream_id", sid, "error", err)
			_ = d.Dead(ctx, backend.Ref{Queue: queue, ID: m.ID, Receipt: receipt}, "fila/redis: undecodable entry: "+err.Error(), prior)
			continue
		}
		res.ds = append(res.ds, backend.Delivery{Message: m, Attempt: prior + 1, Receipt: receipt, Deadline: deadline, LastError: lastErr})
	}
	if len(res.ds) > 0 {
		return res, nil
	}
	if toInt(pv[5]) == 1 {
		res.again = true
		return res, nil
	}
	res.wake, res.next = []string{str(pv[3]), "0-0", "0-0", "0-0"}, -1
	if nd := toInt(pv[4]); nd >= 0 {
		res.next = time.Duration(nd-now+1) * time.Millisecond
	}
	return res, nil
}

// leaseConsumer is the consumer name of lease token tok (see lua/prelude.lua).
func leaseConsumer(tok string) string { return "l" + tok }

// setHint records, for queue, when the earliest lease deadline seen (server
// ms, or -1 for none) comes on the local clock; until then Receive may use
// the fast path.
func (d *Driver) setHint(queue string, serverNow, xmin int64) {
	var at time.Time
	if xmin < 0 {
		at = time.Now().Add(24 * time.Hour)
	} else {
		at = time.Now().Add(time.Duration(xmin-serverNow) * time.Millisecond)
	}
	d.mu.Lock()
	d.hint[queue] = at
	d.mu.Unlock()
}

// fastOK reports whether no lease of queue is known to have expired and
// no level above 0 is known to be in use.
func (d *Driver) fastOK(queue string) bool {
	d.mu.Lock()
	at, lv := d.hint[queue], d.levels[queue]
	d.mu.Unlock()
	return !lv && time.Now().Before(at)
}

// setLevels records whether queue has levels above 0 in use.
func (d *Driver) setLevels(queue string, in bool) {
	d.mu.Lock()
	if in {
		d.levels[queue] = true
	} else {
		delete(d.levels, queue)
	}
	d.mu.Unlock()
}
