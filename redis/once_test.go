package redis_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/redis"
)

// A reply that comes after the client's read timeout: the server ran the
// command, the client gave up on it. go-redis would send a plain command
// again; a script run twice is not run once. An ack must then report
// ErrUnavailable (the outcome is unknown), never a lease lost for a message
// it settled; a receive's claim must come back when its lease ends, not be
// dropped by a second run of the same lease consumer.
func TestLostReplyIsNotReplayed(t *testing.T) {
	raw := testenv.RedisURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	px := testenv.StartProxy(t, u.Host)
	admin, _ := rawClient(t)
	prefix := testPrefix(t, admin)
	pu := *u
	pu.Host = px.Addr()
	durl, err := url.Parse(driverURL(t, pu.String(), map[string]string{"fila_prefix": prefix, "read_timeout": "300ms"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	drv, err := redis.Open(ctx, durl, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	d := drv.(*redis.Driver)
	const stall = 1500 * time.Millisecond

	t.Run("ack", func(t *testing.T) {
		q := "lostack"
		if _, err := d.Enqueue(ctx, q, []backend.Message{msg(t, "k")}); err != nil {
			t.Fatal(err)
		}
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive = %d, %v", len(ds), err)
		}
		px.StallNext(stall)
		errs, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}})
		if err == nil && len(errs) == 1 {
			err = errs[0]
		}
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("Ack whose reply was lost = %v; want ErrUnavailable (a lease lost means the ack ran twice)", err)
		}
		st, err := d.QueueStats(ctx, q)
		if err != nil || st.Ready != 0 || st.Leased != 0 {
			t.Errorf("after the ack ran: ready %d, leased %d, %v; want nothing left", st.Ready, st.Leased, err)
		}
	})

	t.Run("receive", func(t *testing.T) {
		q := "lostreceive"
		m := msg(t, "k")
		if _, err := d.Enqueue(ctx, q, []backend.Message{m}); err != nil {
			t.Fatal(err)
		}
		px.StallNext(stall)
		ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Second})
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Receive whose reply was lost = %d deliveries, %v; want ErrUnavailable", len(ds), err)
		}
		// The claim it made comes back once its lease ends.
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ds, err = d.Receive(rctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil || len(ds) != 1 || ds[0].ID != m.ID || ds[0].Attempt != 2 {
			t.Fatalf("Receive after the lost reply's lease = %v, %v; want %s at attempt 2", ds, err, m.ID)
		}
	})
}
