package linger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fila-go/fila/internal/linger"
)

type key struct{}

func TestOutlivesItsCaller(t *testing.T) {
	parent, stopParent := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Hour)
	ctx, cancel := linger.Context(parent, 50*time.Millisecond)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Error("the context carries a deadline")
	}
	if ctx.Value(key{}) != "v" {
		t.Error("the context lost its parent's values")
	}
	if ctx.Err() != nil {
		t.Fatalf("ended before its caller: %v", ctx.Err())
	}
	ended := time.Now()
	stopParent()
	if ctx.Err() != nil {
		t.Fatal("ended with its caller, before the grace period")
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("did not end within 10s of its caller")
	}
	if d := time.Since(ended); d < 50*time.Millisecond {
		t.Errorf("ended %v after its caller; want at least the 50ms grace", d)
	}
}

func TestLastsWhileItsCallerWaits(t *testing.T) {
	parent, stopParent := context.WithCancel(context.Background())
	defer stopParent()
	ctx, cancel := linger.Context(parent, time.Millisecond)
	// A caller that waits longer than the grace period keeps the context.
	select {
	case <-ctx.Done():
		t.Fatal("ended while its caller waits")
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel did not end it")
	}
}
