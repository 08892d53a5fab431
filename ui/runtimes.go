package ui

import (
	"slices"
	"sync"
	"time"

	"github.com/fila-go/fila/worker"
)

// RunTimeSource reports how long jobs ran, for the dashboard's p95 run time
// charts. Options.RunTimes takes one; a *Recorder fed by the worker's
// OnJobEnd hook is the in-process one, RunTimeFunc adapts a function (one
// that queries Prometheus, for example).
type RunTimeSource interface {
	// RunTimeP95 returns, per kind, the 95th percentile of the run times of
	// the jobs of queue that ended in [from, to). Kinds without such a job
	// are left out; nil or an empty map means no job ended then. It is
	// called once per queue per sampling interval and must be safe for
	// concurrent use.
	RunTimeP95(queue string, from, to time.Time) map[string]time.Duration
}

// RunTimeFunc adapts a function to a RunTimeSource.
type RunTimeFunc func(queue string, from, to time.Time) map[string]time.Duration

// RunTimeP95 calls f.
func (f RunTimeFunc) RunTimeP95(queue string, from, to time.Time) map[string]time.Duration {
	return f(queue, from, to)
}

// Recorder limits.
const (
	// recorderSamples is how many run times a Recorder keeps per queue and
	// kind: the most recent ones.
	recorderSamples = 4096
	// recorderKeys is how many queue and kind pairs a Recorder tracks; run
	// times of further pairs are dropped (kinds come from messages, so
	// their number is not ours to bound).
	recorderKeys = 1000
	// recorderKeep is how long a Recorder keeps a run time.
	recorderKeep = 2 * time.Hour
)

// Recorder keeps recent job run times in memory, per queue and kind, and is
// a RunTimeSource. Feed it from the worker that runs the jobs, in the same
// process as the dashboard:
//
//	rec := ui.NewRecorder()
//	cfg := worker.Config{Queues: map[string]worker.QueueConfig{"emails": {}}}
//	rec.Instrument(&cfg)
//	w, err := worker.New(client, cfg)
//	h, err := ui.New(client, ui.Options{RunTimes: rec})
//
// It keeps the last 4,096 run times of each queue and kind for at most two
// hours, for at most 1,000 queue and kind pairs. The zero value is not
// usable; use NewRecorder. It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	runs map[runKey]*runRing
	now  func() time.Time
}

type runKey struct{ queue, kind string }

// runRing holds the most recent run times of one queue and kind, oldest
// first from next.
type runRing struct {
	ends []time.Time
	durs []time.Duration
	next int
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{runs: map[runKey]*runRing{}, now: time.Now}
}

// Instrument chains the Recorder's OnJobEnd after any hook already set in
// cfg, as filaotel's Instrument does.
func (r *Recorder) Instrument(cfg *worker.Config) {
	if prev := cfg.OnJobEnd; prev != nil {
		cfg.OnJobEnd = func(ev worker.JobEvent) {
			prev(ev)
			r.OnJobEnd(ev)
		}
		return
	}
	cfg.OnJobEnd = r.OnJobEnd
}

// OnJobEnd records the run time of a finished job, whatever its outcome;
// it has the signature of worker.Config.OnJobEnd.
func (r *Recorder) OnJobEnd(ev worker.JobEvent) {
	end := ev.Started.Add(ev.Duration)
	if ev.Started.IsZero() {
		end = r.now()
	}
	r.Record(ev.Queue, ev.Kind, end, ev.Duration)
}

// Record adds one run time: a job of queue and kind that ended at end after
// running for d.
func (r *Recorder) Record(queue, kind string, end time.Time, d time.Duration) {
	k := runKey{queue, kind}
	r.mu.Lock()
	defer r.mu.Unlock()
	ring := r.runs[k]
	if ring == nil {
		if len(r.runs) >= recorderKeys {
			r.pruneLocked()
			if len(r.runs) >= recorderKeys {
				return
			}
		}
		ring = &runRing{}
		r.runs[k] = ring
	}
	if len(ring.ends) < recorderSamples {
		ring.ends = append(ring.ends, end)
		ring.durs = append(ring.durs, d)
		return
	}
	ring.ends[ring.next], ring.durs[ring.next] = end, d
	ring.next = (ring.next + 1) % recorderSamples
}

// pruneLocked drops the pairs whose latest run time is older than
// recorderKeep.
func (r *Recorder) pruneLocked() {
	cut := r.now().Add(-recorderKeep)
	for k, ring := range r.runs {
		latest := ring.ends[(ring.next+len(ring.ends)-1)%len(ring.ends)]
		if latest.Before(cut) {
			delete(r.runs, k)
		}
	}
}

// RunTimeP95 implements RunTimeSource.
func (r *Recorder) RunTimeP95(queue string, from, to time.Time) map[string]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[string]time.Duration
	var durs []time.Duration
	for k, ring := range r.runs {
		if k.queue != queue {
			continue
		}
		durs = durs[:0]
		for i, end := range ring.ends {
			if !end.Before(from) && end.Before(to) {
				durs = append(durs, ring.durs[i])
			}
		}
		if len(durs) == 0 {
			continue
		}
		if out == nil {
			out = map[string]time.Duration{}
		}
		out[k.kind] = percentile(durs, 95)
	}
	return out
}

// percentile returns the pct-th percentile (1–100) of ds, which must not
// be empty, by the nearest-rank method: the smallest run time that at least
// pct% of ds do not exceed. It sorts ds in place.
func percentile(ds []time.Duration, pct int) time.Duration {
	slices.Sort(ds)
	rank := (pct*len(ds) + 99) / 100 // ceil(pct% of n), in integers
	return ds[max(rank, 1)-1]
}
