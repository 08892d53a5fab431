package redis

import (
	"context"
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis sends a command again when its reply does not come within the
// read timeout or the connection breaks after the command was written (a
// plain call or pipeline, up to MaxRetries times; a cluster client also up
// to MaxRedirects times). The command may well have run the first time, and
// the driver's scripts that write are not idempotent: a replayed ack
// reports a lease lost although the first run settled it, a replayed
// receive of the same lease consumer drops what the first run claimed, a
// replayed enqueue stores the message twice. go-redis never sends a
// MULTI/EXEC transaction again once it was written, so every script that
// writes runs through runOnce, and the clients Open builds have MaxRetries
// -1 (runDurable's pipeline with WAIT cannot be a transaction). An error
// then means the outcome is unknown, like any lost reply.

// txScripter is what runOnce needs of a client: *goredis.Client,
// *goredis.ClusterClient and goredis.UniversalClient have it.
type txScripter interface {
	goredis.Scripter
	TxPipelined(ctx context.Context, fn func(goredis.Pipeliner) error) ([]goredis.Cmder, error)
}

// runOnce runs script s in a MULTI/EXEC transaction, so that go-redis
// never runs it twice. A script missing from the server's cache (NOSCRIPT:
// it did not run) is loaded and run again.
func runOnce(ctx context.Context, c txScripter, s *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	for try := 0; ; try++ {
		var cmd *goredis.Cmd
		_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			cmd = s.EvalSha(ctx, p, keys, args...)
			return nil
		})
		if e := cmd.Err(); e != nil && try == 0 && strings.HasPrefix(e.Error(), "NOSCRIPT") {
			if err := s.Load(ctx, c).Err(); err != nil {
				return errCmd(ctx, err)
			}
			continue
		}
		if cmd.Err() == nil && err != nil && !errors.Is(err, goredis.Nil) {
			cmd.SetErr(err)
		}
		return cmd
	}
}
