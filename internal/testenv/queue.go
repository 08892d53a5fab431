package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// CleanupQueue deletes queue on c, with everything in it, when the test
// ends, so tests leave no queues behind on the broker (RabbitMQ stops
// answering when thousands pile up). Register it after the client's own
// cleanup, so it runs while c is open; a client the test closed itself is
// skipped.
func CleanupQueue(t testing.TB, c *fila.Client, queue string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.QueueDelete(ctx, queue, fila.QueueDeleteParams{Force: true})
		if err != nil && !errors.Is(err, fila.ErrClosed) {
			t.Logf("cleanup: QueueDelete(%s): %v", queue, err)
		}
	})
}
