package testenv

import (
	"bytes"
	"log"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// CaptureStdLog sends the standard log package's output (and so
// slog.Default()'s, while its handler is the default one) to the returned
// buffer until the test ends. Tests using it must not run in parallel with
// others.
func CaptureStdLog(t testing.TB) *Buffer {
	t.Helper()
	var b Buffer
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(&b)
	t.Cleanup(func() {
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	})
	return &b
}
