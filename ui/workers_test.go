package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/ui"
	"github.com/fila-go/fila/worker"
)

// TestQueuePageWorkers: the queue page lists the workers running on the
// queue from their presence records and the schedules recorded in it,
// escapes what a record says, and shows no worker once the worker stopped;
// on RabbitMQ it says the broker cannot list them.
func TestQueuePageWorkers(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uiworkers")
		o := ui.Options{}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)
		page := d.get("/queues/"+q, http.StatusOK).body
		if b.rabbit {
			if !strings.Contains(page, `id="workers-na"`) {
				t.Errorf("RabbitMQ queue page does not say the workers cannot be listed:\n%s", mainText(page))
			}
			return
		}
		if !strings.Contains(page, `id="no-workers"`) {
			t.Fatalf("queue page without workers lacks the no-workers note:\n%s", mainText(page))
		}

		// A record forged by anyone who can write marks: shown escaped.
		forged := "worker/f0rged?h=" + "%3Cscript%3Ealert(1)%3C%2Fscript%3E" + "&p=1&c=1&t=1000"
		if _, err := c.Driver().(backend.Marker).MarkSet(context.Background(), q, forged, time.Time{}, false); err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(c, worker.Config{Queues: map[string]worker.QueueConfig{q: {Concurrency: 3}}, Presence: time.Minute,
			Periodic: []worker.Periodic{{Name: "sweep", Queue: q, Every: time.Hour, Message: fila.Message{Kind: "sweep.run"}}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		stop := func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return within 30s")
			}
		}
		t.Cleanup(func() { cancel() })
		host, _ := os.Hostname()
		row := fmt.Sprintf(`<td class="host">%s</td><td class="num">%d</td><td class="num">3</td><td class="num">-</td>`, host, os.Getpid())
		waitFor(t, "the worker's row on the queue page", func() bool {
			page = d.get("/queues/"+q, http.StatusOK).body
			return strings.Contains(page, row)
		})
		// The schedule's record is written after the worker's.
		waitFor(t, "the schedule on the queue page", func() bool {
			sched := `<td class="id">sweep</td><td class="spec">every 1h0m0s</td><td class="kind">sweep.run</td><td>-</td><td>` +
				time.Now().Truncate(time.Hour).Add(time.Hour).UTC().Format("2006-01-02 15:04:05 UTC") + `</td>`
			return strings.Contains(d.get("/queues/"+q, http.StatusOK).body, sched)
		})
		// Up: whole seconds for the live worker, days for the forged
		// record started in 1970.
		ups := regexp.MustCompile(`<td class="up">([^<]*)</td>`).FindAllStringSubmatch(page, -1)
		var got []string
		for _, u := range ups {
			got = append(got, u[1])
		}
		if len(got) != 2 || !slices.ContainsFunc(got, regexp.MustCompile(`^[0-9]+s$`).MatchString) ||
			!slices.ContainsFunc(got, regexp.MustCompile(`^[0-9]+d$`).MatchString) {
			t.Errorf("the workers' up times are %q; want whole seconds for the live worker and days for the forged record", got)
		}
		if strings.Contains(page, "<script>alert") || !strings.Contains(page, `<td class="host">&lt;script&gt;alert(1)&lt;/script&gt;</td>`) {
			t.Errorf("the forged record's host is not shown escaped:\n%s", page)
		}
		stop()
		page = d.get("/queues/"+q, http.StatusOK).body
		if strings.Contains(page, row) {
			t.Errorf("the stopped worker is still listed:\n%s", mainText(page))
		}
	})
}
