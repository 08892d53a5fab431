package ui

import "time"

// SetGuardBase sets the first wait after too many wrong credentials, so a
// test need not wait a second.
func SetGuardBase(h *Handler, d time.Duration) {
	h.guard.mu.Lock()
	defer h.guard.mu.Unlock()
	h.guard.base = d
}
