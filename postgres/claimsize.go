package postgres

import (
	"sync"
	"time"
)

// claimSizes remembers, for the claims of the log mode this driver
// received, how many members each returned, until they are acked together
// or the claim's deadline passes. An ack that holds that many members of
// one claim, each once, is the whole claim: log_ack_whole settles it from
// its token and runs, without the refs' ids and receipts (2,000 UUIDs for a
// receive of 1,000). It is only a hint: the server checks the runs against
// the claim's, and a claim it does not know is acked as before.
type claimSizes struct {
	mu sync.Mutex
	m  map[[8]byte]claimSize
}

type claimSize struct {
	n        int
	deadline time.Time
}

// claimSizesMax bounds the memo: past it, expired claims are dropped, and
// past twice as many, all of them (claims received and never acked whole:
// partial acks, crashed handlers).
const claimSizesMax = 1024

// add records that a receive returned n members of claim key, leased until
// deadline.
func (c *claimSizes) add(key [8]byte, n int, deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[8]byte]claimSize)
	}
	if len(c.m) >= claimSizesMax {
		now := time.Now()
		for k, v := range c.m {
			if !v.deadline.After(now) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= 2*claimSizesMax {
			clear(c.m)
		}
	}
	c.m[key] = claimSize{n: n, deadline: deadline}
}

// whole reports whether n distinct members of claim key are all of those
// its receive returned.
func (c *claimSizes) whole(key [8]byte, n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[key]
	return ok && s.n == n
}

// forget drops claim key (acked, or found not to be whole).
func (c *claimSizes) forget(key [8]byte) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}
