package mongo

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// claimStall is a command monitor that, once armed, ends a context as a
// claim command goes out and has the proxy hold the claim's reply: the
// server claims, the Receive's context has ended and the answer comes
// later.
type claimStall struct {
	mu     sync.Mutex
	proxy  *testenv.Proxy
	hold   time.Duration
	cancel context.CancelFunc
	fired  bool
}

func (c *claimStall) arm(cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel, c.fired = cancel, false
}

func (c *claimStall) didFire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

func (c *claimStall) started(_ context.Context, e *event.CommandStartedEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel == nil || (e.CommandName != "findAndModify" && e.CommandName != "update") {
		return
	}
	c.proxy.StallNext(c.hold)
	c.cancel()
	c.cancel, c.fired = nil, true
}

// TestReceiveFinishesClaimWhenCtxEnds: a Receive whose context ends as its
// claim goes out, and whose claim's answer then takes longer than the 2 s
// grace the driver used to give it, still waits for the claim and returns
// the message with a nil error (the portable layer gives it back), rather
// than leaving it leased to nobody for a whole lease. Both claims are
// covered: findAndModify (Max 1) and the updateMany of a batch.
func TestReceiveFinishesClaimWhenCtxEnds(t *testing.T) {
	s := mongoServer(t)
	db := testDatabase(t, s)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	// Through the proxy only; no heartbeat reply in the way of the stall.
	q.Set("directConnection", "true")
	q.Set("heartbeatFrequencyMS", "600000")
	u.RawQuery = q.Encode()
	mon := &claimStall{proxy: proxy, hold: 3 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := gomongo.Connect(options.Client().ApplyURI(u.String()).SetMonitor(&event.CommandMonitor{Started: mon.started}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	drv, err := New(ctx, client, Options{Database: db, DisableChangeStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	for _, max := range []int{1, 3} {
		queue := uniqueQueue("claimctx")
		enqueueOne(t, drv, queue, backend.Message{Body: []byte("x")})
		rctx, rcancel := context.WithCancel(ctx)
		mon.arm(rcancel)
		start := time.Now()
		ds, err := drv.Receive(rctx, queue, backend.ReceiveParams{Max: max, Lease: time.Minute})
		took := time.Since(start)
		rcancel()
		if !mon.didFire() {
			t.Fatalf("Max %d: no claim command was seen; the test proves nothing", max)
		}
		if err != nil || len(ds) != 1 {
			t.Fatalf("Max %d: Receive whose context ended as its claim went out: %d deliveries, %v after %v; want the claimed message and no error",
				max, len(ds), err, took)
		}
		if errs, err := drv.Ack(ctx, []backend.Ref{{Queue: queue, ID: ds[0].ID, Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
			t.Errorf("Max %d: Ack of what the claim returned: %v, %v", max, errs, err)
		}
	}
}
