package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
)

// TestEarlierErrors: the single message and dead letter pages show the
// earlier errors of the message's history in a table, escaped.
func TestEarlierErrors(t *testing.T) {
	c := open(t, "mem://"+unique("uierr"))
	q := newQueue(t, c, "uierr")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := enqueue(t, c, q, fila.Message{Kind: "k"})
	retry := func(reason string) *fila.Delivery {
		t.Helper()
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Lease: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive = %v, %v", ds, err)
		}
		if reason != "" {
			if err := ds[0].Retry(ctx, 0, reason); err != nil {
				t.Fatal(err)
			}
		}
		return ds[0]
	}
	retry("first: " + scriptPayload)
	retry("second\n" + imgPayload)
	retry("third")
	d := newDash(t, c, ui.Options{})
	row := func(attempt, reason string) *regexp.Regexp {
		return regexp.MustCompile(`<tr><td class="num">` + attempt + `</td><td class="time">[^<]+ UTC</td><td class="reason"><pre class="reason">` +
			regexp.QuoteMeta(reason) + `</pre></td></tr>`)
	}
	// The payloads as html/template escapes them.
	first := row("1", "first: &lt;script&gt;document.title=&#39;pwned&#39;;window.filaPwned=1&lt;/script&gt;")
	second := row("2", "second\n&#34;&gt;&lt;img src=x onerror=&#34;document.title=&#39;pwned&#39;;window.filaPwned=1&#34;&gt;")
	earlier := regexp.MustCompile(`(?s)<table class="errors" id="earlier-errors">.*?</table>`)
	mp := d.get("/queues/"+q+"/messages/"+url.PathEscape(ids[0]), http.StatusOK).body
	table := earlier.FindString(mp)
	if got := pre(t, mp, "last-error"); got != "third" || !first.MatchString(table) || !second.MatchString(table) ||
		strings.Contains(table, "third") {
		t.Errorf("message page: last error and earlier errors:\n%s", table)
	}
	if err := retry("").Dead(ctx, "final"); err != nil {
		t.Fatal(err)
	}
	lp := d.get("/queues/"+q+"/dead/"+url.PathEscape(ids[0]), http.StatusOK).body
	table = earlier.FindString(lp)
	if got := pre(t, lp, "reason"); got != "final" || !first.MatchString(table) || !second.MatchString(table) ||
		!row("3", "third").MatchString(table) || strings.Count(table, "<tr>") != 4 {
		t.Errorf("dead letter page: reason %q, earlier errors:\n%s", got, table)
	}
	for _, bad := range []string{"<script>document", "<img src=x"} {
		if strings.Contains(mp+lp, bad) {
			t.Errorf("a page holds %q unescaped", bad)
		}
	}
	// Without earlier errors, no table.
	other := enqueue(t, c, q, fila.Message{Kind: "k"})
	if mp := d.get("/queues/"+q+"/messages/"+url.PathEscape(other[0]), http.StatusOK).body; strings.Contains(mp, "earlier-errors") {
		t.Errorf("a message without errors shows an earlier errors table")
	}
}
