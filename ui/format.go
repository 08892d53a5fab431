package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// notReported is what the pages show for what the broker does not report.
const notReported = "n/a"

// fmtCount prints n with thousands separators: 12,345.
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fmtDuration prints a duration with a precision that fits its size: 840µs,
// 12ms, 3.4s, 5m12s, 2h05m.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 100*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// fmtSpan names a chart's time span: "last hour", "last 30m".
func fmtSpan(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "last hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("last %dh", int(d.Hours()))
	case d%time.Minute == 0:
		return fmt.Sprintf("last %dm", int(d.Minutes()))
	default:
		return "last " + d.String()
	}
}

// fmtTime prints a time in UTC, to the second; "-" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// firstLine is a reason's first line, cut to max runes, with "…" when
// anything was left out.
func firstLine(s string, max int) string {
	line, _, more := strings.Cut(s, "\n")
	if utf8.RuneCountInString(line) > max {
		return string([]rune(line)[:max-1]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}

// cutUTF8 returns the first n bytes of b at most, not splitting a rune.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
