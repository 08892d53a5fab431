//go:build !linux

package testenv

import "testing"

// CaptureStderr is only implemented on Linux; elsewhere it skips the test.
func CaptureStderr(t testing.TB) (*Buffer, func()) {
	t.Skip("testenv: capturing the standard error descriptor is implemented on Linux only")
	return nil, nil
}
