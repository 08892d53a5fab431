package filaotel

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

// TestObserverStale checks that a queue whose polls stop succeeding stops
// being reported after three intervals instead of showing stale numbers.
func TestObserverStale(t *testing.T) {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://observer-stale")
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	o, err := NewObserver(c, []string{"q"}, WithMeterProvider(mp), WithPollInterval(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	now := time.Now()
	o.now = func() time.Time { return now }
	if err := o.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	points := func() int {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
					n += len(g.DataPoints)
				}
			}
		}
		return n
	}
	if n := points(); n != 4 {
		t.Fatalf("%d queue-message points after a poll; want 4 (one per state)", n)
	}
	c.Close() // later polls fail
	now = now.Add(2 * time.Minute)
	if err := o.Poll(ctx); err == nil {
		t.Fatal("poll on a closed client succeeded")
	}
	if n := points(); n != 4 {
		t.Errorf("%d points two intervals after the last good poll; want the last numbers (4)", n)
	}
	now = now.Add(2 * time.Minute)
	if n := points(); n != 0 {
		t.Errorf("%d points four intervals after the last good poll; want none", n)
	}
}
