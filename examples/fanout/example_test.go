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
	// topic orders: subscriptions orders.email and orders.audit
	// published order 1: copied to 2 subscriptions
	// published order 2: copied to 2 subscriptions
	// published order 3: copied to 2 subscriptions
	//   audit: order 1, attempt 1: ack
	//   audit: order 2, attempt 1: retry (audit log busy)
	//   audit: order 2, attempt 2: ack
	//   audit: order 3, attempt 1: ack
	//   email: order 1, attempt 1: ack
	//   email: order 2, attempt 1: ack
	//   email: order 3, attempt 1: ack
	// each worker processed its own copy of every order; both stopped
}
