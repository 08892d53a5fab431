// Package skips records what a test binary's tests were skipped for — a
// broker with no server, a cluster form not named, a missing browser — and
// reports it in one line each after the tests ran, so that a plain
// `go test ./...` does not print a bare "ok" for a package that tested
// nothing.
//
// Package filatest and internal/testenv call [Record] where they skip a
// test; a test package's TestMain calls [Main] (through filatest.Main or
// testenv.Main).
//
// # Where the lines go
//
// go test shows a passing package's output only with -v (or -json, or when
// run in the package's directory without package arguments); in the usual
// `go test ./...` it prints the "ok" line alone. So the lines go to standard
// output, where -v, -json and a failing run show them, and, when the output
// would be hidden (standard output is not a terminal and -v is off), also
// where go test writes its own "ok" lines: on Linux, when the test binary's
// parent process is the go command, its standard output (opened through
// /proc, for appending) unless that is a regular file; otherwise the
// controlling terminal (/dev/tty) when there is one.
//
// A result go test takes from its cache ("ok ... (cached)") prints no line:
// go test -count=1 runs the tests again. (The cache cannot be told not to
// keep a run that skipped: it only looks at files inside the module and the
// environment variables the tests read.)
package skips

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Hint, when set, is added to the reason a test gives for skipping, saying
// how to start the servers in this repository (internal/testenv sets it to
// the scripts/services command).
var Hint string

type entry struct {
	what, reason string
	n            int
}

var (
	mu      sync.Mutex
	entries []*entry
)

// Record notes that a test was skipped because what (a broker, a cluster
// form, a browser: "PostgreSQL", "Redis Cluster") was unavailable, for the
// reason given. The first reason recorded for what is the one reported.
func Record(what, reason string) {
	mu.Lock()
	found := false
	for _, e := range entries {
		if e.what == what {
			e.n++
			found = true
			break
		}
	}
	if !found {
		entries = append(entries, &entry{what: what, reason: reason, n: 1})
	}
	mu.Unlock()
}

// Lines returns one line per thing recorded, in the order first recorded:
//
//	fila: PostgreSQL tests skipped in example.com/app (3 tests): <reason>
//
// pkg (an import path) may be empty.
func Lines(pkg string) []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, e := range entries {
		in := ""
		if pkg != "" {
			in = " in " + pkg
		}
		tests := "tests"
		if e.n == 1 {
			tests = "test"
		}
		out = append(out, fmt.Sprintf("fila: %s tests skipped%s (%d %s): %s", e.what, in, e.n, tests, e.reason))
	}
	return out
}

// Main runs the tests of m, reports what they were skipped for and exits
// with m's code. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Report(callerPackage())
	os.Exit(code)
}

// Report writes the lines of [Lines] to standard output and, where go test
// would hide them, to the terminal.
func Report(pkg string) {
	lines := Lines(pkg)
	if len(lines) == 0 {
		return
	}
	text := strings.Join(lines, "\n") + "\n"
	_, _ = io.WriteString(os.Stdout, text)
	if hiddenOutput() {
		w, err := goCommandStdout()
		if err != nil {
			w, err = os.OpenFile("/dev/tty", os.O_WRONLY, 0)
		}
		if err == nil {
			_, _ = io.WriteString(w, text)
			_ = w.Close()
		}
	}
}

// hiddenOutput reports whether go test may hide what the binary writes:
// -v is off and standard output is not a terminal (go test reads it through
// a pipe and drops it for a passing package).
func hiddenOutput() bool {
	if testing.Verbose() {
		return false
	}
	fi, err := os.Stdout.Stat()
	return err != nil || fi.Mode()&os.ModeCharDevice == 0
}

// callerPackage returns the import path of the test package whose TestMain
// is on the stack, or "".
func callerPackage() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if pkg, ok := strings.CutSuffix(f.Function, ".TestMain"); ok {
			return strings.TrimSuffix(pkg, "_test")
		}
		if !more {
			return ""
		}
	}
}
