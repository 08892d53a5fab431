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
	// published orders 1, 2 and 3 to topic orders
	//   ship: order 1, attempt 1: shipped
	//   ship: order 2, attempt 1: failed (warehouse busy), nacked
	//   ship: order 2, attempt 2: shipped
	//   ship: order 3, attempt 1: shipped
	//   notify: order 1 is on its way (parcel P-001)
	//   notify: order 2 is on its way (parcel P-002)
	//   notify: order 3 is on its way (parcel P-003)
	// router stopped
}
