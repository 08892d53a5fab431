package ui_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/ui"
)

// downDriver is a memory driver whose broker stopped answering: Ping
// fails, and a stats read waits until its context ends.
type downDriver struct {
	*memory.Driver
	down  atomic.Bool
	stats atomic.Int64
}

func (d *downDriver) Ping(ctx context.Context) error {
	if d.down.Load() {
		return backend.ErrUnavailable
	}
	return nil
}

func (d *downDriver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	if d.down.Load() {
		d.stats.Add(1)
		<-ctx.Done()
		return backend.Stats{}, ctx.Err()
	}
	return d.Driver.QueueStats(ctx, queue)
}

func (d *downDriver) QueueList(ctx context.Context) ([]string, error) {
	if d.down.Load() {
		return nil, backend.ErrUnavailable
	}
	return d.Driver.QueueList(ctx)
}

// TestOverviewOutage: while the broker does not answer, the overview says
// so once, at once, without "no queues" beside it and without waiting for
// each queue's stats.
func TestOverviewOutage(t *testing.T) {
	t.Parallel()
	drv := &downDriver{Driver: memory.NewBroker(memory.BrokerOptions{}).Open()}
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	d := newDash(t, c, ui.Options{Queues: []string{"emails", "reports"}, SampleInterval: 30 * time.Minute})
	if page := d.get("/", http.StatusOK); strings.Contains(page.body, `id="list-error"`) {
		t.Fatalf("an error while the broker answers:\n%s", mainText(page.body))
	}
	drv.down.Store(true)
	start := time.Now()
	page := d.get("/", http.StatusOK)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the overview took %v while the broker was down", took)
	}
	if !strings.Contains(page.body, `id="list-error"`) || !strings.Contains(page.body, "does not answer") {
		t.Errorf("the overview does not say the broker is down:\n%s", mainText(page.body))
	}
	if strings.Contains(page.body, `id="no-queues"`) {
		t.Error("the overview says there are no queues beside the error")
	}
	if n := drv.stats.Load(); n != 0 {
		t.Errorf("the overview read stats %d times from a broker that does not answer", n)
	}
	if n := strings.Count(page.body, "does not answer"); n > 3 {
		t.Errorf("the outage is said %d times", n)
	}
	// The other pages fail fast with 503 rather than wait for each call.
	for _, path := range []string{"/queues/emails", "/queues/emails/dead", "/queues/emails/dead/some-id"} {
		start := time.Now()
		r := d.do(http.MethodGet, path, nil, nil)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "does not answer") {
			t.Errorf("GET %s while the broker is down: status %d\n%s", path, r.status, mainText(r.body))
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Errorf("GET %s took %v while the broker was down", path, took)
		}
	}
	// With no queue named, listing fails too: the error, without "no
	// queues to show yet" beside it.
	listed := newDash(t, c, ui.Options{SampleInterval: 30 * time.Minute}).get("/", http.StatusOK)
	if !strings.Contains(listed.body, `id="list-error"`) || strings.Contains(listed.body, `id="no-queues"`) {
		t.Errorf("a failed listing shows:\n%s", mainText(listed.body))
	}
}

// TestOverviewCountsNoteOnce: a driver's caveat on its counts (RabbitMQ's)
// is said once above the cards, not on every card.
func TestOverviewCountsNoteOnce(t *testing.T) {
	t.Parallel()
	b := brokerNamed(t, "rabbitmq")
	c := open(t, b.url(t))
	qs := []string{newQueue(t, c, "uinote"), newQueue(t, c, "uinote")}
	for _, q := range qs {
		enqueue(t, c, q, fila.Message{Kind: "k", Body: []byte("x")})
	}
	page := newDash(t, c, ui.Options{Queues: qs, Refresh: -1}).get("/", http.StatusOK)
	if n := strings.Count(page.body, "RabbitMQ counts delayed and leased messages only"); n != 1 {
		t.Errorf("the overview says RabbitMQ's caveat %d times, want once:\n%s", n, mainText(page.body))
	}
}
