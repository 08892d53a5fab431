package ui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW = 300
	chartH = 64
	// chartSeries is how many kinds a chart draws; the others are summed
	// into "other".
	chartSeries = 5
)

// chartView is one small chart, drawn as inline SVG by the templates.
type chartView struct {
	Title string
	// NA, when set, is why the broker or the setup does not report this
	// number; the chart shows "n/a" with it instead of lines.
	NA string
	// Empty, when set, is shown instead of lines: nothing to draw yet.
	Empty string
	// Current is the latest value, Top the value at the top of the chart.
	Current string
	Top     string
	Span    string
	Series  []seriesView
	// Note is shown under the chart; Help is the title's tooltip.
	Note string
	Help string
	// Legend: the series are kinds, named under the chart.
	Legend bool
	W, H   int
	// Ticks are the clock times (UTC) at the start, the quarters and the
	// end of the span; Grid the x positions of the quarters' lines.
	Ticks []string
	Grid  []float64
}

// seriesView is one line of a chart.
type seriesView struct {
	Label string
	// Class picks the line's colour in the style sheet (s0 … s5).
	Class string
	// Lines are the SVG points lists of the line's unbroken stretches.
	Lines []string
	Value string
}

// point is one value of a series at a time; ok is false for a gap.
type point struct {
	at time.Time
	v  float64
	ok bool
}

// chartFrame places points in a chart of a time span ending now.
type chartFrame struct {
	now    time.Time
	span   time.Duration
	maxGap time.Duration // longer between two points breaks the line
}

// lines turns points into SVG points lists scaled to top, breaking at gaps.
func (f chartFrame) lines(pts []point, top float64) []string {
	var out []string
	var cur []string
	var prev time.Time
	flush := func() {
		switch len(cur) {
		case 0:
			return
		case 1: // a lone point: a zero-length line, drawn as a dot (round caps)
			cur = append(cur, cur[0])
		}
		out = append(out, strings.Join(cur, " "))
		cur = nil
	}
	start := f.now.Add(-f.span)
	for _, p := range pts {
		if !p.ok || p.at.Before(start) {
			flush()
			continue
		}
		if len(cur) > 0 && p.at.Sub(prev) > f.maxGap {
			flush()
		}
		x := float64(chartW) * float64(p.at.Sub(start)) / float64(f.span)
		// 0 sits just above the axis, top a few units below the top edge.
		y := float64(chartH) - 1
		if top > 0 {
			y -= (float64(chartH) - 8) * p.v / top
		}
		cur = append(cur, strconv.FormatFloat(x, 'f', 1, 64)+","+strconv.FormatFloat(y, 'f', 1, 64))
		prev = p.at
	}
	flush()
	return out
}

// newChart is a chart with its frame's span, size and time ticks.
func (f chartFrame) newChart(title string) chartView {
	c := chartView{Title: title, Span: fmtSpan(f.span), W: chartW, H: chartH}
	// Quarters of the span, to the minute; halves, to the second, for a
	// span of a few minutes.
	parts, layout := 4, "15:04"
	if f.span < 10*time.Minute {
		parts, layout = 2, "15:04:05"
	}
	for i := 0; i <= parts; i++ {
		at := f.now.Add(-f.span * time.Duration(parts-i) / time.Duration(parts)).UTC()
		c.Ticks = append(c.Ticks, at.Format(layout))
		if i > 0 && i < parts {
			c.Grid = append(c.Grid, float64(chartW*i)/float64(parts))
		}
	}
	return c
}

// draw fills c's series from named point lists, scaled to their largest
// value, formatted with format.
func (f chartFrame) draw(c *chartView, names []string, series map[string][]point, format func(float64) string) {
	top := 0.0
	for _, n := range names {
		for _, p := range series[n] {
			if p.ok && p.v > top {
				top = p.v
			}
		}
	}
	c.Top = format(top)
	for i, n := range names {
		pts := series[n]
		sv := seriesView{Label: n, Class: fmt.Sprintf("s%d", i), Lines: f.lines(pts, top), Value: notReported}
		if last, ok := lastPoint(pts); ok {
			sv.Value = format(last.v)
		}
		c.Series = append(c.Series, sv)
	}
}

// lastPoint is the latest point of pts with a value.
func lastPoint(pts []point) (point, bool) {
	for i := len(pts) - 1; i >= 0; i-- {
		if pts[i].ok {
			return pts[i], true
		}
	}
	return point{}, false
}

// ageChart charts the oldest ready message's age. A broker that leaves
// OldestReadyAt empty while messages are ready (RabbitMQ) makes it n/a; an
// empty queue's age is 0 on every broker.
func (f chartFrame) ageChart(ss []sample, driver string) chartView {
	c := f.newChart("Oldest ready age")
	reported, unreported := false, false
	pts := make([]point, 0, len(ss))
	for _, s := range ss {
		p := point{at: s.at, ok: s.ok}
		switch {
		case !s.ok:
		case s.stats.Ready == 0:
		case s.stats.OldestReadyAt.IsZero():
			unreported, p.ok = true, false
		default:
			reported = true
			p.v = s.stats.OldestReadyAge(s.at).Seconds()
		}
		pts = append(pts, p)
	}
	if unreported && !reported {
		c.NA = "the " + driver + " broker does not report when its oldest ready message became ready"
		return c
	}
	if _, ok := lastPoint(pts); !ok {
		c.Empty = "collecting…"
		return c
	}
	f.draw(&c, []string{"age"}, map[string][]point{"age": pts}, fmtSeconds)
	c.Current = c.Series[0].Value
	return c
}

// deadChart charts dead letters per kind: the largest kinds of the span,
// the others summed. A broker that does not count them per kind (nil
// DeadByKind, RabbitMQ) gets one line of the total and a note.
func (f chartFrame) deadChart(ss []sample, driver string) chartView {
	c := f.newChart("Dead letters")
	perKind := true
	read := false
	for _, s := range ss {
		if s.ok {
			read = true
			if s.stats.DeadByKind == nil {
				perKind = false
			}
		}
	}
	if !read {
		c.Empty = "collecting…"
		return c
	}
	total := make([]point, len(ss))
	for i, s := range ss {
		total[i] = point{at: s.at, ok: s.ok, v: float64(s.stats.Dead)}
	}
	if !perKind {
		c.Note = "per kind: n/a (the " + driver + " broker does not count dead letters per kind)"
		f.draw(&c, []string{"all kinds"}, map[string][]point{"all kinds": total}, fmtCountF)
		c.Current = c.Series[0].Value
		return c
	}
	names, series := kindSeries(ss, func(s sample) map[string]float64 {
		m := make(map[string]float64, len(s.stats.DeadByKind))
		for k, n := range s.stats.DeadByKind {
			m[k] = float64(n)
		}
		return m
	}, true)
	c.Legend = len(names) > 0
	if len(names) == 0 {
		names, series = []string{"dead"}, map[string][]point{"dead": total}
	}
	f.draw(&c, names, series, fmtCountF)
	if last, ok := lastPoint(total); ok {
		c.Current = fmtCountF(last.v)
	}
	return c
}

// runChart charts the p95 run time per kind.
func (f chartFrame) runChart(ss []sample, hasSource bool) chartView {
	c := f.newChart("p95 run time")
	if !hasSource {
		c.NA = "no run times reported: give the dashboard the worker's run times (Options.RunTimes, a ui.Recorder in the worker)"
		return c
	}
	names, series := kindSeries(ss, func(s sample) map[string]float64 {
		if s.p95 == nil {
			return nil
		}
		m := make(map[string]float64, len(s.p95))
		for k, d := range s.p95 {
			m[k] = d.Seconds()
		}
		return m
	}, false)
	if len(names) == 0 {
		c.Empty = "no job ended in the " + c.Span
		return c
	}
	c.Legend = true
	f.draw(&c, names, series, fmtSeconds)
	top := 0.0
	for _, n := range names {
		if p, ok := lastPoint(series[n]); ok && p.v > top {
			top = p.v
		}
	}
	c.Current = fmtSeconds(top)
	return c
}

// kindSeries makes one point list per kind from the samples' per-kind
// values: the chartSeries kinds with the largest latest (then largest
// ever) value by name, and when there are more kinds an "other" series
// summing them. With zeroMissing a kind a sample lacks is 0 there (dead
// letters); otherwise it is a gap (no job of that kind ended).
func kindSeries(ss []sample, values func(sample) map[string]float64, zeroMissing bool) ([]string, map[string][]point) {
	rows := make([]map[string]float64, len(ss))
	latest, peak := map[string]float64{}, map[string]float64{}
	for i, s := range ss {
		if !s.ok {
			continue
		}
		rows[i] = values(s)
		for k, v := range rows[i] {
			latest[k] = v
			peak[k] = max(peak[k], v)
		}
	}
	kinds := make([]string, 0, len(latest))
	for k := range latest {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		switch {
		case latest[a] != latest[b]:
			return cmpDesc(latest[a], latest[b])
		case peak[a] != peak[b]:
			return cmpDesc(peak[a], peak[b])
		}
		return strings.Compare(a, b)
	})
	shown, rest := kinds, []string(nil)
	if len(kinds) > chartSeries {
		shown, rest = kinds[:chartSeries-1], kinds[chartSeries-1:]
	}
	series := map[string][]point{}
	for _, k := range shown {
		pts := make([]point, len(ss))
		for i, s := range ss {
			v, has := rows[i][k]
			pts[i] = point{at: s.at, v: v, ok: s.ok && (has || zeroMissing)}
		}
		series[k] = pts
	}
	names := slices.Clone(shown)
	if len(rest) > 0 {
		const other = "other kinds"
		pts := make([]point, len(ss))
		for i, s := range ss {
			sum, has := 0.0, false
			for _, k := range rest {
				if v, ok := rows[i][k]; ok {
					sum, has = sum+v, true
				}
			}
			if !zeroMissing && has {
				// Percentiles do not add up: show the largest.
				sum = 0
				for _, k := range rest {
					sum = max(sum, rows[i][k])
				}
			}
			pts[i] = point{at: s.at, v: sum, ok: s.ok && (has || zeroMissing)}
		}
		series[other] = pts
		names = append(names, other)
	}
	return names, series
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
}

func fmtSeconds(v float64) string { return fmtDuration(time.Duration(v * float64(time.Second))) }

func fmtCountF(v float64) string { return fmtCount(int64(v)) }
