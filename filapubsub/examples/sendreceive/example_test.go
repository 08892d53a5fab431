package main

import (
	"context"
	"os"
	"time"
)

// The program on the in-memory broker.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, "fila+mem://example", os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// sent 3 greetings
	// received "hello Ada" seq=1 lang=en attempt 1
	// received "hello Grace" seq=2 lang=en attempt 1
	// received "hello Linus" seq=3 lang=en attempt 1
	// acked all and ended the subscription
}
