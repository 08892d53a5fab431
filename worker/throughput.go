package worker

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// ThroughputPeriod is the span of one throughput record: a worker sums what
// its jobs did in each minute of the wall clock.
const ThroughputPeriod = time.Minute

// ThroughputKeep is how long a throughput record stays in the broker after
// its minute began: a day, and an hour to spare.
const ThroughputKeep = 25 * time.Hour

// markThroughputPrefix starts the name of every throughput record; the
// minute's start follows as ten digits of Unix seconds, so the names sort
// by time.
const markThroughputPrefix = "throughput/"

// Throughput is what the workers of a queue did in one minute, summed over
// the worker runs that recorded it (ThroughputList). Each running Worker
// records, in every queue it serves, one record for each minute in which a
// job of that queue ended, written after the minute is over (within
// Config.Presence) and, for the last one, when Run returns. The records
// live ThroughputKeep in the broker, so a dashboard started later reads the
// past day. A worker killed without a shutdown loses its current minute.
type Throughput struct {
	// Start is the start of the minute.
	Start time.Time
	// Acked counts the jobs that succeeded and were acked.
	Acked int64
	// Retried counts the jobs that failed and were given back for another
	// attempt after their backoff (interrupted jobs released at shutdown
	// are not counted).
	Retried int64
	// Dead counts the jobs the workers dead-lettered: permanent errors,
	// last attempts, unknown kinds and cancels. Messages that a claim finds
	// past their max attempts (after crashes or expired leases) are
	// dead-lettered without being run and are not counted here; the queue's
	// dead-letter count (fila.Client.QueueStats) has them.
	Dead int64
	// Waits counts the first attempts whose wait (from EnqueuedAt to the
	// handler's start) was measured: jobs ended in the minute whose
	// attempt was 1. A message enqueued with a delay or a run-at waits
	// that long too.
	Waits int64
	// Records is how many worker runs recorded the minute.
	Records int

	// waits is the wait histogram: upper bounds, ascending, and counts.
	waits []waitBucket
}

type waitBucket struct {
	upper time.Duration
	n     int64
}

// WaitQuantile returns the q quantile (0 < q ≤ 1) of the waits of the
// minute, as the upper bound of the histogram bucket it falls in (at most
// 19% above the true value); 0 when no wait was recorded.
func (t Throughput) WaitQuantile(q float64) time.Duration {
	var total int64
	for _, b := range t.waits {
		total += b.n
	}
	if total == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(total)))
	var cum int64
	for _, b := range t.waits {
		cum += b.n
		if cum >= want {
			return b.upper
		}
	}
	return t.waits[len(t.waits)-1].upper
}

// AddWait counts one first attempt's wait (Waits and the histogram that
// WaitQuantile reads), for a record made with ThroughputRecord.
func (t *Throughput) AddWait(d time.Duration) {
	t.Waits++
	t.waits = mergeBuckets(t.waits, []waitBucket{{upper: waitUpper(waitBucketOf(max(d, 0), waitRes), waitRes), n: 1}})
}

// Add sums o's counts and waits into t, leaving t.Start as it is: to sum
// minutes into longer steps.
func (t *Throughput) Add(o Throughput) {
	t.Acked += o.Acked
	t.Retried += o.Retried
	t.Dead += o.Dead
	t.Waits += o.Waits
	t.Records += o.Records
	t.waits = mergeBuckets(t.waits, o.waits)
}

func mergeBuckets(a, b []waitBucket) []waitBucket {
	out := make([]waitBucket, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].upper < b[j].upper:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].upper < a[i].upper:
			out = append(out, b[j])
			j++
		default:
			out = append(out, waitBucket{upper: a[i].upper, n: a[i].n + b[j].n})
			i, j = i+1, j+1
		}
	}
	return out
}

// ThroughputList returns queue's throughput per minute since since (at
// most ThroughputKeep ago), oldest first, summed over the workers that
// recorded each minute; minutes in which no job ended are absent. It needs
// what PresenceList needs; records it cannot read are skipped.
func ThroughputList(ctx context.Context, c *fila.Client, queue string, since time.Time) ([]Throughput, error) {
	lister, err := recordMarks(c, queue, "listing the throughput of a queue")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, prefix := range throughputPrefixes(since, time.Now()) {
		ns, err := lister.MarkList(ctx, queue, prefix)
		if err != nil {
			return nil, fmt.Errorf("worker: listing the throughput of queue %q: %w", queue, err)
		}
		names = append(names, ns...)
	}
	var out []Throughput
	for _, n := range names {
		t, ok := parseThroughput(n)
		if !ok || t.Start.Before(since.Truncate(ThroughputPeriod)) {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].Start.Equal(t.Start) {
			out[k].Add(t)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// ThroughputRecord writes t as the record of the minute t.Start falls in,
// by source (1 to 64 letters, digits, '-' or '_', unique per process: a
// second record of one source and minute replaces the first), for
// consumers that do not run a Worker but want the dashboard to chart
// them. Workers record themselves. It needs what PresenceList needs.
func ThroughputRecord(ctx context.Context, c *fila.Client, queue, source string, t Throughput) error {
	if !validSource(source) {
		return fmt.Errorf("worker: throughput source %q must be 1 to 64 letters, digits, '-' or '_': %w", cleanText(source, 64), fila.ErrInvalid)
	}
	if t.Acked < 0 || t.Retried < 0 || t.Dead < 0 {
		return fmt.Errorf("worker: negative throughput counts: %w", fila.ErrInvalid)
	}
	lister, err := recordMarks(c, queue, "recording throughput")
	if err != nil {
		return err
	}
	start := t.Start.Truncate(ThroughputPeriod)
	counts := &tpCounts{acked: t.Acked, retried: t.Retried, dead: t.Dead, hist: map[int]int64{}}
	for _, b := range t.waits {
		counts.hist[waitBucketOf(b.upper, waitRes)] += b.n
		counts.waits += b.n
	}
	counts.waits = max(counts.waits, t.Waits)
	if _, err := lister.MarkSet(ctx, queue, throughputName(start, source, counts), start.Add(ThroughputKeep), false); err != nil {
		return fmt.Errorf("worker: recording the throughput of queue %q: %w", queue, err)
	}
	return nil
}

func validSource(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// throughputBlock is how many seconds of records share the prefix that
// ThroughputList reads at once: the names' first seven digits of Unix
// seconds (16 min 40 s).
const throughputBlock = 1000

// throughputPrefixes returns the mark-name prefixes whose records cover
// since to now: one per block for the last few hours, else the whole
// prefix.
func throughputPrefixes(since, now time.Time) []string {
	// A record is named by its minute's start, which may lie in the block
	// before since's.
	first, last := since.Truncate(ThroughputPeriod).Unix()/throughputBlock, now.Unix()/throughputBlock
	if since.Before(now.Add(-ThroughputKeep)) || last-first >= 12 || first < 0 {
		return []string{markThroughputPrefix}
	}
	var out []string
	for b := first; b <= last; b++ {
		out = append(out, fmt.Sprintf("%s%07d", markThroughputPrefix, b))
	}
	return out
}

// Wait histogram buckets: bucket 0 holds waits up to 1ms, bucket i ≥ 1
// those up to 2^(i/res) ms, with res buckets per doubling (4, so the upper
// bound is at most 19% above a wait), up to 2^40 ms.
const (
	waitRes     = 4
	waitMaxLog2 = 40
)

func waitBucketOf(d time.Duration, res int) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 1 {
		return 0
	}
	return min(int(math.Ceil(float64(res)*math.Log2(ms))), res*waitMaxLog2)
}

func waitUpper(i, res int) time.Duration {
	return time.Duration(math.Pow(2, float64(i)/float64(res)) * float64(time.Millisecond))
}

// tpCounts is one queue's open minute in a worker run.
type tpCounts struct {
	acked, retried, dead, waits int64
	hist                        map[int]int64 // bucket (at waitRes) → count
}

type tpKey struct {
	queue  string
	minute int64 // Unix seconds of the minute's start
}

// throughputRecorder sums a Run's job outcomes per queue and minute and
// writes each minute's record as a mark once the minute is over.
type throughputRecorder struct {
	id    string // the Run's presence id
	marks backend.Marker
	log   *slog.Logger

	mu   sync.Mutex
	open map[tpKey]*tpCounts
}

func newThroughputRecorder(marks backend.Marker, id string, log *slog.Logger) *throughputRecorder {
	return &throughputRecorder{id: id, marks: marks, log: log, open: map[tpKey]*tpCounts{}}
}

// add counts a finished job.
func (r *throughputRecorder) add(ev JobEvent, end time.Time) {
	if r == nil {
		return
	}
	var acked, retried, dead int64
	switch ev.Outcome {
	case OutcomeAck:
		acked = 1
	case OutcomeRetry:
		retried = 1
	case OutcomeDead, OutcomeCancelled:
		dead = 1
	default:
		return
	}
	k := tpKey{queue: ev.Queue, minute: end.Unix() - end.Unix()%60}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.open[k]
	if c == nil {
		c = &tpCounts{hist: map[int]int64{}}
		r.open[k] = c
	}
	c.acked += acked
	c.retried += retried
	c.dead += dead
	if ev.Attempt == 1 && !ev.EnqueuedAt.IsZero() {
		c.waits++
		c.hist[waitBucketOf(max(ev.Started.Sub(ev.EnqueuedAt), 0), waitRes)]++
	}
}

// flush writes the records of the minutes before now's, or of every
// minute with all. A record it cannot write is kept for the next flush
// while it is younger than ten minutes.
func (r *throughputRecorder) flush(ctx context.Context, now time.Time, all bool) {
	if r == nil {
		return
	}
	cur := now.Unix() - now.Unix()%60
	r.mu.Lock()
	due := map[tpKey]*tpCounts{}
	for k, c := range r.open {
		if all || k.minute < cur {
			due[k] = c
			delete(r.open, k)
		}
	}
	r.mu.Unlock()
	for k, c := range due {
		start := time.Unix(k.minute, 0)
		_, err := r.marks.MarkSet(ctx, k.queue, throughputName(start, r.id, c), start.Add(ThroughputKeep), false)
		if err == nil {
			continue
		}
		if ctx.Err() == nil && now.Sub(start) < 10*time.Minute {
			r.mu.Lock()
			if o := r.open[k]; o != nil {
				o.merge(c)
			} else {
				r.open[k] = c
			}
			r.mu.Unlock()
		}
		r.log.Debug("fila worker: writing a throughput record failed", slog.String("queue", k.queue), slog.Time("minute", start), slog.Any("error", err))
	}
}

func (c *tpCounts) merge(o *tpCounts) {
	c.acked += o.acked
	c.retried += o.retried
	c.dead += o.dead
	c.waits += o.waits
	for b, n := range o.hist {
		c.hist[b] += n
	}
}

// throughputName is the mark name of a record: the prefix, the minute,
// the run's id, then the counts as a URL query; the wait histogram ("w",
// bucket.count pairs joined by "-", at "res" buckets per doubling) is made
// coarser until the name fits in a mark, and left out if it never does.
func throughputName(start time.Time, id string, c *tpCounts) string {
	base := fmt.Sprintf("%s%010d/%s?", markThroughputPrefix, start.Unix(), id)
	v := url.Values{}
	v.Set("a", strconv.FormatInt(c.acked, 10))
	v.Set("r", strconv.FormatInt(c.retried, 10))
	v.Set("d", strconv.FormatInt(c.dead, 10))
	v.Set("n", strconv.FormatInt(c.waits, 10))
	hist := c.hist
	for res := waitRes; res >= 1; res /= 2 {
		if len(hist) > 0 {
			v.Set("s", strconv.Itoa(res))
			v.Set("w", encodeHist(hist))
		}
		if name := base + v.Encode(); len(name) <= backend.MaxMarkName {
			return name
		}
		coarser := map[int]int64{}
		for b, n := range hist {
			coarser[(b+1)/2] += n
		}
		hist = coarser
	}
	v.Del("s")
	v.Del("w")
	return base + v.Encode()
}

func encodeHist(h map[int]int64) string {
	bs := make([]int, 0, len(h))
	for b := range h {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = strconv.Itoa(b) + "." + strconv.FormatInt(h[b], 10)
	}
	return strings.Join(parts, "-")
}

// parseThroughput reads a throughput mark name; ok is false for one it
// cannot read. Anyone who can write marks can write a record: the counts
// are bounded to what parses, nothing more is trusted.
func parseThroughput(name string) (t Throughput, ok bool) {
	rest, found := strings.CutPrefix(name, markThroughputPrefix)
	if !found || len(rest) < 11 || rest[10] != '/' {
		return t, false
	}
	secs, err := strconv.ParseInt(rest[:10], 10, 64)
	if err != nil {
		return t, false
	}
	_, query, found := strings.Cut(rest[11:], "?")
	if !found {
		return t, false
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return t, false
	}
	count := func(key string) (int64, bool) {
		n, err := strconv.ParseInt(v.Get(key), 10, 64)
		return n, err == nil && n >= 0
	}
	var oks [4]bool
	t.Acked, oks[0] = count("a")
	t.Retried, oks[1] = count("r")
	t.Dead, oks[2] = count("d")
	t.Waits, oks[3] = count("n")
	if oks != [4]bool{true, true, true, true} {
		return Throughput{}, false
	}
	t.Start, t.Records = time.Unix(secs, 0), 1
	if w := v.Get("w"); w != "" {
		res, err := strconv.Atoi(v.Get("s"))
		if err != nil || res < 1 || res > waitRes {
			return t, true // the counts stand without the histogram
		}
		for _, p := range strings.Split(w, "-") {
			bs, ns, found := strings.Cut(p, ".")
			b, err1 := strconv.Atoi(bs)
			n, err2 := strconv.ParseInt(ns, 10, 64)
			if !found || err1 != nil || err2 != nil || b < 0 || b > res*waitMaxLog2 || n < 0 {
				t.waits = nil
				return t, true
			}
			t.waits = mergeBuckets(t.waits, []waitBucket{{upper: waitUpper(b, res), n: n}})
		}
	}
	return t, true
}
