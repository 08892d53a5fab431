package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/memory"
	"github.com/fila-go/fila/relay"
)

func newMem(t *testing.T) (*memory.Broker, *fila.Client) {
	t.Helper()
	b := memory.NewBroker(memory.BrokerOptions{})
	c, err := fila.New(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return b, c
}

// collect receives n messages from q, acking them.
func collect(t *testing.T, c *fila.Client, q string, n int) map[string]*fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[string]*fila.Delivery{}
	for len(got) < n {
		ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 100})
		if err != nil {
			t.Fatalf("have %d of %d: %v", len(got), n, err)
		}
		for _, d := range ds {
			src := d.Headers[relay.HeaderSourceID]
			if _, dup := got[src]; dup {
				t.Errorf("source message %s arrived twice", src)
			}
			got[src] = d
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	if ds, err := c.Receive(short, q, fila.ReceiveParams{Max: 100}); err == nil {
		t.Errorf("%d unexpected extra messages on the target", len(ds))
	}
	return got
}

func TestRelayMovesEverythingOnce(t *testing.T) {
	_, from := newMem(t)
	_, to := newMem(t)
	ctx := context.Background()
	const n = 1000
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k", Body: []byte(fmt.Sprint(i)), Headers: map[string]string{"i": fmt.Sprint(i)}}
	}
	ids, err := from.EnqueueBatch(ctx, "src", msgs)
	if err != nil {
		t.Fatal(err)
	}
	var progress atomic.Int64
	r := &relay.Relay{From: from, FromQueue: "src", To: to, ToQueue: "dst", Batch: 64, Concurrency: 3,
		StopWhenIdle: 200 * time.Millisecond, Progress: func(s relay.Stats) { progress.Store(s.Total()) }}
	st, err := r.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st.Moved != n || progress.Load() != n {
		t.Errorf("moved %d (progress %d), want %d", st.Moved, progress.Load(), n)
	}
	got := collect(t, to, "dst", n)
	for i, id := range ids {
		d := got[id]
		if d == nil {
			t.Fatalf("message %d (%s) lost", i, id)
		}
		if string(d.Body) != fmt.Sprint(i) || d.Headers["i"] != fmt.Sprint(i) || d.Kind != "k" || d.Attempt != 1 {
			t.Errorf("message %d changed: %q %v %q attempt %d", i, d.Body, d.Headers, d.Kind, d.Attempt)
		}
	}
	st2, _ := from.QueueStats(ctx, "src")
	if st2.Ready+st2.Leased != 0 {
		t.Errorf("source not empty after the relay: %+v", st2)
	}
}

func TestRelayCarriesAttemptsDelaysAndDeadLetters(t *testing.T) {
	_, from := newMem(t)
	_, to := newMem(t)
	ctx := context.Background()
	retried, _ := from.Enqueue(ctx, "q", fila.Message{Kind: "retried", MaxAttempts: 5})
	ds, _ := from.Receive(ctx, "q", fila.ReceiveParams{})
	ds[0].Retry(ctx, 0, "flaky")
	runAt := time.Now().Add(time.Hour)
	delayed, _ := from.Enqueue(ctx, "q", fila.Message{Kind: "later", RunAt: runAt, DedupKey: "once"})
	deadID, _ := from.Enqueue(ctx, "q", fila.Message{Kind: "bad"})
	for {
		ds, _ = from.Receive(ctx, "q", fila.ReceiveParams{})
		if ds[0].ID == deadID {
			ds[0].Dead(ctx, "unparseable")
			break
		}
		ds[0].Release(ctx)
	}

	r := &relay.Relay{From: from, FromQueue: "q", To: to, IncludeDelayed: true, IncludeDead: true, StopWhenIdle: 100 * time.Millisecond}
	st, err := r.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st.Moved != 1 || st.Delayed != 1 || st.Dead != 1 {
		t.Errorf("stats %+v, want 1 moved, 1 delayed, 1 dead", st)
	}
	d := collect(t, to, "q", 1)[retried]
	if d == nil || d.Attempt < 2 || d.LastError != "" || d.MaxAttempts != 5 {
		t.Errorf("retried message on the target: %+v; want its attempt count carried and max attempts 5", d)
	}
	tst, _ := to.QueueStats(ctx, "q")
	if tst.Delayed != 1 || tst.Dead != 1 {
		t.Errorf("target stats %+v, want 1 delayed and 1 dead", tst)
	}
	_, err = to.Enqueue(ctx, "q", fila.Message{Kind: "later", DedupKey: "once"})
	if !errors.Is(err, fila.ErrDuplicate) {
		t.Errorf("the delayed message's dedup key did not carry over: %v", err)
	}
	page, _ := to.DeadList(ctx, "q", fila.DeadListParams{})
	if len(page.Letters) != 1 || page.Letters[0].ID != deadID || page.Letters[0].Reason != "unparseable" {
		t.Errorf("dead letters on the target: %+v", page.Letters)
	}
	if sst, _ := from.QueueStats(ctx, "q"); sst.Ready+sst.Delayed+sst.Leased+sst.Dead != 0 {
		t.Errorf("source not empty: %+v", sst)
	}
	_ = delayed
}

// A dead letter moves with its error history as the source stored it.
func TestRelayKeepsDeadLetterErrors(t *testing.T) {
	_, from := newMem(t)
	_, to := newMem(t)
	ctx := context.Background()
	id, err := from.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"e1", "e2\nsecond line", ""} {
		ds, err := from.Receive(ctx, "q", fila.ReceiveParams{})
		if err != nil {
			t.Fatal(err)
		}
		if reason == "" {
			err = ds[0].Dead(ctx, "final")
		} else {
			err = ds[0].Retry(ctx, 0, reason)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	raw := func(c *fila.Client) string {
		t.Helper()
		page, err := c.Driver().(backend.DeadLetterer).DeadList(ctx, "q", backend.DeadListParams{Limit: 10})
		if err != nil || len(page.Letters) != 1 {
			t.Fatalf("DeadList = %+v, %v", page, err)
		}
		return page.Letters[0].Reason
	}
	stored := raw(from)
	r := &relay.Relay{From: from, FromQueue: "q", To: to, IncludeDead: true, StopWhenIdle: 100 * time.Millisecond}
	if _, err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := raw(to); got != stored {
		t.Errorf("the target stores the dead letter's reason as %q, want the source's %q", got, stored)
	}
	page, err := to.DeadList(ctx, "q", fila.DeadListParams{})
	if err != nil || len(page.Letters) != 1 {
		t.Fatalf("DeadList = %+v, %v", page, err)
	}
	l := page.Letters[0]
	if l.ID != id || l.Reason != "final" || len(l.Errors) != 2 || l.Errors[0].Reason != "e1" || l.Errors[0].Attempt != 1 ||
		l.Errors[1].Reason != "e2\nsecond line" || l.Errors[1].Attempt != 2 {
		t.Errorf("the moved dead letter: reason %q, errors %+v", l.Reason, l.Errors)
	}
}

// flakyAck fails the first Ack after enqueue succeeded on the target, as a
// relay crashing between enqueue and ack would leave things.
type flakyAck struct {
	backend.Driver
	failures atomic.Int32
}

func (f *flakyAck) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, errors.New("connection reset")
	}
	return f.Driver.Ack(ctx, refs)
}

func TestRelayCrashBetweenEnqueueAndAckDuplicatesNothing(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	drv := &flakyAck{Driver: b.Open()}
	drv.failures.Store(2)
	from, err := fila.New(drv, fila.WithLease(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	_, to := newMem(t)
	ctx := context.Background()
	const n = 50
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k"}
	}
	if _, err := from.EnqueueBatch(ctx, "q", msgs); err != nil {
		t.Fatal(err)
	}
	r := &relay.Relay{From: from, FromQueue: "q", To: to, Batch: 20, Lease: 50 * time.Millisecond, StopWhenIdle: 500 * time.Millisecond}
	st, err := r.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st.Duplicates == 0 {
		t.Errorf("stats %+v: the re-moved batches should have been refused as duplicates", st)
	}
	collect(t, to, "q", n) // fails on any message arriving twice
}

// bare hides every optional capability of a driver.
type bare struct{ backend.Driver }

func TestRelayRefusesWhatTheDriversCannotDo(t *testing.T) {
	b := memory.NewBroker(memory.BrokerOptions{})
	from, err := fila.New(bare{b.Open()})
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	_, to := newMem(t)
	ctx := context.Background()
	for _, r := range []*relay.Relay{
		{From: from, FromQueue: "q", To: to, IncludeDelayed: true},
		{From: from, FromQueue: "q", To: to, IncludeDead: true},
		{From: to, FromQueue: "q", To: from, IncludeDead: true},
	} {
		if _, err := r.Run(ctx); !errors.Is(err, fila.ErrUnsupported) {
			t.Errorf("Run(%+v) = %v, want ErrUnsupported", r, err)
		}
	}
	for _, r := range []*relay.Relay{
		{From: from, FromQueue: "", To: to},
		{From: to, FromQueue: "q", To: to},
		{From: nil, FromQueue: "q", To: to},
	} {
		if _, err := r.Run(ctx); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Run(%+v) = %v, want ErrInvalid", r, err)
		}
	}
}

func TestRelayOutboxRunsUntilCancelled(t *testing.T) {
	_, from := newMem(t)
	_, to := newMem(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := (&relay.Relay{From: from, FromQueue: "outbox", To: to, ToQueue: "events"}).Run(ctx)
		done <- err
	}()
	id, _ := from.Enqueue(context.Background(), "outbox", fila.Message{Kind: "order.created"})
	if got := collect(t, to, "events", 1); got[id] == nil {
		t.Fatalf("outbox message %s not relayed", id)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("outbox relay ended with %v, want nil after cancellation", err)
	}
}

// stopDuring wraps a target driver: its Enqueue calls stop (ending the
// relay's context) and then fails with fail, or stores the batch, noting
// whether the context it was given had ended.
type stopDuring struct {
	backend.Driver
	stop     func()
	fail     error
	cutShort atomic.Bool
}

func (s *stopDuring) Enqueue(ctx context.Context, q string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	s.stop()
	if s.fail != nil {
		return nil, s.fail
	}
	if ctx.Err() != nil {
		s.cutShort.Store(true)
	}
	return s.Driver.Enqueue(ctx, q, msgs)
}

func TestRelayStoppedMidBatchFinishesIt(t *testing.T) {
	_, from := newMem(t)
	ctx, cancel := context.WithCancel(context.Background())
	drv := &stopDuring{Driver: memory.NewBroker(memory.BrokerOptions{}).Open(), stop: cancel}
	to, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	if _, err := from.EnqueueBatch(context.Background(), "q", []fila.Message{{Kind: "a"}, {Kind: "b"}}); err != nil {
		t.Fatal(err)
	}
	st, err := (&relay.Relay{From: from, FromQueue: "q", To: to, Batch: 10}).Run(ctx)
	if err != nil {
		t.Fatalf("an outbox relay stopped by its context returned %v, want nil", err)
	}
	if drv.cutShort.Load() {
		t.Error("the stop cut the batch's enqueue short")
	}
	s, _ := from.QueueStats(context.Background(), "q")
	if st.Moved != 2 || s.Ready+s.Leased != 0 {
		t.Errorf("stats %+v, source %+v; want the batch in hand moved and acked despite the stop", st, s)
	}
}

func TestRelayGivesBackABatchItCannotMove(t *testing.T) {
	_, from := newMem(t)
	down := errors.New("broker down")
	to, err := fila.New(&stopDuring{Driver: memory.NewBroker(memory.BrokerOptions{}).Open(), stop: func() {}, fail: down})
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	if _, err := from.EnqueueBatch(context.Background(), "q", []fila.Message{{Kind: "a"}, {Kind: "b"}}); err != nil {
		t.Fatal(err)
	}
	// A long lease: only a release makes the batch ready again soon.
	_, err = (&relay.Relay{From: from, FromQueue: "q", To: to, Batch: 10, Lease: time.Hour}).Run(context.Background())
	if !errors.Is(err, down) {
		t.Fatalf("Run = %v, want the target's error", err)
	}
	if s, _ := from.QueueStats(context.Background(), "q"); s.Ready != 2 || s.Leased != 0 {
		t.Errorf("source %+v; want the batch given back, ready at once", s)
	}
}

func TestRelaySecondHopKeepsTheFirstSourceID(t *testing.T) {
	_, a := newMem(t)
	_, b := newMem(t)
	_, c := newMem(t)
	ctx := context.Background()
	id, _ := a.Enqueue(ctx, "q", fila.Message{Kind: "k"})
	for _, hop := range []*relay.Relay{{From: a, FromQueue: "q", To: b}, {From: b, FromQueue: "q", To: c}} {
		hop.StopWhenIdle = 100 * time.Millisecond
		if _, err := hop.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := collect(t, c, "q", 1); got[id] == nil {
		t.Errorf("after two hops the message does not carry its first id %s: %v", id, got)
	}
}

// TestRelayCarriesPriorities: fila migrate keeps each message's level, for
// ready and delayed messages and dead letters alike.
func TestRelayCarriesPriorities(t *testing.T) {
	_, from := newMem(t)
	_, to := newMem(t)
	ctx := context.Background()
	deadID, err := from.Enqueue(ctx, "q", fila.Message{Kind: "bad", Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := from.Receive(ctx, "q", fila.ReceiveParams{})
	if err != nil || ds[0].ID != deadID {
		t.Fatalf("Receive = %v, %v; want the message to dead-letter", ds, err)
	}
	if err := ds[0].Dead(ctx, "unparseable"); err != nil {
		t.Fatal(err)
	}
	ready, _ := from.Enqueue(ctx, "q", fila.Message{Kind: "ready", Priority: 2})
	delayed, _ := from.Enqueue(ctx, "q", fila.Message{Kind: "later", Priority: 3, Delay: time.Hour})
	r := &relay.Relay{From: from, FromQueue: "q", To: to, IncludeDelayed: true, IncludeDead: true, StopWhenIdle: 100 * time.Millisecond}
	if st, err := r.Run(ctx); err != nil || st.Moved != 1 || st.Delayed != 1 || st.Dead != 1 {
		t.Fatalf("Run = %+v, %v; want 1 moved, 1 delayed, 1 dead", st, err)
	}
	if d := collect(t, to, "q", 1)[ready]; d == nil || d.Priority != 2 {
		t.Errorf("the ready message on the target: %+v; want level 2", d)
	}
	bds, err := to.Driver().(backend.DelayedReceiver).ReceiveDelayed(ctx, "q", backend.ReceiveParams{Max: 10, Lease: time.Minute})
	if err != nil || len(bds) != 1 || bds[0].Priority != 3 {
		t.Errorf("the delayed message on the target: %+v, %v; want it at level 3", bds, err)
	} else if bds[0].Headers[relay.HeaderSourceID] != delayed {
		t.Errorf("the delayed message on the target came from %s, want %s", bds[0].Headers[relay.HeaderSourceID], delayed)
	}
	page, err := to.DeadList(ctx, "q", fila.DeadListParams{})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].Priority != 1 {
		t.Errorf("dead letters on the target: %+v, %v; want one at level 1", page.Letters, err)
	}
}
