package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/fila-go/fila"
)

// TestCancelReport: the cancel's output says what was found, and where the
// broker could not be asked, that it cannot say.
func TestCancelReport(t *testing.T) {
	page := fila.MessagePage{Messages: []fila.PendingMessage{{ID: "a", State: fila.StateReady}, {ID: "b", State: fila.StateLeased}, {ID: "c", State: fila.StateDelayed}}}
	got := cancelReport("q", []string{"a", "b", "c", "gone\x1b[2J"}, page, nil)
	want := "cancelled 2 waiting and 1 running message(s) of queue \"q\"\nnot pending (acked, dead-lettered already, or mistyped; the cancel is kept 90 days in case it arrives): gone\\x1b[2J\n"
	if got != want {
		t.Errorf("cancelReport = %q; want %q", got, want)
	}
	got = cancelReport("q", []string{"a", "b"}, fila.MessagePage{}, errors.New("unsupported"))
	if !strings.HasPrefix(got, "cancel recorded for 2 message id(s) of queue \"q\" (the broker cannot say which it holds") {
		t.Errorf("cancelReport without a lookup = %q", got)
	}
}
