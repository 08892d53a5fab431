package main

import (
	"fmt"
	"runtime"
)

// Load stamps: the machine is shared, and a figure measured while other
// work loaded it says little next to one measured on a quiet machine. Each
// scenario run of a system records the 1-minute load average before and
// after it; the tables mark (†) a figure taken while the load average was
// above the number of CPUs at either end, and list those loads under the
// table, so a table never mixes quiet and loaded runs silently.

// loadMark is appended to the cell of a figure taken under load.
const loadMark = "†"

// stamped runs f and records the load average before and after it in
// every result (see loadAround).
func stamped(label string, f func() ([]result, error)) ([]result, error) {
	var rs []result
	var err error
	load := loadAround(label, func() { rs, err = f() })
	for i := range rs {
		rs[i].LoadBefore, rs[i].LoadAfter = load.LoadBefore, load.LoadAfter
	}
	return rs, err
}

// loadAround runs f, logs the load average before and after it with
// label, and returns the two in a result's load fields.
func loadAround(label string, f func()) result {
	before := loadAvg1()
	f()
	after := loadAvg1()
	logf("%s: load average %s before, %s after (%d CPUs)", label, fmtLoad(before), fmtLoad(after), runtime.NumCPU())
	return result{LoadBefore: before, LoadAfter: after}
}

// underLoad reports whether r was taken while the load average exceeded
// the CPUs at its start or its end (never for a result without stamps).
func underLoad(r result) bool {
	cpus := float64(runtime.NumCPU())
	return r.LoadBefore > cpus || r.LoadAfter > cpus
}

// loadNote is the line under a table for a figure taken under load.
func loadNote(what string, r result) string {
	return fmt.Sprintf("%s %s: taken under load (1-minute load average %s before, %s after, on %d CPUs)",
		loadMark, what, fmtLoad(r.LoadBefore), fmtLoad(r.LoadAfter), runtime.NumCPU())
}

func fmtLoad(v float64) string {
	if v < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f", v)
}
