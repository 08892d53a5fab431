package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/outagelog"
)

// sample is one reading of a queue for the charts.
type sample struct {
	at time.Time
	// ok: the stats were read; the other fields are meaningless otherwise.
	ok    bool
	stats fila.Stats
	// p95 is the p95 run time per kind of the jobs that ended in the
	// runWindow before the sample; nil when none did or there is no
	// RunTimes source.
	p95 map[string]time.Duration
}

// maxKindsPerSample bounds the kinds a sample keeps (dead letters and run
// times): the charts show the largest few anyway.
const maxKindsPerSample = 50

// history is the sampler's memory: each queue's samples of the last
// Options.History, oldest first.
type history struct {
	mu     sync.Mutex
	queues map[string][]sample
}

func newHistory() *history { return &history{queues: map[string][]sample{}} }

// add appends s to queue's samples and forgets what is older than keep,
// including queues not sampled within keep.
func (hs *history) add(queue string, s sample, keep time.Duration) {
	cut := s.at.Add(-keep)
	hs.mu.Lock()
	defer hs.mu.Unlock()
	ss := append(hs.queues[queue], s)
	i := 0
	for i < len(ss) && ss[i].at.Before(cut) {
		i++
	}
	hs.queues[queue] = slices.Clone(ss[i:])
	for q, qs := range hs.queues {
		if len(qs) == 0 || qs[len(qs)-1].at.Before(cut) {
			delete(hs.queues, q)
		}
	}
}

// names returns the queues that have samples.
func (hs *history) names() []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]string, 0, len(hs.queues))
	for q := range hs.queues {
		out = append(out, q)
	}
	return out
}

// get returns a copy of queue's samples.
func (hs *history) get(queue string) []sample {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return slices.Clone(hs.queues[queue])
}

// runWindow is how far back each point of the p95 charts looks: four
// sampling intervals (a minute by default), so that a slow kind with few
// jobs still has a point at most samples, like a rate over a few scrapes.
func (h *Handler) runWindow() time.Duration { return 4 * h.interval }

// runSampler samples every interval until ctx ends, starting at once.
// Failures are logged with a bounded number of lines however long they
// last (see internal/outagelog).
func (h *Handler) runSampler(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	outage := outagelog.New(h.log)
	for {
		err := h.sample(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			outage.Down("fila ui: reading queue stats for the charts failed", slog.Any("error", err))
		default:
			outage.Up("fila ui: reading queue stats for the charts works again")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads the stats of every queue shown once and adds them to the
// history. It returns the joined errors of the queues it could not read.
func (h *Handler) sample(ctx context.Context) error {
	timeout := max(h.interval, 5*time.Second)
	lctx, cancel := context.WithTimeout(ctx, timeout)
	queues, _, err := h.queueNames(lctx)
	cancel()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, q := range queues {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := h.c.QueueStats(qctx, q)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := time.Now()
		s := sample{at: now, ok: err == nil, stats: st}
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %q: %w", q, err))
		}
		s.stats.DeadByKind = topKinds(st.DeadByKind, maxKindsPerSample)
		if h.o.RunTimes != nil {
			s.p95 = topKinds(h.o.RunTimes.RunTimeP95(q, now.Add(-h.runWindow()), now), maxKindsPerSample)
		}
		h.hist.add(q, s, h.history)
		if h.canCancel { // the driver lists marks: the workers' records
			tctx, cancel := context.WithTimeout(ctx, timeout)
			err := h.sampleThroughput(tctx, q, now)
			cancel()
			if err != nil && ctx.Err() == nil {
				errs = append(errs, fmt.Errorf("queue %q: %w", q, err))
			}
		}
	}
	return errors.Join(errs...)
}

// topKinds returns m, or when it holds more than n kinds a copy with the n
// largest values.
func topKinds[V int64 | time.Duration](m map[string]V, n int) map[string]V {
	if len(m) <= n {
		return m
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	out := make(map[string]V, n)
	for _, k := range kinds[:n] {
		out[k] = m[k]
	}
	return out
}

// queueNames returns the queues to show: those Client.QueueList names and
// the configured ones, sorted. On a driver that cannot list queues it
// returns the configured ones, canList false and no error.
func (h *Handler) queueNames(ctx context.Context) (names []string, canList bool, err error) {
	listed, err := h.c.QueueList(ctx)
	canList = !errors.Is(err, fila.ErrUnsupported)
	if !canList {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("listing queues: %w", err)
	}
	names = slices.Concat(listed, h.o.Queues)
	slices.Sort(names)
	return slices.Compact(names), canList, err
}
