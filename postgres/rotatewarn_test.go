package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// TestLastRotationSeesOtherDrivers: the time of the last rotation, which
// the "rotation held back" warning counts from when it is later than the
// first refusal this driver saw, is the same for every driver of the
// schema, whichever rotated. The warning used to count from this driver's
// own first refusal, through rotations other drivers made (issue 38,
// item 7b: held_for=5m10s while rotations had happened at 3m51s).
func TestLastRotationSeesOtherDrivers(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(rotate string) *postgres.Driver {
		u, err := url.Parse(driverURL(t, map[string]string{"fila_schema": schema, "fila_mode": "log", "fila_rotate_interval": rotate}))
		if err != nil {
			t.Fatal(err)
		}
		d, err := postgres.Open(ctx, u, backend.OpenOptions{Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d.(*postgres.Driver)
	}
	idle := open("1h") // never due: it rotates nothing itself
	before, ok := postgres.LastRotation(idle, ctx)
	if !ok {
		t.Fatal("LastRotation failed")
	}
	open("50ms") // rotates
	waitRotations(t, pool, schema, 2)
	after, ok := postgres.LastRotation(idle, ctx)
	if !ok {
		t.Fatal("LastRotation failed")
	}
	if !after.After(before) {
		t.Errorf("the last rotation read by an idle driver did not move (%v, then %v) while another driver rotated", before, after)
	}
	if d := time.Since(after); d < -time.Second || d > 30*time.Second {
		t.Errorf("the last rotation was %v ago, want within the test", d)
	}
}
