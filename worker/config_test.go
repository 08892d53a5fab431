package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/worker"
)

func memClient(t *testing.T) *fila.Client {
	return clientOver(t, memory.NewBroker(memory.BrokerOptions{}).Open())
}

// clientOver returns a client over drv, closed when the test ends.
func clientOver(t testing.TB, drv backend.Driver) *fila.Client {
	t.Helper()
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestNewRejectsBadConfig(t *testing.T) {
	c := memClient(t)
	ok := map[string]worker.QueueConfig{"q": {}}
	for _, tc := range []struct {
		name string
		c    *fila.Client
		cfg  worker.Config
		want string
	}{
		{"nil client", nil, worker.Config{Queues: ok}, "client is nil"},
		{"no queues", c, worker.Config{}, "Queues is empty"},
		{"bad queue name", c, worker.Config{Queues: map[string]worker.QueueConfig{"no spaces": {}}}, "queue name"},
		{"negative concurrency", c, worker.Config{Queues: map[string]worker.QueueConfig{"q": {Concurrency: -1}}}, "concurrency -1"},
		{"negative lease", c, worker.Config{Queues: ok, Lease: -time.Second}, "lease"},
		{"negative max attempts", c, worker.Config{Queues: ok, MaxAttempts: -1}, "max attempts"},
		{"negative kind max attempts", c, worker.Config{Queues: ok, Kinds: map[string]worker.KindConfig{"k": {MaxAttempts: -2}}}, `kind "k"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := worker.New(tc.c, tc.cfg)
			if err == nil || w != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error containing %q", w, err, tc.want)
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	c := memClient(t)
	w, err := worker.New(c, worker.Config{Queues: map[string]worker.QueueConfig{"q": {}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Two Runs race; whichever comes second fails at once, while the
	// other runs until ctx ends. (Waiting for the first to start by its
	// goroutines could see it inside Run before it claimed the worker, and
	// the test's own Run then ran forever.)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- w.Run(ctx) }()
	}
	select {
	case err := <-errs:
		if err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("the Run that returned first = %v; want an error saying Run was called twice", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("neither Run returned within a minute; the second should fail at once")
	}
	cancel()
	if err := <-errs; err != nil {
		t.Errorf("Run = %v after its context ended; want nil", err)
	}
}

func TestHandlePanics(t *testing.T) {
	c := memClient(t)
	w, err := worker.New(c, worker.Config{Queues: map[string]worker.QueueConfig{"q": {}}})
	if err != nil {
		t.Fatal(err)
	}
	nop := worker.HandlerFunc(func(context.Context, *fila.Delivery) error { return nil })
	w.Handle("k", nop)
	for name, f := range map[string]func(){
		"empty kind":  func() { w.Handle("", nop) },
		"nil handler": func() { w.Handle("x", nil) },
		"duplicate":   func() { w.Handle("k", nop) },
		"nil func":    func() { w.HandleFunc("y", nil) },
		"typed nil":   func() { worker.Handle[int](w, worker.Kind[int]{Name: "z"}, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Handle did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestPermanent(t *testing.T) {
	if worker.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	base := errors.New("record gone")
	err := fmt.Errorf("job 7: %w", worker.Permanent(base))
	if !worker.IsPermanent(err) || !errors.Is(err, base) || err.Error() != "job 7: record gone" {
		t.Errorf("wrapped permanent error: IsPermanent=%v Is=%v text=%q", worker.IsPermanent(err), errors.Is(err, base), err)
	}
	var pe *worker.PermanentError
	if !errors.As(err, &pe) || pe.Err != base {
		t.Error("errors.As does not find the *PermanentError")
	}
	if worker.IsPermanent(base) || worker.IsPermanent(nil) {
		t.Error("a plain error is reported permanent")
	}
}

func TestPanicErrorUnwrap(t *testing.T) {
	inner := errors.New("nil map")
	if pe := (&worker.PanicError{Value: inner}); !errors.Is(pe, inner) || pe.Error() != "panic: nil map" {
		t.Errorf("PanicError = %q; Is inner = %v", pe, errors.Is(pe, inner))
	}
	if pe := (&worker.PanicError{Value: 42}); pe.Unwrap() != nil {
		t.Error("a non-error panic value unwraps to an error")
	}
}

func TestExponentialBackoff(t *testing.T) {
	fixed := func(v float64) func() float64 { return func() float64 { return v } }
	b := worker.ExponentialBackoff{Base: 30 * time.Second, Factor: 4, Max: 10 * time.Minute, Jitter: 0.2, Rand: fixed(0)}
	var got []time.Duration
	for a := 0; a <= 6; a++ {
		got = append(got, b.Delay(a))
	}
	want := []time.Duration{30 * time.Second, 30 * time.Second, 2 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("schedule without jitter = %v; want %v", got, want)
	}
	b.Rand = fixed(0.5)
	if d := b.Delay(2); d != 108*time.Second {
		t.Errorf("attempt 2 with half the jitter = %v; want 1m48s", d)
	}
	if d := b.Delay(1 << 30); d != 9*time.Minute {
		t.Errorf("a huge attempt = %v; want the cap less half the jitter", d)
	}
	if d := (worker.ExponentialBackoff{Base: time.Second, Factor: 0.5}).Delay(5); d != time.Second {
		t.Errorf("factor below 1 = %v; want a constant 1s", d)
	}
	if d := (worker.ExponentialBackoff{}).Delay(3); d != 8*time.Minute {
		t.Errorf("zero value, attempt 3 = %v; want the default 8m", d)
	}
	// The default stays within its documented bands.
	bands := [][2]time.Duration{{24 * time.Second, 30 * time.Second}, {96 * time.Second, 2 * time.Minute},
		{384 * time.Second, 8 * time.Minute}, {8 * time.Minute, 10 * time.Minute}, {8 * time.Minute, 10 * time.Minute}}
	for i := 0; i < 1000; i++ {
		for a, band := range bands {
			if d := worker.DefaultBackoff(a + 1); d < band[0] || d > band[1] {
				t.Fatalf("DefaultBackoff(%d) = %v; want within %v", a+1, d, band)
			}
		}
	}
	if d := worker.ConstantBackoff(3 * time.Second)(9); d != 3*time.Second {
		t.Errorf("ConstantBackoff = %v", d)
	}
}

func TestKindMessage(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m, err := sendWelcomeJob.Message(sendWelcome{UserID: 7}, worker.RunAt(at), worker.DedupKey("welcome-7"),
		worker.Header("tenant", "acme"), worker.MaxAttempts(4))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != "email.welcome" || string(m.Body) != `{"user_id":7}` || !m.RunAt.Equal(at) || m.DedupKey != "welcome-7" ||
		m.Headers["tenant"] != "acme" || m.MaxAttempts != 4 {
		t.Errorf("message = %+v", m)
	}
	if m, _ := sendWelcomeJob.Message(sendWelcome{}, worker.Delay(time.Minute)); m.Delay != time.Minute {
		t.Errorf("Delay option: %+v", m)
	}
	if _, err := (worker.Kind[chan int]{Name: "bad"}).Message(make(chan int)); err == nil {
		t.Error("encoding a channel succeeded")
	}
	if _, err := sendWelcomeJob.Decode(&fila.Delivery{ID: "x", Body: []byte(`{"user_id":"seven"}`)}); err == nil {
		t.Error("decoding a bad body succeeded")
	}
}

func TestLoggerOutsideJob(t *testing.T) {
	if worker.Logger(context.Background()) != slog.Default() {
		t.Error("Logger outside a job is not slog.Default()")
	}
}
