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
	// enqueued 5 jobs
	//   report 10, attempt 1: retry (warehouse busy)
	//   report 10, attempt 2: ack
	//   report 11, attempt 1: dead (report 11 does not exist)
	//   welcome mail for user 1, attempt 1: ack
	//   welcome mail for user 2, attempt 1: ack
	//   welcome mail for user 3, attempt 1: ack
	// 4 done, 1 dead-lettered; the worker stopped
	// dead letter: report.build {"report_id":11} after 1 attempt(s): report 11 does not exist
}
