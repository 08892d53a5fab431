package testenv

import (
	"io"
	"os"
	"syscall"
	"testing"
)

// CaptureStderr sends what the process writes to its standard error file
// descriptor (2) — the standard log package, and libraries that made their
// own logger over os.Stderr — to the returned buffer, until the returned
// function is called (or the test ends). Tests using it must not run in
// parallel with others.
func CaptureStderr(t testing.TB) (*Buffer, func()) {
	t.Helper()
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatalf("testenv: dup stderr: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("testenv: pipe: %v", err)
	}
	if err := syscall.Dup3(int(w.Fd()), 2, 0); err != nil {
		t.Fatalf("testenv: redirect stderr: %v", err)
	}
	var b Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(&b, r)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Dup3(saved, 2, 0)
		_ = syscall.Close(saved)
		_ = w.Close()
		<-done
		_ = r.Close()
	}
	t.Cleanup(stop)
	return &b, stop
}
