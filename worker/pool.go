package worker

import (
	"context"
	"sync"
)

// pool is Config.Concurrency: slots shared by every queue of a worker, by
// weight. Slots are assigned when they free, not when a queue's receive
// loop comes to ask: a freed slot goes to the queue with work whose
// assigned slots (running jobs and slots granted but not yet taken) are
// fewest for its weight, and its loop takes every slot assigned to it at
// its next turn. So while every queue has work, queue q holds
// weight(q)/Σweights of the slots, however long each loop takes to come
// round, and with jobs of equal length runs that share of the jobs.
//
// A queue has work (want) from the moment its loop asks for slots until a
// receive of it comes back short: it then gives back what it was assigned
// beyond the one slot its next receive waits with, and gets no more until
// it asks again.
type pool struct {
	mu     sync.Mutex
	size   int
	used   int // slots running a job, being received into, or assigned
	queues map[string]*poolQueue
}

type poolQueue struct {
	weight  int
	limit   int  // the queue's own QueueConfig.Concurrency
	held    int  // taken by the loop: running jobs and the receive's
	pending int  // assigned, not yet taken
	want    bool // the queue has work: assign it freed slots
	signal  chan struct{}
}

func newPool(size int, queues map[string]QueueConfig) *pool {
	p := &pool{size: size, queues: make(map[string]*poolQueue, len(queues))}
	for q, qc := range queues {
		p.queues[q] = &poolQueue{weight: qc.Weight, limit: qc.Concurrency, signal: make(chan struct{}, 1)}
	}
	return p
}

// acquire waits until queue has slots, or ctx ends, and takes at most max
// of them; it returns how many (at least one). With more, the queue keeps
// wanting slots while its receive runs; with more false it takes one and
// wants no more (its last receive came back short, so the next one may
// wait long).
func (p *pool) acquire(ctx context.Context, queue string, max int, more bool) (int, error) {
	p.mu.Lock()
	pq := p.queues[queue]
	pq.want = true
	p.dispatch()
	for pq.pending == 0 {
		p.mu.Unlock()
		select {
		case <-pq.signal:
		case <-ctx.Done():
			p.mu.Lock()
			p.idleLocked(pq)
			p.mu.Unlock()
			return 0, ctx.Err()
		}
		p.mu.Lock()
	}
	if !more {
		pq.pending--
		pq.held++
		p.idleLocked(pq) // gives back the rest
		p.mu.Unlock()
		return 1, nil
	}
	n := min(pq.pending, max)
	pq.pending -= n
	pq.held += n
	p.mu.Unlock()
	return n, nil
}

// idle says queue's loop stopped (or its receive failed): it gives back
// its assigned slots and wants none until its loop asks again.
func (p *pool) idle(queue string) {
	p.mu.Lock()
	p.idleLocked(p.queues[queue])
	p.mu.Unlock()
}

// short says queue's receive came back short but not empty: the queue may
// have run dry, or its broker handed out only what it had at hand (a
// RabbitMQ consumer whose freed credit's message is a round trip away). It
// keeps one assigned slot, for the single-message receive its loop makes
// next (acquire with more false), and gives back the rest: the loop need
// not wait for another queue's job to end before it finds out.
func (p *pool) short(queue string) {
	p.mu.Lock()
	p.giveBackLocked(p.queues[queue], 1)
	p.mu.Unlock()
}

func (p *pool) idleLocked(pq *poolQueue) { p.giveBackLocked(pq, 0) }

// giveBackLocked stops assigning slots to pq and gives back those assigned
// to it beyond keep.
func (p *pool) giveBackLocked(pq *poolQueue, keep int) {
	pq.want = false
	if pq.pending > keep {
		p.used -= pq.pending - keep
		pq.pending = keep
	}
	p.dispatch()
}

// release frees n slots queue held.
func (p *pool) release(queue string, n int) {
	p.mu.Lock()
	p.used -= n
	p.queues[queue].held -= n
	p.dispatch()
	p.mu.Unlock()
}

// dispatch assigns the free slots one at a time, each to the queue with
// work whose assigned slots are fewest for its weight.
func (p *pool) dispatch() {
	for p.used < p.size {
		var best *poolQueue
		for _, pq := range p.queues {
			// (assigned+1)/weight, compared without division.
			if pq.want && pq.held+pq.pending < pq.limit && (best == nil || (pq.held+pq.pending+1)*best.weight < (best.held+best.pending+1)*pq.weight) {
				best = pq
			}
		}
		if best == nil {
			return
		}
		p.used++
		best.pending++
		select {
		case best.signal <- struct{}{}:
		default: // already signalled
		}
	}
}
