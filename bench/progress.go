package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progressLine is the status line on stderr: on a terminal it is redrawn in
// place every half second, elsewhere printed every 5 seconds.
type progressLine struct {
	mu    sync.Mutex
	label string
	count atomic.Int64
	total atomic.Int64
	start time.Time
	tty   bool
	shown bool
}

var progress = &progressLine{start: time.Now()}

func (p *progressLine) set(label string) {
	p.mu.Lock()
	p.label = label
	p.mu.Unlock()
	p.count.Store(0)
	p.total.Store(0)
}

func (p *progressLine) add(n int64) { p.count.Add(n) }

func (p *progressLine) setCount(n, total int64) {
	p.count.Store(n)
	p.total.Store(total)
}

func (p *progressLine) line() string {
	p.mu.Lock()
	label := p.label
	p.mu.Unlock()
	el := time.Since(p.start).Round(time.Second)
	if t := p.total.Load(); t > 0 {
		return fmt.Sprintf("[%v] %s: %d/%d", el, label, p.count.Load(), t)
	}
	if n := p.count.Load(); n > 0 {
		return fmt.Sprintf("[%v] %s: %d", el, label, n)
	}
	return fmt.Sprintf("[%v] %s", el, label)
}

// run draws the line until stop is closed.
func (p *progressLine) run(stop <-chan struct{}) {
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	every := 5 * time.Second
	if p.tty {
		every = 500 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			p.clear()
			return
		case <-t.C:
			p.draw()
		}
	}
}

func (p *progressLine) draw() {
	l := p.line()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(os.Stderr, "\r\033[K%s", l)
		p.shown = true
	} else {
		fmt.Fprintln(os.Stderr, l)
	}
}

func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown {
		fmt.Fprint(os.Stderr, "\r\033[K")
		p.shown = false
	}
}

// logf prints a message on its own line on stderr.
func logf(format string, args ...any) {
	progress.clear()
	fmt.Fprintf(os.Stderr, strings.TrimSuffix(format, "\n")+"\n", args...)
}

// logWriter sends slog records through logf, so they do not mangle the
// progress line.
type logWriter struct{}

func (logWriter) Write(b []byte) (int, error) {
	logf("%s", strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
