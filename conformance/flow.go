package conformance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// testQueueLimits: limits set by one client read back from another,
// replaced and removed; bad limits are refused with ErrInvalid and change
// nothing (contract: flow-control).
func (s *suite) testQueueLimits(t *testing.T) {
	a, b := s.client(t), s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if !s.has(FeatureMarkList) {
		wantErr(t, "QueueLimitsSet on a driver that cannot list marks", a.QueueLimitsSet(ctx, q, fila.QueueLimits{Concurrency: 1}), fila.ErrUnsupported)
		s.need(t, FeatureMarkList)
	}
	if l, err := b.QueueLimits(ctx, q); err != nil || !l.IsZero() {
		t.Fatalf("QueueLimits of a new queue = %+v, %v; want none", l, err)
	}
	set := fila.QueueLimits{Concurrency: 5, Rate: 50, Burst: 10}
	if err := a.QueueLimitsSet(ctx, q, set); err != nil {
		t.Fatalf("QueueLimitsSet: %v", err)
	}
	want := fila.QueueLimits{Concurrency: 5, Rate: 50, Per: time.Second, Burst: 10}
	if l, err := b.QueueLimits(ctx, q); err != nil || l != want {
		t.Errorf("QueueLimits from another client = %+v, %v; want %+v", l, err, want)
	}
	for _, bad := range []fila.QueueLimits{
		{Concurrency: -1}, {Concurrency: fila.MaxConcurrencyLimit + 1}, {Rate: -1},
		{Rate: 1, Per: time.Microsecond}, {Rate: 1, Burst: -2}, {Burst: 3}, {Per: time.Second},
	} {
		wantErr(t, fmt.Sprintf("QueueLimitsSet(%+v)", bad), a.QueueLimitsSet(ctx, q, bad), fila.ErrInvalid)
	}
	if l, err := b.QueueLimits(ctx, q); err != nil || l != want {
		t.Errorf("after refused limits, QueueLimits = %+v, %v; want %+v unchanged", l, err, want)
	}
	if err := b.QueueLimitsSet(ctx, q, fila.QueueLimits{Rate: 3, Per: time.Minute}); err != nil {
		t.Fatalf("QueueLimitsSet: %v", err)
	}
	want = fila.QueueLimits{Rate: 3, Per: time.Minute, Burst: 1}
	if l, err := a.QueueLimits(ctx, q); err != nil || l != want {
		t.Errorf("replaced limits read %+v, %v; want %+v", l, err, want)
	}
	if err := a.QueueLimitsSet(ctx, q, fila.QueueLimits{}); err != nil {
		t.Fatalf("QueueLimitsSet(none): %v", err)
	}
	if l, err := b.QueueLimits(ctx, q); err != nil || !l.IsZero() {
		t.Errorf("removed limits read %+v, %v; want none", l, err)
	}
}

// testConcurrencyLimit: four clients, as four processes would be, with
// twenty receivers between them (eight without concurrent claims), never
// run more than the queue's concurrency limit of messages at once, and a
// raised limit reaches them: jobs taken after the raise are held until more
// than the old limit run at once, which only the raise allows (contract:
// flow-control).
func (s *suite) testConcurrencyLimit(t *testing.T) {
	s.need(t, FeatureMarkList)
	const (
		clients  = 4
		limit    = 5
		raised   = 15
		interval = 500 * time.Millisecond
		lease    = 30 * time.Second
	)
	receivers, jobs := 5, 200 // receivers per client
	if !s.has(FeatureConcurrentClaims) {
		// A server without atomic claims is a stand-in that serves every
		// test at once slowly (FerretDB): fewer receivers polling for
		// slots, fewer claims, so that the tests beside this one keep
		// their bounds.
		receivers, jobs = 2, 60
	}
	admin := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 3*time.Minute)
	if err := admin.QueueLimitsSet(ctx, q, fila.QueueLimits{Concurrency: limit}); err != nil {
		t.Fatalf("QueueLimitsSet: %v", err)
	}
	enqueueJobs(t, admin, q, jobs)
	var (
		running, peak, peakRaised atomic.Int64
		raisedAt                  atomic.Int64 // unix ns of the raise; 0 before
		pastAt                    atomic.Int64 // unix ns when more than limit first ran
		past                      = make(chan struct{})
	)
	var finished idSet
	var wg sync.WaitGroup
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	for range clients {
		c := s.client(t, fila.WithControlInterval(interval))
		for range receivers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for stop.Err() == nil {
					ds, err := c.Receive(stop, q, fila.ReceiveParams{Max: 4, Lease: lease})
					if err != nil {
						if stop.Err() == nil {
							t.Errorf("Receive: %v", err)
							cancel()
						}
						return
					}
					n := running.Add(int64(len(ds)))
					if raisedAt.Load() == 0 {
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
					} else {
						if n > limit && pastAt.CompareAndSwap(0, time.Now().UnixNano()) {
							close(past)
						}
						for p := peakRaised.Load(); n > p && !peakRaised.CompareAndSwap(p, n); p = peakRaised.Load() {
						}
						// Jobs taken after the raise run until more than
						// the old limit run at once: whether the raise
						// shows must not depend on how fast the server
						// claims against how long a job takes.
						select {
						case <-past:
						case <-stop.Done():
						}
					}
					time.Sleep(100 * time.Millisecond) // the job's work
					running.Add(-int64(len(ds)))
					if err := c.AckBatch(stop, ds); err != nil && stop.Err() == nil && !s.doubleClaim(err) {
						t.Errorf("AckBatch: %v", err)
					}
					if finished.add(ds) >= jobs {
						cancel()
					}
				}
			}()
		}
	}
	waitUntil := func(what string, cond func() bool) {
		for !cond() {
			select {
			case <-stop.Done():
				t.Errorf("the run ended before %s (%d of %d jobs done)", what, finished.len(), jobs)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitUntil("a third of the jobs were done", func() bool { return finished.len() >= jobs/3 })
	// Marked before the raise is stored: a client may see it at once, and
	// what runs then must not count against the old limit.
	raisedAt.Store(time.Now().UnixNano())
	if err := admin.QueueLimitsSet(ctx, q, fila.QueueLimits{Concurrency: raised}); err != nil {
		t.Fatalf("QueueLimitsSet: %v", err)
	}
	waitUntil("more than the old limit ran at once", func() bool { return pastAt.Load() != 0 })
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("%d jobs ran at once under a concurrency limit of %d", p, limit)
	} else if p < 2 {
		t.Errorf("at most %d job ran at once with a limit of %d and twenty receivers", p, limit)
	}
	if p := peakRaised.Load(); p > raised {
		t.Errorf("%d jobs ran at once under a raised concurrency limit of %d", p, raised)
	}
	if at := pastAt.Load(); at != 0 {
		// Clients see the raise at their next read of the marks, one
		// control interval at most; how long it took here is a figure, not
		// a bound a loaded machine keeps. A client that never sees it
		// takes slots again only when the old ones expire, the lease and
		// twenty seconds after they were taken: the bound tells the two
		// apart.
		took := time.Duration(at - raisedAt.Load())
		t.Logf("the raised limit applied after %v (control interval %v)", took, interval)
		if took > lease-10*time.Second {
			t.Errorf("the raised limit applied after %v, as if the clients waited for the old slots to expire rather than read the new limit (control interval %v)", took, interval)
		}
	}
	if got := finished.len(); got < jobs {
		t.Errorf("%d of %d jobs done", got, jobs)
	}
}

// testRateLimit: receivers of two clients hand out no more than the rate
// and its burst allow in any second, and drain the backlog (contract:
// flow-control).
func (s *suite) testRateLimit(t *testing.T) {
	s.need(t, FeatureMarkList)
	const (
		rate  = 50
		burst = 10
		jobs  = 180
	)
	admin := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	if err := admin.QueueLimitsSet(ctx, q, fila.QueueLimits{Rate: rate, Burst: burst}); err != nil {
		t.Fatalf("QueueLimitsSet: %v", err)
	}
	enqueueJobs(t, admin, q, jobs)
	// Each Receive call's start, end and count: its deliveries were handed
	// out between the two.
	type call struct {
		start, end time.Time
		n          int
	}
	var (
		mu       sync.Mutex
		calls    []call
		total    int
		finished idSet
	)
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		c := s.client(t, fila.WithControlInterval(controlInterval))
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for stop.Err() == nil {
					start := time.Now()
					ds, err := c.Receive(stop, q, fila.ReceiveParams{Max: 5, Lease: 30 * time.Second})
					end := time.Now()
					if err != nil {
						if stop.Err() == nil {
							t.Errorf("Receive: %v", err)
							cancel()
						}
						return
					}
					mu.Lock()
					calls = append(calls, call{start, end, len(ds)})
					total += len(ds)
					mu.Unlock()
					if err := c.AckBatch(ctx, ds); err != nil && !s.doubleClaim(err) {
						t.Errorf("AckBatch: %v", err)
					}
					if finished.add(ds) >= jobs {
						cancel()
					}
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
	// Any second holds at most rate + burst deliveries: counted over the
	// calls that started and ended within a second from each call's start.
	worst := 0
	for i, ci := range calls {
		n := 0
		for _, cj := range calls[i:] {
			if !cj.end.After(ci.start.Add(time.Second)) {
				n += cj.n
			}
		}
		worst = max(worst, n)
	}
	if worst > rate+burst {
		t.Errorf("%d deliveries within one second; the limit is %d a second with a burst of %d", worst, rate, burst)
	}
	first, last := calls[0].start, calls[0].end
	for _, c := range calls {
		if c.end.After(last) {
			last = c.end
		}
	}
	// How close receivers keep to the rate is a speed figure, logged and
	// not asserted: on a loaded machine the broker stalls, not the
	// limiter. Here the backlog only has to drain.
	t.Logf("%d deliveries in %v: %.1f a second beyond the burst (limit %d)", total, last.Sub(first),
		float64(total-burst)/last.Sub(first).Seconds(), rate)
	if got := finished.len(); got < jobs {
		t.Errorf("%d of %d jobs done", got, jobs)
	}
}

// enqueueJobs enqueues n messages of kind "job" into q in one batch.
func enqueueJobs(t *testing.T, c *fila.Client, q string, n int) {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "job"}
	}
	if _, err := c.EnqueueBatch(ctxTimeout(t, time.Minute), q, msgs); err != nil {
		t.Fatalf("EnqueueBatch of %d: %v", n, err)
	}
}

// doubleClaim reports whether err is an ack's lost lease that a driver
// without FeatureConcurrentClaims may give when two receivers claimed one
// message.
func (s *suite) doubleClaim(err error) bool {
	return !s.has(FeatureConcurrentClaims) && errors.Is(err, fila.ErrLeaseLost)
}

// idSet counts the distinct messages settled.
type idSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

// add records ds and returns how many distinct ids the set holds.
func (s *idSet) add(ds []*fila.Delivery) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	for _, d := range ds {
		s.ids[d.ID] = true
	}
	return len(s.ids)
}

func (s *idSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}
