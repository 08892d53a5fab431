package main

import (
	"io"
	"os"
)

// The story on the in-memory broker.
func Example() {
	if err := run("mem://", os.Stdout, io.Discard); err != nil {
		panic(err)
	}
	// Output:
	// broker mem://
	// workflow album-2026: 200 thumbnails, then the album
	// album 2026: 200 thumbnails, thumb-001.jpg to thumb-200.jpg
	// steps: 201 done, 0 pending, 0 ready, 0 running, 0 dead; done: true
}
