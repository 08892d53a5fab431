package fila

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
)

// How a client obeys a queue's limits (see the comment on markLimitsPrefix
// for the marks). What a Receive took is a flowGrant; what the client keeps
// between Receive calls, so that limits far above the load cost next to no
// round trips, is the queue's flowState:
//
//   - concurrency slots a settlement frees stay with the client, in its
//     pool, for its next Receive, while the last listing found fewer than
//     half the slots taken; the pool's slots idle for a control interval
//     are deleted by the client's refresher, and all of them by Close;
//   - a rate chunk mark stands for g deliveries (g rises with the rate, so
//     that at most about 100 chunks a second are claimed per queue, and
//     never passes the burst): the client hands out the rest of its chunk
//     before it claims another.

// flowState is what a client keeps for one queue's limits.
type flowState struct {
	mu sync.Mutex
	// pool holds slot marks this client keeps for reuse.
	pool []pooledSlot
	// contended is set when the last listing of the slots found half of
	// them or more taken: freed slots are then deleted at once, for the
	// other clients, and a Receive lists before it takes one.
	contended bool
	// The rate chunk this client draws from: prefix names the chunking,
	// cur the chunk, left its deliveries not handed out yet; last is the
	// latest chunk this client claimed.
	prefix    string
	cur, last int64
	left      int
	// throttled is what this client's Receive calls waited for room
	// (Client.QueueThrottled).
	throttled Throttled
}

type pooledSlot struct {
	name  string
	until time.Time // the mark's expiry
	idle  time.Time // when it went back to the pool
}

// flowGrant is the room a Receive took: slot marks for the concurrency
// limit and, for the rate limit, the chunk of each delivery it may hand
// out.
type flowGrant struct {
	lim    QueueLimits
	slots  []pooledSlot
	tokens []int64
}

// n is how many messages the grant lets the Receive claim.
func (g *flowGrant) n(max int) int {
	if g.lim.Concurrency > 0 {
		max = min(max, len(g.slots))
	}
	if g.lim.Rate > 0 {
		max = min(max, len(g.tokens))
	}
	return max
}

// flowPoll bounds how long a Receive waiting for room sleeps before it
// looks again; a slot this client frees wakes it at once.
func (c *Client) flowPoll() time.Duration {
	return min(c.opts.controlInterval, 100*time.Millisecond)
}

// flowReceiveBound is how long a driver Receive under a concurrency limit
// waits for messages before its slots are taken again: the slot marks
// expire that long after the leases of the messages claimed, or later.
func flowReceiveBound(lease time.Duration) time.Duration {
	return min(lease, 10*time.Second)
}

// slotHold is how long a slot mark is set to last when taken or renewed.
func slotHold(lease time.Duration) time.Duration { return lease + 2*flowReceiveBound(lease) }

func slotIndex(name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, markSlotPrefix))
	if err != nil {
		return math.MaxInt
	}
	return i
}

// flowAcquire takes room for up to max messages of queue under lim,
// waiting until there is room for one at least.
func (c *Client) flowAcquire(ctx context.Context, queue string, qc *queueControl, lim QueueLimits, max int, lease time.Duration) (*flowGrant, error) {
	g := &flowGrant{lim: lim}
	if lim.Concurrency > 0 {
		if err := c.flowSlots(ctx, queue, qc, g, max, lease); err != nil {
			return nil, err
		}
		if g.lim.Concurrency > 0 {
			max = len(g.slots)
		}
	}
	if lim.Rate > 0 {
		tokens, err := c.flowTokens(ctx, queue, qc, lim, max)
		if err != nil {
			c.flowFree(queue, qc, g.slots)
			return nil, err
		}
		g.tokens = tokens
		if g.lim.Concurrency > 0 && len(tokens) < len(g.slots) {
			c.flowFree(queue, qc, g.slots[len(tokens):])
			g.slots = g.slots[:len(tokens)]
		}
		if err := c.flowRenew(ctx, queue, g, lease); err != nil {
			c.flowFree(queue, qc, g.slots)
			return nil, err
		}
	}
	return g, nil
}

// flowSlots takes up to max slots of the concurrency limit into g: from
// the client's pool, then by trying free slots at random while the slots
// are far from all taken, else from a listing; it waits until it has one.
func (c *Client) flowSlots(ctx context.Context, queue string, qc *queueControl, g *flowGrant, want int, lease time.Duration) error {
	fs := &qc.flow
	poll := time.Millisecond
	waiting := false
	var waitStart time.Time
	defer func() {
		if waiting {
			qc.mu.Lock()
			qc.waiting--
			qc.mu.Unlock()
			fs.mu.Lock()
			fs.throttled.SlotWaits++
			fs.throttled.Wait += time.Since(waitStart)
			fs.mu.Unlock()
		}
	}()
	for {
		qc.mu.Lock()
		wake := qc.flowFreed
		limit := qc.limits.Concurrency // a change seen meanwhile applies
		qc.mu.Unlock()
		g.lim.Concurrency = limit
		if limit == 0 {
			return nil
		}
		now := time.Now()
		// The pool first: no round trip unless a slot must last longer.
		var reuse []pooledSlot
		fs.mu.Lock()
		keep := fs.pool[:0]
		for _, s := range fs.pool {
			if len(reuse) < want && slotIndex(s.name) < limit && s.until.After(now.Add(time.Second)) {
				reuse = append(reuse, s)
			} else {
				keep = append(keep, s)
			}
		}
		fs.pool = keep
		contended := fs.contended
		fs.mu.Unlock()
		for _, s := range reuse {
			if s.until.Sub(now) < lease+flowReceiveBound(lease) {
				s.until = now.Add(slotHold(lease))
				if _, err := c.marker.MarkSet(ctx, queue, s.name, s.until, false); err != nil {
					c.flowFree(queue, qc, append(g.slots, s))
					g.slots = nil
					return err
				}
			}
			g.slots = append(g.slots, s)
		}
		take := func(name string) (bool, error) {
			until := time.Now().Add(slotHold(lease))
			ok, err := c.marker.MarkSet(ctx, queue, name, until, true)
			if ok {
				g.slots = append(g.slots, pooledSlot{name: name, until: until})
			}
			return ok, err
		}
		fail := func(err error) error {
			c.flowFree(queue, qc, g.slots)
			g.slots = nil
			return err
		}
		// Far from the limit, slots from a random one on are most likely
		// free: two taken ones send the Receive to the listing.
		start := rand.IntN(limit)
		for j, misses := 0, 0; !contended && len(g.slots) < want && misses < 2 && j < limit; j++ {
			ok, err := take(markSlotPrefix + strconv.Itoa((start+j)%limit))
			if err != nil {
				return fail(err)
			}
			if !ok {
				misses++
			}
		}
		if len(g.slots) >= want || len(g.slots) > 0 && !contended {
			return nil
		}
		held, err := c.lister.MarkList(ctx, queue, markSlotPrefix)
		if err != nil {
			return fail(err)
		}
		taken := make(map[string]bool, len(held))
		for _, n := range held {
			taken[n] = true
		}
		fs.mu.Lock()
		fs.contended = len(held) >= (limit+1)/2
		fs.mu.Unlock()
		start = rand.IntN(limit)
		for j := 0; j < limit && len(g.slots) < want; j++ {
			name := markSlotPrefix + strconv.Itoa((start+j)%limit)
			if taken[name] {
				continue
			}
			if _, err := take(name); err != nil {
				return fail(err)
			}
		}
		if len(g.slots) > 0 {
			return nil
		}
		if !waiting {
			// A waiting Receive keeps the client's refresher reading the
			// limits, as a Receive waiting out a pause does: without it a
			// client whose receivers all wait for room, holding no
			// delivery, never saw a raised limit, and waited for the old
			// slots to expire (found by the conformance test, on
			// FerretDB's slow claims).
			waiting, waitStart = true, time.Now()
			qc.mu.Lock()
			qc.waiting++
			qc.mu.Unlock()
			c.ensureRefresher(queue, qc)
		}
		poll = min(poll*2, c.flowPoll())
		t := time.NewTimer(poll + rand.N(poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-wake:
			t.Stop()
			poll = time.Millisecond
		case <-t.C:
		}
	}
}

// flowRenew moves the expiry of g's slot marks when the rate limit kept
// the Receive waiting, so they outlast the leases it claims.
func (c *Client) flowRenew(ctx context.Context, queue string, g *flowGrant, lease time.Duration) error {
	now := time.Now()
	for i := range g.slots {
		s := &g.slots[i]
		if s.until.Sub(now) >= lease+flowReceiveBound(lease) {
			continue
		}
		s.until = now.Add(slotHold(lease))
		if _, err := c.marker.MarkSet(ctx, queue, s.name, s.until, false); err != nil {
			return err
		}
	}
	return nil
}

// flowFree gives back slots this client holds: to its pool while the
// slots are far from all taken, else by deleting their marks; a slot that
// expired meanwhile (another client may hold it now) is left alone. It
// wakes the Receive calls of this client waiting for room.
func (c *Client) flowFree(queue string, qc *queueControl, slots []pooledSlot) {
	if len(slots) == 0 {
		return
	}
	limit := qc.flowLimits().Concurrency
	now := time.Now()
	var del []string
	qc.flow.mu.Lock()
	for _, s := range slots {
		switch {
		case s.until.Before(now.Add(time.Second)):
			// expired or about to: never delete another holder's slot
		case !qc.flow.contended && slotIndex(s.name) < limit:
			s.idle = now
			qc.flow.pool = append(qc.flow.pool, s)
		default:
			del = append(del, s.name)
		}
	}
	qc.flow.mu.Unlock()
	c.flowDelete(queue, del)
	qc.flowWake()
}

func (c *Client) flowDelete(queue string, names []string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.closeCtx), 10*time.Second)
	defer cancel()
	for _, n := range names {
		if err := c.marker.MarkDelete(ctx, queue, n); err != nil {
			c.opts.logger.Warn("fila: freeing a concurrency slot failed; it comes back when it expires",
				slog.String("queue", queue), slog.String("slot", n), slog.Any("error", err))
		}
	}
}

// flowTrim deletes the pooled slots of queue idle since before idleSince
// (all of them with the zero time) or no longer under the limit; it
// reports whether slots remain pooled.
func (c *Client) flowTrim(queue string, qc *queueControl, idleSince time.Time) bool {
	limit := qc.flowLimits().Concurrency
	now := time.Now()
	var del []string
	qc.flow.mu.Lock()
	keep := qc.flow.pool[:0]
	for _, s := range qc.flow.pool {
		switch {
		case s.until.Before(now.Add(time.Second)):
		case idleSince.IsZero() || s.idle.Before(idleSince) || slotIndex(s.name) >= limit:
			del = append(del, s.name)
		default:
			keep = append(keep, s)
		}
	}
	qc.flow.pool = keep
	left := len(keep) > 0
	qc.flow.mu.Unlock()
	c.flowDelete(queue, del)
	return left
}

// chunking returns how the rate limit's deliveries are grouped into chunk
// marks: g deliveries a chunk, a chunk every dur, burst chunks at most at
// once, and the marks' prefix.
func chunking(lim QueueLimits) (g int, dur, burst int64, prefix string) {
	perSec := float64(lim.Rate) / lim.Per.Seconds()
	g = max(1, min(lim.Burst, int(math.Ceil(perSec/100))))
	dur = int64(lim.Per) * int64(g) / int64(lim.Rate)
	burst = int64(lim.Burst / g)
	prefix = markRatePrefix + strconv.FormatInt(dur, 10) + "x" + strconv.Itoa(g) + "/"
	return g, dur, burst, prefix
}

// chunkFresh reports whether a delivery of chunk k may be handed out now:
// a chunk may be used from its start for burst chunks.
func chunkFresh(k int64, lim QueueLimits) bool {
	_, dur, burst, _ := chunking(lim)
	now := time.Now().UnixNano()
	return k*dur <= now && now-burst*dur < k*dur
}

// flowTokens takes up to max deliveries of the rate limit, each named by
// its chunk: from the client's chunk, else from a chunk it claims that may
// be used now, else it reserves the next free chunks and waits for them.
func (c *Client) flowTokens(ctx context.Context, queue string, qc *queueControl, lim QueueLimits, want int) ([]int64, error) {
	g, dur, burst, prefix := chunking(lim)
	fs := &qc.flow
	var got []int64
	draw := func(k int64, n int) { // fs.mu is held
		for range n {
			got = append(got, k)
		}
	}
	for {
		now := time.Now().UnixNano()
		first, last := now/dur-burst+1, now/dur // the chunks usable now
		fs.mu.Lock()
		if fs.prefix != prefix {
			fs.prefix, fs.cur, fs.last, fs.left = prefix, 0, 0, 0
		}
		if fs.left > 0 && fs.cur >= first && fs.cur <= last {
			n := min(want-len(got), fs.left)
			fs.left -= n
			draw(fs.cur, n)
		}
		hint := max(fs.last+1, first)
		if g > 1 {
			// A chunk may be drawn on for burst chunks' time from its
			// start, so the oldest usable one may have one chunk's time
			// left: a chunk of many deliveries is claimed newest first,
			// to be drawn on longest.
			hint = max(hint, last)
		}
		fs.mu.Unlock()
		if len(got) >= want {
			return got, nil
		}
		claimed := func(k int64) { // a chunk this client now owns
			fs.mu.Lock()
			defer fs.mu.Unlock()
			fs.last = max(fs.last, k)
			use := min(want-len(got), g)
			draw(k, use)
			if rest := g - use; rest > 0 && k >= fs.cur {
				fs.cur, fs.left = k, rest
			}
		}
		set := func(k int64) (bool, error) {
			return c.marker.MarkSet(ctx, queue, prefix+strconv.FormatInt(k, 10), time.Unix(0, (k+burst+1)*dur).Add(100*time.Millisecond), true)
		}
		// The next chunk after this client's last is most likely free.
		if hint <= last {
			ok, err := set(hint)
			if err != nil {
				return nil, err
			}
			if ok {
				claimed(hint)
				return got, nil
			}
		}
		names, err := c.lister.MarkList(ctx, queue, prefix)
		if err != nil {
			return nil, err
		}
		taken := make(map[int64]bool, len(names))
		for _, n := range names {
			if k, err := strconv.ParseInt(strings.TrimPrefix(n, prefix), 10, 64); err == nil {
				taken[k] = true
			}
		}
		for i := range last - first + 1 {
			k := first + i
			if g > 1 {
				k = last - i // newest first, as the hint
			}
			if taken[k] {
				continue
			}
			ok, err := set(k)
			if err != nil {
				return nil, err
			}
			if ok {
				claimed(k)
				return got, nil
			}
		}
		if len(got) > 0 {
			return got, nil
		}
		// Nothing may be used now: reserve the next free chunks, enough
		// for max and at most a burst, and wait for the last one's start.
		// Reserving several keeps a few receivers at the rate when a round
		// trip takes longer than a chunk.
		chunks := min(int64((want-len(got)+g-1)/g), burst)
		var reserved []int64
		for k, tries := last+1, int64(0); int64(len(reserved)) < chunks && tries < 2*chunks; k++ {
			if taken[k] {
				continue
			}
			tries++
			ok, err := set(k)
			if err != nil {
				return nil, err
			}
			if ok {
				reserved = append(reserved, k)
			}
		}
		if len(reserved) == 0 {
			continue // other clients took them first: look again
		}
		waitStart := time.Now()
		t := time.NewTimer(time.Until(time.Unix(0, reserved[len(reserved)-1]*dur)))
		select {
		case <-ctx.Done():
			t.Stop()
			fs.throttle(waitStart)
			return nil, context.Cause(ctx) // the chunks go unused
		case <-t.C:
		}
		fs.throttle(waitStart)
		for _, k := range reserved {
			claimed(k)
		}
		return got, nil
	}
}

// throttle counts a wait for the rate limit that began at start.
func (fs *flowState) throttle(start time.Time) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.throttled.RateWaits++
	fs.throttled.Wait += time.Since(start)
}

// flowUnused gives back tokens taken but not handed out: they go on being
// drawn by this client while their chunk may be used.
func (qc *queueControl) flowUnused(lim QueueLimits, tokens []int64) {
	if len(tokens) == 0 || lim.Rate == 0 {
		return
	}
	_, _, _, prefix := chunking(lim)
	qc.flow.mu.Lock()
	defer qc.flow.mu.Unlock()
	if qc.flow.prefix != prefix {
		return
	}
	for _, k := range tokens {
		switch {
		case !chunkFresh(k, lim):
		case k == qc.flow.cur:
			qc.flow.left++
		case k > qc.flow.cur:
			qc.flow.cur, qc.flow.left = k, 1
		}
	}
}

// free frees slot, one of g's, when the message it was taken for is not
// handed out.
func (g *flowGrant) free(c *Client, queue string, qc *queueControl, i int) {
	if g != nil && i < len(g.slots) {
		c.flowFree(queue, qc, g.slots[i:i+1])
	}
}

// receiveLimited is one round of Receive on a queue with limits: it takes
// room, claims what the room allows and hands it out. It returns no
// deliveries and no error when the round ended empty (Receive goes on),
// errPaused when the queue was paused meanwhile.
func (c *Client) receiveLimited(ctx context.Context, cl entered, qc *queueControl, queue string, bp backend.ReceiveParams, lim QueueLimits) ([]*Delivery, error) {
	g, err := c.flowAcquire(cl.ctx, queue, qc, lim, bp.Max, bp.Lease)
	if err != nil {
		return nil, c.done(ctx, err)
	}
	rp := bp
	rp.Max = g.n(bp.Max)
	rcl := cl
	if len(g.slots) > 0 {
		// The slot marks expire: the claim waits for messages only so
		// long, then the round starts again.
		var cancel context.CancelFunc
		rcl.ctx, cancel = context.WithTimeout(cl.ctx, flowReceiveBound(bp.Lease))
		defer cancel()
	}
	bds, err := c.receiveUnlessPaused(rcl, qc, queue, rp, nil)
	n := len(bds)
	c.flowFree(queue, qc, g.slots[min(n, len(g.slots)):])
	g.slots = g.slots[:min(n, len(g.slots))]
	if len(g.tokens) > n {
		qc.flowUnused(lim, g.tokens[n:])
		g.tokens = g.tokens[:n]
	}
	if err != nil {
		if rcl.ctx.Err() != nil && cl.ctx.Err() == nil && !errors.Is(err, errPaused) {
			return nil, nil // the round's bound: take room again
		}
		if errors.Is(err, errPaused) {
			return nil, err
		}
		return nil, c.done(ctx, err)
	}
	if n == 0 {
		return nil, nil
	}
	// A token taken before a claim that waited for messages may have gone
	// stale: such messages wait for fresh tokens before they are handed
	// out, and go back when none comes within the call.
	bds = c.flowFreshen(cl.ctx, queue, qc, g, bds)
	return c.deliveries(cl.ctx, qc, queue, bds, g), nil
}

// flowWake wakes the Receive calls of this client waiting for room.
func (qc *queueControl) flowWake() {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	close(qc.flowFreed)
	qc.flowFreed = make(chan struct{})
}

// flowClose deletes the slots every queue's pool keeps, for Close.
func (c *Client) flowClose() {
	c.ctlMu.Lock()
	qcs := make(map[string]*queueControl, len(c.ctl))
	for q, qc := range c.ctl {
		qcs[q] = qc
	}
	c.ctlMu.Unlock()
	for q, qc := range qcs {
		c.flowTrim(q, qc, time.Time{})
	}
}

// flowHandOver is the room for AckReceive under limits, taken with no
// round trip, so an ack and a claim stay one: under a concurrency limit
// the slots of the deliveries it acks, which pass to the messages it
// claims, and those of the client's pool; under a rate limit what is left
// of the client's chunk. ok is false when the limits need more: a
// concurrency limit half taken or more (the claim must wait), or nothing
// at hand; AckReceive then only acks.
func (c *Client) flowHandOver(queue string, qc *queueControl, lim QueueLimits, ds []*Delivery, want int, lease time.Duration) (*flowGrant, bool) {
	now := time.Now()
	fresh := func(s pooledSlot) bool { return s.until.Sub(now) >= lease+flowReceiveBound(lease) }
	g := &flowGrant{lim: lim}
	qc.flow.mu.Lock()
	if lim.Rate > 0 {
		// Only what is left of the client's chunk: claiming a chunk is a
		// round trip, and may mean waiting.
		fs := &qc.flow
		if _, _, _, prefix := chunking(lim); fs.prefix != prefix || fs.left == 0 || !chunkFresh(fs.cur, lim) {
			qc.flow.mu.Unlock()
			return nil, false
		}
		n := min(want, fs.left)
		fs.left -= n
		for range n {
			g.tokens = append(g.tokens, fs.cur)
		}
		want = n
	}
	if lim.Concurrency == 0 {
		qc.flow.mu.Unlock()
		return g, true
	}
	if qc.flow.contended {
		qc.flow.mu.Unlock()
		qc.flowUnused(lim, g.tokens)
		return nil, false
	}
	keep := qc.flow.pool[:0]
	for _, s := range qc.flow.pool {
		if len(g.slots) < want && slotIndex(s.name) < lim.Concurrency && fresh(s) {
			g.slots = append(g.slots, s)
		} else {
			keep = append(keep, s)
		}
	}
	qc.flow.pool = keep
	qc.flow.mu.Unlock()
	for _, d := range ds {
		if len(g.slots) >= want || d.c != c || d.Queue != queue {
			continue
		}
		d.mu.Lock()
		if s := (pooledSlot{name: d.flowSlot, until: d.flowUntil}); !d.settled && s.name != "" && slotIndex(s.name) < lim.Concurrency && fresh(s) {
			g.slots = append(g.slots, s)
			d.flowSlot = "" // its ack frees nothing: the slot passes on
		}
		d.mu.Unlock()
	}
	if len(g.slots) == 0 {
		qc.flowUnused(lim, g.tokens)
		return nil, false
	}
	return g, true
}

// flowFreshen replaces the tokens of g that went stale while the claim of
// bds ran, waiting for fresh ones if need be; the messages it finds none
// for within ctx go back. It returns the messages that may be handed out.
func (c *Client) flowFreshen(ctx context.Context, queue string, qc *queueControl, g *flowGrant, bds []backend.Delivery) []backend.Delivery {
	if g.lim.Rate == 0 {
		return bds
	}
	n := len(bds)
	stale := 0
	for _, k := range g.tokens[:min(n, len(g.tokens))] {
		if !chunkFresh(k, g.lim) {
			stale++
		}
	}
	for stale > 0 {
		fresh, err := c.flowTokens(ctx, queue, qc, g.lim, stale)
		if err != nil {
			keep := n - stale
			c.giveBack(queue, bds[keep:], "claimed under a rate limit that left no room")
			c.flowFree(queue, qc, g.slots[min(keep, len(g.slots)):])
			g.slots = g.slots[:min(keep, len(g.slots))]
			return bds[:keep]
		}
		stale -= len(fresh)
	}
	return bds
}
