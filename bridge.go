package fila

import (
	"context"
	"log/slog"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/bridge"
)

// init gives package relay the internals it needs (see internal/bridge),
// so that Client does not export them.
func init() {
	bridge.Set(&bridge.Hooks[*Client, *Delivery, Message]{
		Call: func(c *Client, ctx context.Context, f func(context.Context) error) error {
			return c.call(ctx, f)
		},
		Prepare: func(c *Client, m *Message, now time.Time) (backend.Message, error) {
			return c.prepare(m, now)
		},
		NewDelivery: func(c *Client, queue string, bd *backend.Delivery) *Delivery {
			return c.newDelivery(queue, bd)
		},
		Dedup:  func(c *Client) bool { return c.dedup },
		Logger: func(c *Client) *slog.Logger { return c.opts.logger },
	})
}
