package ui_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
	"github.com/fila-go/fila/worker"
)

// TestThroughputChartsAfterRestart: a dashboard started after an hour of
// traffic charts that hour (and the day) from the workers' records in the
// broker, with time ticks; on RabbitMQ, which cannot keep the records, the
// charts say so.
func TestThroughputChartsAfterRestart(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uitp")
		o := ui.Options{Refresh: -1}
		if b.rabbit {
			o.Queues = []string{q}
			page := newDash(t, c, o).get("/queues/"+q, http.StatusOK).body
			if fig := figure(t, page, "Jobs per second"); !strings.Contains(fig, "cannot keep the workers&#39; throughput records") {
				t.Errorf("RabbitMQ's throughput chart does not say why it is n/a:\n%s", fig)
			}
			return
		}
		// An hour of traffic, as workers (here two sources) record it: one
		// job a second, two in the last minute, waits of 40ms.
		ctx := context.Background()
		now := time.Now()
		last := now.Truncate(time.Minute).Add(-time.Minute)
		for i := range 60 {
			m := worker.Throughput{Start: last.Add(-time.Duration(59-i) * time.Minute), Acked: 30, Retried: 1}
			if i == 59 {
				m.Acked = 60
			}
			m.AddWait(40 * time.Millisecond)
			for _, src := range []string{"a", "b"} {
				if err := worker.ThroughputRecord(ctx, c, q, src, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The dashboard starts now: it has sampled nothing yet.
		d := newDash(t, c, o)
		page := d.get("/queues/"+q, http.StatusOK).body
		after := time.Now()
		fig := figure(t, page, "Jobs per second")
		// The current value is the last minute's, unless the page was made
		// in the minute after (which had no job).
		if !strings.Contains(fig, `<span class="cv">2.0/s acked</span>`) &&
			!(after.Truncate(time.Minute).After(now) && strings.Contains(fig, `<span class="cv">0/s acked</span>`)) {
			t.Errorf("the chart's current value is not the last minute's 2.0/s acked:\n%s", fig)
		}
		if !strings.Contains(fig, "<span>max 2.0/s</span>") {
			t.Errorf("the chart's top is not the hour's largest rate, 2.0/s:\n%s", fig)
		}
		xs := points(t, fig, "s0")
		if len(xs) < 59 || xs[0] > 10 || xs[len(xs)-1] < 290 {
			t.Errorf("the acked line has %d points from x=%v to %v; want about 60 across the hour (0 to 300)", len(xs), first(xs), lastOf(xs))
		}
		ticks := regexp.MustCompile(`<div class="ticks">((?:<span>\d\d:\d\d</span>){5})</div>`).FindStringSubmatch(fig)
		if ticks == nil || !strings.HasSuffix(ticks[1], "<span>"+now.UTC().Format("15:04")+"</span>") && !strings.HasSuffix(ticks[1], "<span>"+after.UTC().Format("15:04")+"</span>") {
			t.Errorf("the chart lacks five clock ticks ending now:\n%s", fig)
		}
		if w := figure(t, page, "p95 wait of first attempts"); !regexp.MustCompile(`<span class="cv">4\dms</span>`).MatchString(w) {
			t.Errorf("the wait chart's current value is not about 40ms:\n%s", w)
		}
		// The day: ten-minute steps, the last hour's six or seven of them
		// drawn at about 1/s.
		day := figure(t, d.get("/queues/"+q+"?span=day", http.StatusOK).body, "Jobs per second")
		if !strings.Contains(day, "last 24h") || !strings.Contains(day, "averaged per 10 minutes") {
			t.Errorf("the day chart does not say its span and step:\n%s", day)
		}
		if xs := points(t, day, "s0"); len(xs) < 140 {
			t.Errorf("the day chart has %d points; want one per ten minutes (144)", len(xs))
		}
		// The overview's card has the chart too (a queue is listed while it
		// holds a message).
		enqueue(t, c, q, fila.Message{Kind: "k"})
		if card := card(t, d.get("/", http.StatusOK).body, q); !strings.Contains(card, "Jobs per second") || !strings.Contains(card, "max 2.0/s") {
			t.Errorf("the overview card lacks the throughput chart:\n%s", card)
		}
	})
}

// figure returns the chart of page whose title is title.
func figure(t *testing.T, page, title string) string {
	t.Helper()
	for _, f := range strings.Split(page, `<figure class="chart">`)[1:] {
		f, _, _ = strings.Cut(f, "</figure>")
		if strings.Contains(f, `<span class="ct">`+title+`</span>`) {
			return f
		}
	}
	t.Fatalf("no chart %q on the page:\n%s", title, mainText(page))
	return ""
}

// points returns the x coordinates of the points of a chart's series of
// class class, in order.
func points(t *testing.T, fig, class string) []float64 {
	t.Helper()
	var xs []float64
	re := regexp.MustCompile(`<polyline points="([^"]*)" class="line ` + class + `">`)
	for _, m := range re.FindAllStringSubmatch(fig, -1) {
		for _, p := range strings.Fields(m[1]) {
			x, _, _ := strings.Cut(p, ",")
			v, err := strconv.ParseFloat(x, 64)
			if err != nil {
				t.Fatalf("point %q: %v", p, err)
			}
			xs = append(xs, v)
		}
	}
	return xs
}

func first(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	return xs[0]
}

func lastOf(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	return xs[len(xs)-1]
}
