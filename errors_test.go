package fila_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fila-go/fila"
)

// TestErrorClassesAreDistinct: a caller decides retry or not by errors.Is,
// so no class may match another; in particular ErrAccessDenied (do not
// retry) is neither ErrUnavailable (retry) nor ErrInvalid.
func TestErrorClassesAreDistinct(t *testing.T) {
	classes := map[string]error{
		"ErrClosed": fila.ErrClosed, "ErrLeaseLost": fila.ErrLeaseLost, "ErrDuplicate": fila.ErrDuplicate,
		"ErrInvalid": fila.ErrInvalid, "ErrTooLarge": fila.ErrTooLarge, "ErrUnsupported": fila.ErrUnsupported,
		"ErrUnavailable": fila.ErrUnavailable, "ErrAccessDenied": fila.ErrAccessDenied,
		"ErrQueueNotEmpty": fila.ErrQueueNotEmpty,
		"context.Canceled": context.Canceled, "context.DeadlineExceeded": context.DeadlineExceeded,
	}
	for an, a := range classes {
		for bn, b := range classes {
			if an != bn && errors.Is(a, b) {
				t.Errorf("errors.Is(%s, %s) is true", an, bn)
			}
		}
	}
}
