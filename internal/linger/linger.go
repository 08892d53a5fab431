// Package linger gives work already sent to a server a bounded time to
// finish after its caller gave up.
//
// A claim sent to a broker runs there whatever the client does: abandoning
// it when the caller's context ends could leave what it claimed leased to
// nobody. The drivers therefore run a claim under Context, which lasts as
// long as the caller waits and a grace period more, and return what the
// claim took even when the caller's context ended meanwhile.
package linger

import (
	"context"
	"time"
)

// Context returns a context with ctx's values that ends grace after ctx
// ends (or when the returned cancel is called), and carries no deadline:
// a driver that turns a deadline into a server-side time limit sends none.
// While ctx lasts, so does the returned context, however long the server
// takes: a slow claim is waited for, not cut off and left leased.
func Context(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-lctx.Done():
		}
	})
	return lctx, func() {
		stop()
		cancel()
	}
}
