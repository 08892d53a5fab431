package fila

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Flow control: a queue's limits are stored in the broker as a mark
// (limits/<version>?<settings>), so every client of every process obeys
// them, and enforced by the clients with marks too (flowgate.go):
//
//   - a concurrency limit N is a semaphore of N slot marks
//     (flow/slot/<i>): a Receive holds one slot mark per message it claims
//     (MarkSet with onlyNew, which one caller wins) until the message is
//     settled; a slot whose holder crashed expires shortly after the
//     message's lease;
//   - a rate limit of R per P with burst B is a generic cell rate
//     algorithm over chunks of g deliveries, one every g·P/R: a delivery
//     at time u draws on a chunk k (mark flow/rate/<ns>x<g>/<k>) with
//     u - (B/g)·g·P/R < k·g·P/R ≤ u, so any window of length W holds at
//     most W·R/P + B deliveries.
//
// The design notes (docs/design.md, "Flow control") give the costs.
const (
	markLimitsPrefix = "limits/"
	markSlotPrefix   = "flow/slot/"
	markRatePrefix   = "flow/rate/"
)

// Bounds of QueueLimits.
const (
	// MaxConcurrencyLimit is the largest QueueLimits.Concurrency.
	MaxConcurrencyLimit = 10_000
	// MaxRateLimit is the largest QueueLimits.Rate.
	MaxRateLimit = 100_000
	// MaxRateBurst is the largest QueueLimits.Burst.
	MaxRateBurst = 10_000
)

// QueueLimits bound the work of a queue across every client of the broker,
// in every process (Client.QueueLimitsSet). The zero value sets no limit.
type QueueLimits struct {
	// Concurrency is how many of the queue's messages may be leased at
	// once (0: no limit, at most MaxConcurrencyLimit).
	Concurrency int
	// Rate is how many messages may be handed out per Per (0: no limit,
	// at most MaxRateLimit).
	Rate int
	// Per is the rate's period, from a millisecond to a day; 0 means a
	// second.
	Per time.Duration
	// Burst is how many deliveries may go at once after a quiet spell:
	// any window of length W holds at most W·Rate/Per + Burst deliveries.
	// 0 means 1; at most MaxRateBurst.
	Burst int
}

// IsZero reports whether l sets no limit.
func (l QueueLimits) IsZero() bool { return l.Concurrency == 0 && l.Rate == 0 }

// String gives the limits as the CLI and the dashboard show them:
// "concurrency 5, rate 50/1s burst 10", or "none".
func (l QueueLimits) String() string {
	if l.IsZero() {
		return "none"
	}
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, "concurrency "+strconv.Itoa(l.Concurrency))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %d/%v burst %d", l.Rate, l.Per, l.Burst))
	}
	return strings.Join(parts, ", ")
}

// normalized checks l and fills in the defaults.
func (l QueueLimits) normalized() (QueueLimits, error) {
	if l.Concurrency < 0 || l.Concurrency > MaxConcurrencyLimit {
		return l, invalidf("concurrency limit %d must be between 0 (none) and %d", l.Concurrency, MaxConcurrencyLimit)
	}
	if l.Rate < 0 || l.Rate > MaxRateLimit {
		return l, invalidf("rate limit %d must be between 0 (none) and %d", l.Rate, MaxRateLimit)
	}
	if l.Rate == 0 {
		if l.Per != 0 || l.Burst != 0 {
			return l, invalidf("a rate period or burst needs a rate")
		}
		return l, nil
	}
	if l.Per == 0 {
		l.Per = time.Second
	}
	if l.Per < time.Millisecond || l.Per > 24*time.Hour || l.Per%time.Millisecond != 0 {
		return l, invalidf("rate period %v must be whole milliseconds from 1ms to 24h", l.Per)
	}
	if l.Per/time.Duration(l.Rate) < time.Microsecond {
		return l, invalidf("rate %d per %v is more than one a microsecond", l.Rate, l.Per)
	}
	if l.Burst == 0 {
		l.Burst = 1
	}
	if l.Burst < 0 || l.Burst > MaxRateBurst {
		return l, invalidf("burst %d must be between 0 (one) and %d", l.Burst, MaxRateBurst)
	}
	return l, nil
}

// cell is the rate's time cell: one delivery per cell on average.
func (l QueueLimits) cell() time.Duration { return l.Per / time.Duration(l.Rate) }

// encode gives l as a mark name's query.
func (l QueueLimits) encode() string {
	v := url.Values{}
	if l.Concurrency > 0 {
		v.Set("c", strconv.Itoa(l.Concurrency))
	}
	if l.Rate > 0 {
		v.Set("r", strconv.Itoa(l.Rate))
		v.Set("p", strconv.FormatInt(l.Per.Milliseconds(), 10))
		v.Set("b", strconv.Itoa(l.Burst))
	}
	return v.Encode()
}

// decodeLimits reads a limits mark's name; ok is false for one this
// version cannot read.
func decodeLimits(name string) (version string, l QueueLimits, ok bool) {
	rest, found := strings.CutPrefix(name, markLimitsPrefix)
	if !found {
		return "", l, false
	}
	version, query, _ := strings.Cut(rest, "?")
	v, err := url.ParseQuery(query)
	if err != nil {
		return "", l, false
	}
	num := func(k string) int {
		n, err := strconv.Atoi(v.Get(k))
		if err != nil && v.Get(k) != "" {
			ok = false
		}
		return n
	}
	ok = true
	l.Concurrency, l.Rate, l.Burst = num("c"), num("r"), num("b")
	l.Per = time.Duration(num("p")) * time.Millisecond
	if !ok {
		return "", QueueLimits{}, false
	}
	l, err = l.normalized()
	return version, l, err == nil
}

// limitsFromMarks picks the newest readable limits among names.
func limitsFromMarks(names []string) (QueueLimits, []string) {
	sort.Strings(names) // versions are fixed-width: the newest sorts last
	var lim QueueLimits
	var older []string
	found := false
	for i := len(names) - 1; i >= 0; i-- {
		if _, l, ok := decodeLimits(names[i]); ok && !found {
			lim, found = l, true
			continue
		}
		older = append(older, names[i])
	}
	return lim, older
}

// QueueLimitsSet sets queue's limits for every client of the broker; the
// zero QueueLimits removes them. Clients of other processes apply them
// within the control interval (WithControlInterval) and one read of the
// marks, this client at once. Lowering the concurrency limit applies as
// the messages running settle. Drivers that cannot list marks return
// ErrUnsupported; invalid limits ErrInvalid.
func (c *Client) QueueLimitsSet(ctx context.Context, queue string, l QueueLimits) error {
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	l, err := l.normalized()
	if err != nil {
		return err
	}
	if c.lister == nil {
		return &UnsupportedError{Driver: c.name, Capability: "queue limits (listing marks)"}
	}
	err = c.call(ctx, func(ctx context.Context) error {
		names, err := c.lister.MarkList(ctx, queue, markLimitsPrefix)
		if err != nil {
			return err
		}
		if !l.IsZero() {
			// A version of fixed width that sorts after every earlier one.
			version := fmt.Sprintf("%020d", time.Now().UnixNano())
			if _, err := c.marker.MarkSet(ctx, queue, markLimitsPrefix+version+"?"+l.encode(), time.Time{}, false); err != nil {
				return err
			}
		}
		for _, n := range names {
			if err := c.marker.MarkDelete(ctx, queue, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	qc := c.control(queue)
	qc.mu.Lock()
	qc.limits = l
	qc.mu.Unlock()
	qc.flowWake()
	return nil
}

// QueueLimits returns queue's limits, the zero QueueLimits when it has
// none. Drivers that cannot list marks return ErrUnsupported.
func (c *Client) QueueLimits(ctx context.Context, queue string) (QueueLimits, error) {
	u, err := c.readLimits(ctx, queue, false)
	return u.Limits, err
}

// LimitsUsage is a queue's limits and how much of the concurrency limit
// is in use (Client.QueueLimitsUsage).
type LimitsUsage struct {
	Limits QueueLimits
	// Held counts the concurrency slots clients hold: one per message
	// leased under the limit, and the slots a client keeps for its next
	// Receive, for a control interval at most, while fewer than half are
	// taken. Without a concurrency limit it is 0.
	Held int
}

// Throttled is what one client's Receive and AckReceive calls on a queue
// waited for room under the queue's limits, since the client was made
// (Client.QueueThrottled). A call that waited for both limits counts in
// both.
type Throttled struct {
	// SlotWaits counts the calls that waited for a concurrency slot.
	SlotWaits int64
	// RateWaits counts the waits for the rate limit: a call that found
	// no delivery the rate allowed at once, or whose room went stale
	// while its claim ran, waited for the next.
	RateWaits int64
	// Wait is the time the waits took, summed.
	Wait time.Duration
}

// QueueThrottled returns what this client's calls waited for room under
// queue's limits, without a round trip: a process's figure, to export as a
// metric (package filaotel does) and sum over processes. It is the zero
// Throttled for a queue the client never received from under limits.
func (c *Client) QueueThrottled(queue string) Throttled {
	c.ctlMu.Lock()
	qc := c.ctl[queue]
	c.ctlMu.Unlock()
	if qc == nil {
		return Throttled{}
	}
	qc.flow.mu.Lock()
	defer qc.flow.mu.Unlock()
	return qc.flow.throttled
}

// QueueLimitsUsage returns queue's limits and the concurrency slots held,
// for dashboards. Drivers that cannot list marks return ErrUnsupported.
func (c *Client) QueueLimitsUsage(ctx context.Context, queue string) (LimitsUsage, error) {
	return c.readLimits(ctx, queue, true)
}

// readLimits reads queue's limits and, with held, counts the slots held.
func (c *Client) readLimits(ctx context.Context, queue string, held bool) (LimitsUsage, error) {
	if err := ValidateQueueName(queue); err != nil {
		return LimitsUsage{}, err
	}
	if c.lister == nil {
		return LimitsUsage{}, &UnsupportedError{Driver: c.name, Capability: "queue limits (listing marks)"}
	}
	var u LimitsUsage
	err := c.call(ctx, func(ctx context.Context) error {
		names, err := c.lister.MarkList(ctx, queue, markLimitsPrefix)
		if err != nil {
			return err
		}
		u.Limits, _ = limitsFromMarks(names)
		if !held || u.Limits.Concurrency == 0 {
			return nil
		}
		slots, err := c.lister.MarkList(ctx, queue, markSlotPrefix)
		u.Held = len(slots)
		return err
	})
	return u, err
}
