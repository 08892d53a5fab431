package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/fila-go/fila"
)

// TestShowEarlierErrors: fila message show and fila dead show print the
// earlier errors of a message's history under its last error or reason,
// one escaped first line each, and --json has them whole.
func TestShowEarlierErrors(t *testing.T) {
	url := "mem://errhistory-" + unique("x")
	c := client(t, url)
	ctx := context.Background()
	q := unique("errhist")
	id, err := c.Enqueue(ctx, q, fila.Message{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"first \x1b[31mred\nsecond line", "second", "third"} {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive: %v, %d", err, len(ds))
		}
		if err := ds[0].Retry(ctx, 0, reason); err != nil {
			t.Fatal(err)
		}
	}
	earlier := regexp.MustCompile(`earlier errors:\n  attempt 1  \S+  ` + regexp.QuoteMeta(`first \x1b[31mred …`) + `\n  attempt 2  \S+  second\n`)
	out := ok(t, "", "--url", url, "message", "show", "-q", q, id)
	if !strings.Contains(out, "last error:\n  third\nearlier errors:") || !earlier.MatchString(out) || strings.Contains(out, "attempt 3") {
		t.Errorf("message show lacks the last error and the two earlier errors:\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b") {
		t.Errorf("message show printed a control character:\n%q", out)
	}
	var m messageJSON
	if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "message", "show", "-q", q, "--json", id)), &m); err != nil {
		t.Fatal(err)
	}
	if m.LastError != "third" || len(m.Errors) != 3 || m.Errors[0].Reason != "first \x1b[31mred\nsecond line" || m.Errors[2].Attempt != 3 || m.Errors[0].At.IsZero() {
		t.Errorf("message show --json: last error %q, errors %+v", m.LastError, m.Errors)
	}

	ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %d", err, len(ds))
	}
	if err := ds[0].Dead(ctx, "final"); err != nil {
		t.Fatal(err)
	}
	out = ok(t, "", "--url", url, "dead", "show", "-q", q, id)
	if !strings.Contains(out, "reason:\n  final\nearlier errors:") || !earlier.MatchString(out) || !strings.Contains(out, "  attempt 3  ") {
		t.Errorf("dead show lacks the reason and the three earlier errors:\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b") {
		t.Errorf("dead show printed a control character:\n%q", out)
	}
	var l deadJSON
	if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "dead", "show", "-q", q, "--json", id)), &l); err != nil {
		t.Fatal(err)
	}
	if l.Reason != "final" || len(l.Errors) != 3 || l.Errors[1].Reason != "second" || l.Errors[1].Attempt != 2 {
		t.Errorf("dead show --json: reason %q, errors %+v", l.Reason, l.Errors)
	}
}
