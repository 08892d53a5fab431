package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/fila-go/fila/internal/skips"
)

// ChromiumEnv holds the path of the Chromium (or Chrome) binary the browser
// tests drive, for example /usr/bin/chromium. scripts/services installs
// Debian's chromium package when it is missing and prints this variable.
const ChromiumEnv = "FILA_TEST_CHROMIUM"

// chromiumNames are the programs Chromium looks for on PATH, in order.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// Chromium returns the path of a Chromium for browser tests: FILA_TEST_CHROMIUM
// when set (it must name a program that exists), otherwise the first of
// chromium, chromium-browser, google-chrome, google-chrome-stable and
// headless-shell found on PATH. Without one the test is skipped with one
// line naming what to install, or fails when the CI environment variable is
// set, as for a missing broker.
func Chromium(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(ChromiumEnv); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			tb.Fatalf("testenv: %s=%s is not a program: %v", ChromiumEnv, p, err)
		}
		return p
	}
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("testenv: no Chromium: CI is set, %s is empty and none of %v is on PATH (scripts/services chromium installs Debian's chromium package)", ChromiumEnv, chromiumNames)
	}
	skips.Record("browser", fmt.Sprintf("no Chromium: install Debian's chromium package (scripts/services chromium) or set %s", ChromiumEnv))
	tb.Skipf("testenv: no Chromium for the browser tests: install Debian's chromium package (scripts/services chromium) or set %s", ChromiumEnv)
	return ""
}
