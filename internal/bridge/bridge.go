// Package bridge gives the module's own packages (package relay) the few
// internals of a fila.Client they need beyond its exported API, without
// exporting them to applications. Package fila sets the hooks from its init;
// a package that imports fila reads them with Get.
//
// The hooks are generic in the client, delivery and message types because
// this package cannot import fila (fila imports it).
package bridge

import (
	"context"
	"log/slog"
	"time"

	"github.com/fila-go/fila/backend"
)

// Hooks are what package fila exposes of a Client C, its deliveries D and
// messages M.
type Hooks[C, D, M any] struct {
	// Call runs f with the client's call bookkeeping: ErrClosed after
	// Close, a context that Close cancels, and f's error mapped as the
	// client's own calls map theirs (ErrClosed for a cancellation by Close,
	// the caller's context error unwrapped).
	Call func(c C, ctx context.Context, f func(context.Context) error) error
	// Prepare checks m against the client's limits and options and returns
	// what the client's Enqueue would hand its driver.
	Prepare func(c C, m *M, now time.Time) (backend.Message, error)
	// NewDelivery wraps a delivery its driver returned (from a call made
	// under Call) as the client's own Receive would.
	NewDelivery func(c C, queue string, bd *backend.Delivery) D
	// Dedup reports whether the client's driver enforces dedup keys.
	Dedup func(c C) bool
	// Logger is the client's logger (fila.WithLogger).
	Logger func(c C) *slog.Logger
}

var hooks any

// Set installs package fila's hooks; it is called once, from fila's init.
func Set[C, D, M any](h *Hooks[C, D, M]) { hooks = h }

// Get returns the hooks Set installed. It panics when called with other
// types than package fila's, or before fila's init ran (never, for a
// package that imports fila).
func Get[C, D, M any]() *Hooks[C, D, M] { return hooks.(*Hooks[C, D, M]) }
