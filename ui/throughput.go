package ui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// The spans of the throughput charts: the overview and the queue page show
// the last hour; the queue page's "last day" link shows the last day.
const (
	spanHour = time.Hour
	spanDay  = 24 * time.Hour
)

// throughputStep is the width of a throughput chart's points: the records'
// minute over an hour, ten minutes over a day.
func throughputStep(span time.Duration) time.Duration {
	if span > spanHour {
		return 10 * time.Minute
	}
	return worker.ThroughputPeriod
}

// throughputCache holds each queue's throughput records of the last hour,
// read from the broker by the sampler, so the pages do not read them at
// every refresh.
type throughputCache struct {
	mu     sync.Mutex
	queues map[string]throughputEntry
}

type throughputEntry struct {
	read time.Time
	list []worker.Throughput
}

// errNotRead: the broker does not answer and the sampler has not read a
// queue's records before.
var errNotRead = errors.New("the broker does not answer")

// throughput returns queue's records over span ending now: the sampler's
// for the last hour when it read them within two sampling intervals (or
// at all while the broker does not answer: up false), else read from the
// broker. na is set when the driver cannot keep them.
func (h *Handler) throughput(ctx context.Context, queue string, span time.Duration, now time.Time, up bool) (list []worker.Throughput, na bool, err error) {
	if !h.canCancel {
		return nil, true, nil
	}
	if span <= spanHour || !up {
		h.tp.mu.Lock()
		e, ok := h.tp.queues[queue]
		h.tp.mu.Unlock()
		switch {
		case ok && (now.Sub(e.read) < 2*h.interval || !up):
			return e.list, false, nil
		case !up:
			return nil, false, errNotRead
		}
	}
	list, err = worker.ThroughputList(ctx, h.c, queue, now.Add(-span-throughputStep(span)))
	if errors.Is(err, fila.ErrUnsupported) {
		return nil, true, nil
	}
	return list, false, err
}

// sampleThroughput reads queue's last hour of records into the cache.
func (h *Handler) sampleThroughput(ctx context.Context, queue string, now time.Time) error {
	list, err := worker.ThroughputList(ctx, h.c, queue, now.Add(-spanHour-worker.ThroughputPeriod))
	if err != nil {
		return err
	}
	h.tp.mu.Lock()
	defer h.tp.mu.Unlock()
	if h.tp.queues == nil {
		h.tp.queues = map[string]throughputEntry{}
	}
	h.tp.queues[queue] = throughputEntry{read: now, list: list}
	for q, e := range h.tp.queues {
		if now.Sub(e.read) > spanHour {
			delete(h.tp.queues, q) // a queue no longer sampled
		}
	}
	return nil
}

// throughputCharts makes the throughput and wait charts of queue over span.
func (h *Handler) throughputCharts(ctx context.Context, queue string, span time.Duration, now time.Time, up bool) []chartView {
	step := throughputStep(span)
	f := chartFrame{now: now, span: span, maxGap: step * 3 / 2}
	rate, wait := f.newChart("Jobs per second"), f.newChart("p95 wait of first attempts")
	list, na, err := h.throughput(ctx, queue, span, now, up)
	switch {
	case na:
		why := "the " + h.driver + " broker cannot keep the workers' throughput records (they need marks it can list)"
		rate.NA, wait.NA = why, why
		return []chartView{rate, wait}
	case errors.Is(err, errNotRead):
		rate.Empty, wait.Empty = "the broker does not answer", "the broker does not answer"
		return []chartView{rate, wait}
	case err != nil:
		h.log.Warn("fila ui: reading a queue's throughput records failed", "queue", queue, "error", err)
		rate.Empty, wait.Empty = "the throughput records could not be read", "the throughput records could not be read"
		return []chartView{rate, wait}
	}
	buckets := bucketThroughput(list, now, span, step)
	if len(buckets) == 0 {
		empty := "no worker recorded a job in the " + rate.Span + " (workers write each minute's record after it ends)"
		rate.Empty, wait.Empty = empty, empty
		return []chartView{rate, wait}
	}
	// Every step of the span is drawn: a step without a record is one in
	// which no job ended.
	start := now.Add(-span).Truncate(step)
	var acked, retried, dead, p95 []point
	perSec := step.Seconds()
	for at := start; !at.After(now); at = at.Add(step) {
		end := at.Add(step)
		if end.After(now) {
			break // the step is not over: its records are not all written
		}
		b := buckets[at]
		acked = append(acked, point{at: end, ok: true, v: float64(b.Acked) / perSec})
		retried = append(retried, point{at: end, ok: true, v: float64(b.Retried) / perSec})
		dead = append(dead, point{at: end, ok: true, v: float64(b.Dead) / perSec})
		p95 = append(p95, point{at: end, ok: b.Waits > 0, v: b.WaitQuantile(0.95).Seconds()})
	}
	names := []string{"acked", "retried", "dead"}
	f.draw(&rate, names, map[string][]point{"acked": acked, "retried": retried, "dead": dead}, fmtRate)
	rate.Legend = true
	rate.Help = fmt.Sprintf("Jobs acked, retried and dead-lettered per second, averaged per %s, as the workers recorded them in the broker", fmtStep(step))
	if last, ok := lastPoint(acked); ok {
		rate.Current = fmtRate(last.v) + " acked"
	}
	if _, ok := lastPoint(p95); !ok {
		wait.Empty = "no first attempt started in the " + wait.Span
	} else {
		f.draw(&wait, []string{"p95"}, map[string][]point{"p95": p95}, fmtSeconds)
		wait.Current = wait.Series[0].Value
		wait.Help = fmt.Sprintf("The 95th percentile per %s of the wait from enqueue to the handler's start of first attempts (a delay or run-at counts as waiting), as the workers recorded it", fmtStep(step))
	}
	return []chartView{rate, wait}
}

// bucketThroughput sums the records of the span into steps.
func bucketThroughput(list []worker.Throughput, now time.Time, span, step time.Duration) map[time.Time]worker.Throughput {
	out := map[time.Time]worker.Throughput{}
	from := now.Add(-span).Truncate(step)
	for _, t := range list {
		if t.Start.Before(from) {
			continue
		}
		at := t.Start.Truncate(step)
		b := out[at]
		b.Start = at
		b.Add(t)
		out[at] = b
	}
	return out
}

func fmtRate(v float64) string {
	switch {
	case v == 0:
		return "0/s"
	case v < 0.1:
		return fmt.Sprintf("%.1f/min", v*60)
	case v < 10:
		return fmt.Sprintf("%.1f/s", v)
	default:
		return fmtCount(int64(v+0.5)) + "/s"
	}
}

func fmtStep(d time.Duration) string {
	if d == time.Minute {
		return "minute"
	}
	return fmt.Sprintf("%d minutes", int(d.Minutes()))
}
