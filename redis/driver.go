package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// group is the name of the consumer group of every queue's stream.
const group = "fila"

// maxAckScript is the most refs one ack script call settles (Lua's unpack
// has a stack limit); larger batches take several calls in one pipeline.
const maxAckScript = 1000

// Driver is the Redis driver. It implements backend.Driver and the optional
// Deduper, DeadLetterer, StatsReader, Pinger, Namer, DelayedReceiver,
// DeadImporter, QueueLister, QueueDeleter, Marker, MarkLister, Topics,
// Prioritizer and MessageLister interfaces. Use it through fila.Open("redis://…"), or build it with New
// over a go-redis client and wrap it with fila.New (see ExampleNew).
type Driver struct {
	c goredis.UniversalClient
	o Options
	// tokBase and tokSeq make each Receive's lease tokens unique; a token
	// names the call's lease consumer in the queue's group (see lua/prelude.lua).
	tokBase string
	tokSeq  atomic.Uint64

	// waits tracks goroutines blocked on a stream (XREAD BLOCK), which go-redis
	// cannot interrupt; Close waits for them (at most Options.Block).
	waits sync.WaitGroup

	mu   sync.Mutex
	hint map[string]time.Time // per queue, when the earliest lease seen expires (see fastOK)
	// levels holds the queues whose last claim (or an enqueue of this
	// driver) found streams of levels above 0: their claims take the
	// receive script, which reads every level (see fastOK).
	levels map[string]bool
	// watches holds, per set of stream keys (joined by NUL), the blocking
	// read waiting Receives share (see watch).
	watches map[string]*streamWatch
	closed  bool

	qtopics    map[string]*queueTopics // per queue, its subscriptions as last seen (topics.go)
	lagWarned  map[string]time.Time    // per topic, the last lag warning
	lagChecked map[string]time.Time    // per topic, the last publish that asked for the log's age
	adopted    sync.Map                // topics whose earlier-version subscriptions were adopted
}

// New returns a driver over a go-redis client the caller owns (a *Client,
// *ClusterClient or failover client). Close does not close the client unless
// o.CloseClient is set. New reads the server's maxmemory-policy and logs a
// warning unless it is noeviction. Unlike Open it does not fail when the
// server does not answer (call Ping for that).
func New(client goredis.UniversalClient, o Options) (*Driver, error) {
	if client == nil {
		return nil, backend.Invalidf("redis client is nil")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return newDriver(ctx, client, o, false)
}

// newDriver builds the driver; with ping it first checks that the server
// answers.
func newDriver(ctx context.Context, client goredis.UniversalClient, o Options, ping bool) (*Driver, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("fila/redis: random token base: %w", err)
	}
	d := &Driver{c: client, o: o, tokBase: hex.EncodeToString(b), hint: map[string]time.Time{}, levels: map[string]bool{}, watches: map[string]*streamWatch{},
		qtopics: map[string]*queueTopics{}, lagWarned: map[string]time.Time{}, lagChecked: map[string]time.Time{}}
	registerLog(d)
	if ping {
		if err := d.pingWithin(ctx); err != nil {
			unregisterLog(d)
			return nil, err
		}
	}
	d.checkPolicy(ctx)
	return d, nil
}

// checkPolicy warns when Redis may evict keys: an evicted lease, stream or
// dedup key silently loses or duplicates messages.
func (d *Driver) checkPolicy(ctx context.Context) {
	v, err := d.c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		d.o.Logger.Debug("fila/redis: cannot read maxmemory-policy (CONFIG GET refused?); make sure it is noeviction", slog.Any("error", err))
		return
	}
	if p := v["maxmemory-policy"]; p != "" && p != "noeviction" {
		d.o.Logger.Warn("fila/redis: maxmemory-policy is not noeviction: under memory pressure Redis may evict queue keys and lose or duplicate messages; set maxmemory-policy noeviction",
			slog.String("maxmemory_policy", p))
	}
}

// DriverName returns "redis".
func (d *Driver) DriverName() string { return "redis" }

// DedupKeys reports that dedup keys are enforced.
func (d *Driver) DedupKeys() bool { return true }

// Priorities reports that message levels are honoured
// (backend.Prioritizer): a stream per level (see the package doc).
func (d *Driver) Priorities() bool { return true }

// Client returns the go-redis client the driver uses.
func (d *Driver) Client() goredis.UniversalClient { return d.c }

// Ping checks that Redis answers.
func (d *Driver) Ping(ctx context.Context) error {
	return d.fail(ctx, d.c.Ping(ctx).Err())
}

// pingWithin is Ping returning when ctx ends even if the server accepted
// the connection and never answers: go-redis bounds a read by its read
// timeout, not by ctx. The abandoned PING ends when the client is closed.
func (d *Driver) pingWithin(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- d.c.Ping(ctx).Err() }()
	select {
	case err := <-done:
		return d.fail(ctx, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Driver) keys(queue string) keys { return queueKeys(d.o.Prefix, queue) }

// fail maps an error from Redis: the context's error when ctx ended (so
// errors.Is(err, context.Canceled) holds), backend.ErrClosed for a closed
// client, an error wrapping backend.ErrAccessDenied for refused credentials
// or ACL permissions (see accessDenied), an error wrapping
// backend.ErrUnavailable for failures a retry may cure (see retryable),
// otherwise the cause wrapped with the driver's name.
// It is the driver's single error-mapping point.
func (d *Driver) fail(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, goredis.ErrClosed) {
		return backend.ErrClosed
	}
	if errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrAccessDenied) {
		return err
	}
	if accessDenied(err) {
		return fmt.Errorf("fila/redis: %w: %w", backend.ErrAccessDenied, err)
	}
	if retryable(err) {
		if cc, ok := d.c.(*goredis.ClusterClient); ok {
			// go-redis reloads a cluster's slot map on MOVED, or every
			// ClusterStateReloadInterval (60s): after a master's failure
			// nobody answers MOVED for its slots, and calls would go to the
			// dead node for a minute. Reloading on each failure (go-redis
			// coalesces them) finds the promoted replica once it took over.
			cc.ReloadState(ctx)
		}
		return fmt.Errorf("fila/redis: %w: %w", backend.ErrUnavailable, err)
	}
	return fmt.Errorf("fila/redis: %w", err)
}

// execAbortCause returns, for a MULTI/EXEC transaction that Redis discarded
// with EXECABORT (a command was refused while being queued, so nothing ran
// and nothing was stored), the refusal of the first refused command: that
// reply (LOADING while Redis loads its data, OOM, READONLY, …) is what says
// whether a retry may help, while EXECABORT itself does not. Any other
// error is returned unchanged.
func execAbortCause(err error, cmds []goredis.Cmder) error {
	if !goredis.IsExecAbortError(err) {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !goredis.IsExecAbortError(cerr) {
			return fmt.Errorf("%w (%v; the transaction stored nothing)", cerr, err)
		}
	}
	return err
}

// accessDenied reports whether err is Redis refusing the credentials
// (WRONGPASS, NOAUTH) or an ACL refusing the command or key (NOPERM).
// Errors raised inside a script keep the prefix of the command that failed.
func accessDenied(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "WRONGPASS ") || strings.HasPrefix(s, "NOAUTH ") || strings.HasPrefix(s, "NOPERM ")
}

// retryableReplies are the prefixes of Redis error replies that a later
// retry may cure: the server is loading its data, shutting down, failing
// over, out of memory or clients, or busy with a long script (but not
// BUSYGROUP, hence the spaces). Errors raised
// inside a script keep the prefix of the command that failed.
var retryableReplies = []string{
	"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ", "NOREPLICAS ",
	"BUSY ", "OOM ", "ERR max number of clients reached",
}

// retryable reports whether err is a lost, refused or timed-out connection,
// an exhausted connection pool, or one of retryableReplies.
func retryable(err error) bool {
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, goredis.ErrPoolTimeout) || errors.As(err, &ne) ||
		// A deadline inside go-redis (dial or read timeout) while the
		// caller's context is alive.
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s := err.Error()
	for _, p := range retryableReplies {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe") ||
		strings.Contains(s, "connection refused")
}

// Enqueue stores msgs with one script call: the batch is stored whole (a
// Redis script runs atomically). Messages due now go to the stream of their
// level, delayed ones to the delayed set. A batch without dedup keys,
// delays or run-at times skips the script: its entries are plain XADDs in
// one MULTI/EXEC transaction (atomic too). Such a batch may create a stream
// without its consumer group; the first Receive creates the group from the
// stream's start.
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	k := d.keys(queue)
	for i := range msgs {
		if msgs[i].Priority > 0 {
			d.setLevels(queue, true)
			break
		}
	}
	if plainBatch(msgs) && d.o.WaitReplicas == 0 {
		return d.enqueuePlain(ctx, k, msgs)
	}
	args := make([]any, 0, 2+len(msgs)*17)
	args = append(args, group, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		runAt := int64(-1)
		if !m.RunAt.IsZero() {
			runAt = unixCeilMS(m.RunAt)
		}
		args = append(args, m.ID, m.DedupKey, runAt, ceilMS(m.Delay), level(m.Priority), 0)
		at := len(args) - 1
		var n int
		var err error
		if args, n, err = appendFields(args, m); err != nil {
			return nil, err
		}
		args[at] = n
	}
	v, err := d.runDurable(ctx, scriptEnqueue, k.list(), args...).Slice()
	if err != nil {
		return nil, d.fail(ctx, err)
	}
	if len(v) != len(msgs) {
		return nil, fmt.Errorf("fila/redis: enqueue script returned %d results for %d messages", len(v), len(msgs))
	}
	res := make([]backend.EnqueueResult, len(msgs))
	for i, x := range v {
		if holder := str(x); holder != "" {
			res[i] = backend.EnqueueResult{ID: holder, Duplicate: true}
		} else {
			res[i] = backend.EnqueueResult{ID: msgs[i].ID}
		}
	}
	return res, nil
}

// plainBatch reports whether every message of msgs is due now and has no
// dedup key.
func plainBatch(msgs []backend.Message) bool {
	for i := range msgs {
		if msgs[i].DedupKey != "" || msgs[i].Delay != 0 || !msgs[i].RunAt.IsZero() {
			return false
		}
	}
	return true
}

// enqueuePlain appends msgs to the streams of their levels with XADDs in
// one transaction.
func (d *Driver) enqueuePlain(ctx context.Context, k keys, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	fields := make([][]any, len(msgs))
	for i := range msgs {
		f, _, err := appendFields(make([]any, 0, 6), &msgs[i])
		if err != nil {
			return nil, err
		}
		fields[i] = f
	}
	cmds, err := d.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		for i, f := range fields {
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: k.levelStream(msgs[i].Priority), Values: f})
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(ctx, execAbortCause(err, cmds))
	}
	res := make([]backend.EnqueueResult, len(msgs))
	for i := range msgs {
		res[i] = backend.EnqueueResult{ID: msgs[i].ID}
	}
	return res, nil
}

func (d *Driver) token() string {
	return d.tokBase + strconv.FormatUint(d.tokSeq.Add(1), 36)
}

// claimTimeout bounds a claim that Receive has sent, which runs under a
// context of its own (see claimContext).
const claimTimeout = 10 * time.Second

// claimContext returns the context of a claim that Receive sends: ctx's
// values without its end, and a timeout of its own. A claim sent to the
// server runs there whatever the client does, so abandoning it when the
// caller's ctx ends (a reply read cut off by a deadline, the receive
// script that follows the fast path's XREADGROUP, or the one run again
// after NOSCRIPT) would leave what it claimed leased, or without a
// deadline at all, while nobody got it. Receive waits for the claim and
// returns what it claimed, even when ctx ended meanwhile; the portable
// layer hands such deliveries out, or gives them back after Close.
func claimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
}

// Receive claims with the fast path (see fastrecv.go) while no lease is
// known to have expired, else with the claim script (promote due delayed
// messages, take over expired leases, read new entries), in both cases
// after copying what the queue's topics hold for it (topics.go); when it
// finds nothing it waits on the stream, and on its topics' logs, with XREAD
// BLOCK until a new entry arrives, the next known due time comes, or
// Options.Block passes, then claims again.
// Only the wait ends when ctx does: a claim runs to its end under
// claimContext, and what it claimed is returned with a nil error even if ctx
// ended meanwhile.
func (d *Driver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	k := d.keys(queue)
	// due: the last wait ended at a known due time, so something is likely
	// to promote or take over; the script path does that before it reads,
	// where the fast path would need a second claim.
	due := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tc, err := d.topicPull(ctx, queue, k, p.Max)
		if err != nil {
			return nil, err
		}
		tok := d.token()
		var res fastResult
		fast := p.Max >= d.o.fastMin && !due && d.fastOK(queue)
		cctx, cancel := claimContext(ctx)
		pre := claimPre(cctx, tc, nil)
		if fast {
			res, err = d.claimFast(cctx, queue, k, p, tok, pre)
		} else {
			res, err = d.claimScript(cctx, queue, k, p, tok, pre)
		}
		again, cerr := tc.finish(cctx, d.c)
		tc.claimed(len(res.ds), p.Max)
		cancel()
		if err == nil && cerr != nil {
			err = d.copyFailed(ctx, queue, cerr, len(res.ds))
		}
		switch {
		case err != nil:
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, backend.ErrUnavailable) {
				// claimContext's own timeout.
				err = fmt.Errorf("fila/redis: the claim took longer than %v: %w: %w", claimTimeout, backend.ErrUnavailable, err)
			}
			return nil, err
		case len(res.ds) > 0 || (res.got && !fast):
			return res.ds, nil
		case res.again || again:
			continue
		}
		wait := d.o.Block
		if res.next >= 0 && res.next < wait {
			wait = res.next
		}
		d.topicIdle(ctx, queue)
		if due, err = d.waitAny(ctx, append(d.topicWaits(queue), streamAt{k.streams(), res.wake}), max(wait, time.Millisecond)); err != nil {
			return nil, err
		}
	}
}

// claimScript runs the receive script once, after what pre (when not nil)
// adds to its transaction: AckReceive's ack, the copy from the queue's
// topics (see topics.go).
func (d *Driver) claimScript(ctx context.Context, queue string, k keys, p backend.ReceiveParams, tok string, pre func(goredis.Pipeliner)) (res fastResult, err error) {
	keys := k.list()
	args := []any{group, leaseConsumer(tok), p.Max, ceilMS(p.Lease), defaultPromote, d.sweepMS(), d.o.OrphanIdle.Milliseconds()}
	var cmd *goredis.Cmd
	if pre == nil {
		cmd = runOnce(ctx, d.c, scriptReceive, keys, args...)
	} else {
		// The commands' own errors tell each one's outcome (a NOSCRIPT of
		// the ack's script does not stop this one).
		_, _ = d.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			pre(pipe)
			cmd = scriptReceive.EvalSha(ctx, pipe, keys, args...)
			return nil
		})
		if e := cmd.Err(); e != nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
			cmd = runOnce(ctx, d.c, scriptReceive, keys, args...)
		}
	}
	v, err := cmd.Slice()
	if err != nil {
		return res, d.fail(ctx, err)
	}
	if len(v) < 5 || (len(v)-5)%3 != 0 {
		return res, fmt.Errorf("fila/redis: receive script returned %d values", len(v))
	}
	d.setHint(queue, toInt(v[0]), toInt(v[3]))
	d.setLevels(queue, toInt(v[4]) > 0)
	if len(v) > 5 {
		res.got = true
		res.ds, err = d.deliveries(ctx, queue, tok, v[5:], msTime(toInt(v[1])), 3)
		return res, err
	}
	ws, _ := v[2].([]any)
	if len(ws) != 1+backend.MaxPriority {
		return res, fmt.Errorf("fila/redis: receive script returned %d wake ids", len(ws))
	}
	res.wake, res.next = make([]string, len(ws)), -1
	for i, w := range ws {
		res.wake[i] = str(w)
	}
	if next := toInt(v[3]); next >= 0 {
		res.next = time.Duration(next-toInt(v[0])+1) * time.Millisecond
	}
	return res, nil
}

// AckReceive acks refs and claims what of queue is ready in one MULTI/EXEC
// (backend.AckReceiver): the ack script, then the claim Receive would make
// first (the fast path's XREADGROUP and script, or the receive script).
// Refs of other queues, or more than one ack script call's worth, are only
// acked, and nothing is claimed. When the fast path finds levels above 0 in
// use, the receive script claims after it, in a round trip of its own.
func (d *Driver) AckReceive(ctx context.Context, refs []backend.Ref, queue string, p backend.ReceiveParams) ([]error, []backend.Delivery, error) {
	errs, batches := ackBatches(refs)
	if len(batches) > 1 || (len(batches) == 1 && batches[0].queue != queue) {
		if err := d.runAcks(ctx, batches, errs); err != nil {
			return nil, nil, err
		}
		return errs, nil, nil
	}
	// The ack and the claim go out together: like Receive's, the claim
	// runs to its end (claimContext), and the portable layer gives back
	// what it claimed when the caller's ctx ended meanwhile.
	ctx, cancel := claimContext(ctx)
	defer cancel()
	k := d.keys(queue)
	var (
		ack *goredis.Cmd
		pre func(goredis.Pipeliner)
	)
	if len(batches) == 1 {
		b := batches[0]
		pre = func(pipe goredis.Pipeliner) { ack = scriptAck.EvalSha(ctx, pipe, k.list(), b.args...) }
	}
	tc, err := d.topicPull(ctx, queue, k, p.Max)
	if err != nil {
		return nil, nil, err
	}
	pre = claimPre(ctx, tc, pre)
	tok := d.token()
	var res fastResult
	if p.Max >= d.o.fastMin && d.fastOK(queue) {
		res, err = d.claimFast(ctx, queue, k, p, tok, pre)
		if err == nil && res.levels {
			// The queue has levels in use: the fast path gave back what it
			// read; claim them with the script, the ack already sent.
			res, err = d.claimScript(ctx, queue, k, p, d.token(), nil)
		}
	} else {
		res, err = d.claimScript(ctx, queue, k, p, tok, pre)
	}
	if _, cerr := tc.finish(ctx, d.c); err == nil && cerr != nil {
		err = d.copyFailed(ctx, queue, cerr, len(res.ds))
	}
	tc.claimed(len(res.ds), p.Max)
	if ack != nil {
		if e := ack.Err(); e != nil && strings.HasPrefix(e.Error(), "NOSCRIPT") {
			ack = runOnce(ctx, d.c, scriptAck, k.list(), batches[0].args...)
		}
		if aerr := d.ackOutcome(ctx, ack, batches[0], errs); aerr != nil {
			// What was claimed comes back when its lease expires.
			return nil, nil, aerr
		}
	}
	if err != nil {
		return errs, nil, err
	}
	return errs, res.ds, nil
}

// sweepMS is the sweep interval for the scripts (0: never).
func (d *Driver) sweepMS() int64 {
	if d.o.SweepEvery > 0 {
		return d.o.SweepEvery.Milliseconds()
	}
	return 0
}

// wait blocks until the stream has an entry after id, wait passes or ctx
// ends, and reports whether it ended at wait (a due time). The stream is
// watched with XREAD BLOCK for Options.Block, but a shorter wait (a known
// due time: a run-at or a lease deadline) ends on a local timer: Redis ends
// a blocking command's timeout only when its event loop wakes, which an idle
// server does on its cron (every 100 ms at the default hz 10), so BLOCK
// alone made due messages up to that late. XREAD has no side effect, so
// abandoning it (on cancellation, or when the timer fires first) loses
// nothing; its goroutine finishes within Options.Block. The Receives of one
// driver waiting on one stream share a watch (see watch), so a series of
// short waits does not pile up blocked reads.
func (d *Driver) wait(ctx context.Context, stream, id string, wait time.Duration) (due bool, err error) {
	return d.waitAny(ctx, []streamAt{oneStream(stream, id)}, wait)
}

// streamAt is streams watched together, with one XREAD (a queue's streams,
// one per level), each for entries after its id.
type streamAt struct{ streams, ids []string }

// oneStream is a streamAt of one stream.
func oneStream(stream, id string) streamAt { return streamAt{[]string{stream}, []string{id}} }

// waitAny is wait on several streams (a queue's, one per level, and its
// topics' logs): it ends when any of them has an entry after its id.
func (d *Driver) waitAny(ctx context.Context, streams []streamAt, wait time.Duration) (due bool, err error) {
	var timer <-chan time.Time
	if wait < d.o.Block {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	ws := make([]*streamWatch, len(streams))
	for i, s := range streams {
		ws[i] = d.watch(ctx, s)
	}
	done := ws[0].done
	if len(ws) > 1 {
		woke := make(chan struct{})
		stop := make(chan struct{})
		defer close(stop)
		var once sync.Once
		for _, w := range ws {
			go func() {
				select {
				case <-w.done:
					once.Do(func() { close(woke) })
				case <-stop:
				}
			}()
		}
		done = woke
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timer:
		return true, nil
	case <-done:
		for _, w := range ws {
			select {
			case <-w.done:
				if w.err != nil && !errors.Is(w.err, goredis.Nil) {
					return false, d.fail(ctx, w.err)
				}
			default:
			}
		}
		return false, nil
	}
}

// streamWatch is one blocking XREAD on a set of streams, shared by the
// Receives of a driver that wait on those streams.
type streamWatch struct {
	ids  []string      // the XREAD's start ids
	done chan struct{} // closed when the XREAD returned
	err  error         // its error, set before done is closed
}

// watch returns a blocking XREAD on at's streams that wakes when an entry
// after its id arrives in one of them (or Options.Block passes): the one in
// flight when it started at those ids or before (it may then wake for
// entries already there, which only makes the caller claim again early),
// else a new one.
func (d *Driver) watch(ctx context.Context, at streamAt) *streamWatch {
	key := strings.Join(at.streams, "\x00")
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.watches[key]; w != nil && len(w.ids) == len(at.ids) {
		reuse := true
		for i, id := range at.ids {
			reuse = reuse && !sidLess(id, w.ids[i])
		}
		if reuse {
			return w
		}
	}
	w := &streamWatch{ids: at.ids, done: make(chan struct{})}
	d.watches[key] = w
	d.waits.Add(1)
	go func() {
		defer d.waits.Done()
		w.err = d.c.XRead(context.WithoutCancel(ctx), &goredis.XReadArgs{Streams: append(slices.Clone(at.streams), at.ids...), Count: 1, Block: d.o.Block}).Err()
		d.mu.Lock()
		if d.watches[key] == w {
			delete(d.watches, key)
		}
		d.mu.Unlock()
		close(w.done)
	}()
	return w
}

// deliveries decodes a receive script's (stream id, attempt, fields)
// triples, or with stride 4 (stream id, attempt, fields, run-at) quadruples;
// every delivery's lease token is tok.
func (d *Driver) deliveries(ctx context.Context, queue, tok string, list []any, deadline time.Time, stride int) ([]backend.Delivery, error) {
	out := make([]backend.Delivery, 0, len(list)/stride)
	for i := 0; i+stride-1 < len(list); i += stride {
		sid := str(list[i])
		receipt := makeReceipt(sid, tok)
		m, _, lastErr, err := entryMessage(list[i+2])
		if err != nil {
			// A corrupt entry would come back forever: dead-letter it.
			d.o.Logger.Error("fila/redis: dead-lettering an undecodable stream entry", slog.String("queue", queue), slog.String("stream_id", sid), slog.Any("error", err))
			// It was never handed out: this claim is not a delivery.
			_ = d.Dead(ctx, backend.Ref{Queue: queue, ID: m.ID, Receipt: receipt}, "fila/redis: undecodable entry: "+err.Error(), int(toInt(list[i+1]))-1)
			continue
		}
		if stride == 4 {
			m.RunAt = msTime(toInt(list[i+3]))
		}
		out = append(out, backend.Delivery{
			Message: m, Attempt: int(toInt(list[i+1])), Receipt: receipt,
			Deadline: deadline, LastError: lastErr,
		})
	}
	return out, nil
}

// Ack settles refs with one script call per queue (per maxAckScript refs),
// all in one pipeline (one round trip). Within a call, the refs are grouped
// by lease token and level, each group with its lowest and highest stream
// id, so the script checks a whole Receive batch of one level's stream with
// one XPENDING of its consumer.
func (d *Driver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	errs, batches := ackBatches(refs)
	if err := d.runAcks(ctx, batches, errs); err != nil {
		return nil, err
	}
	return errs, nil
}

// ackBatch is one ack script call: the refs it settles (their indexes in
// the caller's list) and its arguments.
type ackBatch struct {
	queue string
	idx   []int
	args  []any
}

// ackBatches groups refs into ack script calls: per queue, by lease token
// and level within a call, at most maxAckScript refs a call. errs holds
// ErrLeaseLost for the refs whose receipt is not one of this driver's.
func ackBatches(refs []backend.Ref) (errs []error, batches []*ackBatch) {
	errs = make([]error, len(refs))
	type tokKey struct {
		queue, tok string
		level      int
	}
	type tokRefs struct {
		tok   string
		level int
		idx   []int
		sids  []string
	}
	var queues []string
	groups := map[string][]*tokRefs{} // per queue, in order of first appearance
	byTok := map[tokKey]*tokRefs{}
	for i, r := range refs {
		q, tok, ok := parseReceipt(r.Receipt)
		if !ok {
			errs[i] = backend.ErrLeaseLost
			continue
		}
		lvl, sid, _ := splitSID(q)
		key := tokKey{r.Queue, tok, lvl}
		g := byTok[key]
		if g == nil {
			if groups[r.Queue] == nil {
				queues = append(queues, r.Queue)
			}
			g = &tokRefs{tok: tok, level: lvl}
			byTok[key] = g
			groups[r.Queue] = append(groups[r.Queue], g)
		}
		g.idx = append(g.idx, i)
		g.sids = append(g.sids, sid)
	}
	for _, q := range queues {
		var b *ackBatch
		for _, g := range groups[q] {
			for from := 0; from < len(g.sids); {
				if b == nil || len(b.idx) == maxAckScript {
					b = &ackBatch{queue: q, args: []any{group}}
					batches = append(batches, b)
				}
				to := min(len(g.sids), from+maxAckScript-len(b.idx))
				b.args = appendAckBlock(b.args, g.tok, g.level, g.sids[from:to])
				b.idx = append(b.idx, g.idx[from:to]...)
				from = to
			}
		}
	}
	return errs, batches
}

// runAcks runs the ack script calls of batches, all in one round trip,
// and records their outcomes in errs. An error means the outcome of every
// call is unknown.
func (d *Driver) runAcks(ctx context.Context, batches []*ackBatch, errs []error) error {
	// Every script call runs in MULTI/EXEC, which go-redis never replays
	// (see once.go). A cluster runs a transaction on one slot, so there it
	// takes one per queue; a single server takes one for all.
	cmds := make([]*goredis.Cmd, len(batches))
	if len(batches) == 1 {
		cmds[0] = runOnce(ctx, d.c, scriptAck, d.keys(batches[0].queue).list(), batches[0].args...)
	} else if len(batches) > 1 {
		// Make sure the script is cached, since EVALSHA in a transaction
		// cannot fall back to EVAL.
		if err := scriptAck.Load(ctx, d.c).Err(); err != nil {
			return d.fail(ctx, err)
		}
		tx := func(idx []int) {
			_, _ = d.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
				for _, i := range idx {
					cmds[i] = scriptAck.EvalSha(ctx, pipe, d.keys(batches[i].queue).list(), batches[i].args...)
				}
				return nil
			})
		}
		if _, cluster := d.c.(*goredis.ClusterClient); cluster {
			// ackBatches keeps a queue's calls together.
			for from := 0; from < len(batches); {
				to := from + 1
				for to < len(batches) && batches[to].queue == batches[from].queue {
					to++
				}
				idx := make([]int, 0, to-from)
				for i := from; i < to; i++ {
					idx = append(idx, i)
				}
				tx(idx)
				from = to
			}
		} else {
			all := make([]int, len(batches))
			for i := range all {
				all[i] = i
			}
			tx(all)
		}
		for i, b := range batches {
			if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
				cmds[i] = runOnce(ctx, d.c, scriptAck, d.keys(b.queue).list(), b.args...)
			}
		}
	}
	for i, b := range batches {
		if err := d.ackOutcome(ctx, cmds[i], b, errs); err != nil {
			if ctx.Err() != nil || len(batches) == 1 {
				return err
			}
			for _, j := range b.idx {
				errs[j] = err
			}
		}
	}
	return nil
}

// ackOutcome records in errs the outcome of b's ack script call cmd: the
// script returns the positions of the refs whose lease was lost. An error
// means the call's outcome is unknown.
func (d *Driver) ackOutcome(ctx context.Context, cmd *goredis.Cmd, b *ackBatch, errs []error) error {
	v, err := cmd.Slice()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return d.fail(ctx, err)
	}
	for _, x := range v {
		if pos := int(toInt(x)); pos >= 1 && pos <= len(b.idx) {
			errs[b.idx[pos-1]] = backend.ErrLeaseLost
		}
	}
	return nil
}

// appendAckBlock appends the block of one lease token and level of the ack
// script's arguments: token, level, lowest and highest stream id ("" when
// all are early deliveries' pseudo ids), count, count of pseudo ids, ids
// (stream ids of the level's stream, not qualified).
func appendAckBlock(args []any, tok string, lvl int, sids []string) []any {
	var lo, hi string
	early := 0
	for _, sid := range sids {
		if isPseudoID(sid) {
			early++
			continue
		}
		if lo == "" || sidLess(sid, lo) {
			lo = sid
		}
		if hi == "" || sidLess(hi, sid) {
			hi = sid
		}
	}
	args = append(args, tok, lvl, lo, hi, len(sids), early)
	for _, sid := range sids {
		args = append(args, sid)
	}
	return args
}

// Retry ends the lease and re-queues the message: straight to the stream for
// a zero delay, else to the delayed set.
func (d *Driver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	sid, tok, ok := parseReceipt(ref.Receipt)
	if !ok {
		return backend.ErrLeaseLost
	}
	n, err := runOnce(ctx, d.c, scriptRetry, d.keys(ref.Queue).list(), group, sid, tok, ceilMS(delay), reason).Int64()
	if err != nil {
		return d.fail(ctx, err)
	}
	if n != 1 {
		return backend.ErrLeaseLost
	}
	return nil
}

// Dead ends the lease and appends the message to the queue's dead-letter
// stream with reason and attempts.
func (d *Driver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	sid, tok, ok := parseReceipt(ref.Receipt)
	if !ok {
		return backend.ErrLeaseLost
	}
	n, err := runOnce(ctx, d.c, scriptDead, d.keys(ref.Queue).list(), group, sid, tok, reason, d.o.DeadCap, attempts).Int64()
	if err != nil {
		return d.fail(ctx, err)
	}
	if n != 1 {
		return backend.ErrLeaseLost
	}
	return nil
}

// Extend gives the delivery a deadline of its own: its pending entry moves
// to a consumer of its own with that deadline (see lua/prelude.lua), so the rest
// of its Receive batch keeps the old one.
func (d *Driver) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	sid, tok, ok := parseReceipt(ref.Receipt)
	if !ok {
		return time.Time{}, backend.ErrLeaseLost
	}
	ms, err := runOnce(ctx, d.c, scriptExtend, d.keys(ref.Queue).list(), group, sid, tok, ceilMS(lease)).Int64()
	if err != nil {
		return time.Time{}, d.fail(ctx, err)
	}
	if ms == 0 {
		return time.Time{}, backend.ErrLeaseLost
	}
	return msTime(ms), nil
}

// Close waits for blocked stream reads to end (at most Options.Block) and
// closes the client when the driver owns it. It never acks: what this
// instance holds comes back when its leases expire.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.waits.Wait()
	defer unregisterLog(d)
	if d.o.CloseClient {
		return d.c.Close()
	}
	return nil
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.Deduper      = (*Driver)(nil)
	_ backend.DeadLetterer = (*Driver)(nil)
	_ backend.StatsReader  = (*Driver)(nil)
	_ backend.Pinger       = (*Driver)(nil)
	_ backend.Namer        = (*Driver)(nil)
)
