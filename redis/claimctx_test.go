package redis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/redis"
)

// cancelOnClaim is a go-redis hook that, once armed, ends a context the
// moment a claim (a transaction running a script) goes out to the server.
type cancelOnClaim struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	fired  bool
}

func (h *cancelOnClaim) arm(cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancel, h.fired = cancel, false
}

func (h *cancelOnClaim) didFire() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fired
}

func (h *cancelOnClaim) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *cancelOnClaim) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (h *cancelOnClaim) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.mu.Lock()
		if h.cancel != nil {
			for _, c := range cmds {
				if strings.EqualFold(c.Name(), "evalsha") {
					h.cancel()
					h.cancel, h.fired = nil, true
					break
				}
			}
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestReceiveFinishesClaimWhenCtxEnds: a Receive whose context ends as its
// claim goes out to the server still runs the claim to its end and returns
// the message with a nil error (the portable layer gives it back), rather
// than abandoning a claim that leaves the message leased to nobody.
func TestReceiveFinishesClaimWhenCtxEnds(t *testing.T) {
	bothPaths(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		opt, err := goredis.ParseURL(e.url)
		if err != nil {
			t.Fatal(err)
		}
		rc := goredis.NewClient(opt)
		hook := &cancelOnClaim{}
		rc.AddHook(hook)
		o := redis.Options{Prefix: e.prefix, CloseClient: true}
		if e.fast {
			redis.ForceFastPath(&o)
		}
		d, err := redis.New(rc, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		c := e.client(t, redis.Options{})
		const q = "claimctx"
		for range 2 {
			if _, err := c.Enqueue(ctx, q, fila.Message{Kind: "k"}); err != nil {
				t.Fatal(err)
			}
		}
		p := backend.ReceiveParams{Max: 1, Lease: time.Minute}
		// The first Receive lets the fast path know no lease has expired.
		if ds, err := d.Receive(ctx, q, p); err != nil || len(ds) != 1 {
			t.Fatalf("first Receive: %d deliveries, %v", len(ds), err)
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		hook.arm(cancel)
		ds, err := d.Receive(rctx, q, p)
		if !hook.didFire() || rctx.Err() == nil {
			t.Fatal("the hook did not end the context at the claim; the test proves nothing")
		}
		if err != nil || len(ds) != 1 {
			t.Fatalf("Receive whose context ended as its claim went out: %d deliveries, %v; want the claimed message and no error", len(ds), err)
		}
		if errs, err := d.Ack(ctx, []backend.Ref{{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
			t.Errorf("Ack of what the claim returned: %v, %v", errs, err)
		}
		// A Receive whose context has already ended sends no claim.
		hook.arm(func() {})
		if _, err := d.Receive(rctx, q, p); !errors.Is(err, context.Canceled) {
			t.Errorf("Receive with an ended context: %v; want context.Canceled", err)
		}
		if hook.didFire() {
			t.Error("Receive with an ended context sent a claim")
		}
	})
}
