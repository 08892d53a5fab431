// Package faults holds Fila's process-level fault tests: real processes
// killed with SIGKILL against real brokers.
package faults
