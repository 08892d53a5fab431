package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// controlInterval is the control interval of the clients of the job
// control tests (fila.WithControlInterval): pauses must reach them within
// twice that, cancels within it.
const controlInterval = 100 * time.Millisecond

// deadReasons returns the dead letters of q by id with their reasons.
func deadReasons(t *testing.T, c *fila.Client, q string) map[string]string {
	t.Helper()
	out := map[string]string{}
	cursor := ""
	for {
		page, err := c.DeadList(ctxTimeout(t, 30*time.Second), q, fila.DeadListParams{Limit: 100, Cursor: cursor})
		if err != nil {
			t.Fatalf("DeadList(%s): %v", q, err)
		}
		for _, l := range page.Letters {
			out[l.ID] = l.Reason
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// testPause: a paused queue hands out nothing to any client, receivers
// already waiting included, while enqueues and settlements go on; resuming
// delivers what waited (contract: job-control).
func (s *suite) testPause(t *testing.T) {
	admin := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	if !s.has(FeatureMarks) {
		wantErr(t, "QueuePause on a driver without marks", admin.QueuePause(ctx, q), fila.ErrUnsupported)
		s.need(t, FeatureMarks)
	}
	c := s.client(t, fila.WithControlInterval(controlInterval))
	held := enqueue(t, admin, q, fila.Message{Kind: "held"})
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if d.ID != held {
		t.Fatalf("received %s, want %s", d.ID, held)
	}
	// A receiver waits on the empty queue when the pause comes. Whether
	// it has seen the pause can be observed only through a cancel (the
	// refresh that sees a cancel made after the pause sees the pause), so
	// that part needs listable marks.
	type result struct {
		ds  []*fila.Delivery
		err error
	}
	waitingLister := s.has(FeatureMarkList)
	waiting := make(chan result, 1)
	if waitingLister {
		go func() {
			ds, err := c.Receive(ctxTimeout(t, 30*time.Second), q, fila.ReceiveParams{Max: 10, Lease: time.Minute})
			waiting <- result{ds, err}
		}()
	}
	if err := admin.QueuePause(ctx, q); err != nil {
		t.Fatalf("QueuePause: %v", err)
	}
	if err := admin.QueuePause(ctx, q); err != nil {
		t.Errorf("QueuePause of a paused queue: %v", err)
	}
	if p, err := c.QueuePaused(ctx, q); err != nil || !p {
		t.Errorf("QueuePaused from another client = %v, %v; want true", p, err)
	}
	if waitingLister {
		if err := admin.MessageCancel(ctx, q, held); err != nil {
			t.Fatalf("MessageCancel: %v", err)
		}
		select {
		case <-d.Cancelled():
		case <-time.After(30 * time.Second):
			t.Fatalf("the waiting client did not see a cancel made after the pause")
		}
	}
	during := enqueue(t, admin, q, fila.Message{Kind: "during"})
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack of a delivery leased before the pause: %v", err)
	}
	if waitingLister {
		select {
		case r := <-waiting:
			t.Fatalf("a receiver waiting when the queue was paused returned %d deliveries, %v; want it to wait", len(r.ds), r.err)
		case <-time.After(time.Second):
		}
	}
	s.expectNone(t, s.client(t, fila.WithControlInterval(controlInterval)), q, time.Second, "a fresh client on a paused queue")
	if err := admin.QueueResume(ctx, q); err != nil {
		t.Fatalf("QueueResume: %v", err)
	}
	if p, err := c.QueuePaused(ctx, q); err != nil || p {
		t.Errorf("QueuePaused after QueueResume = %v, %v; want false", p, err)
	}
	if waitingLister {
		select {
		case r := <-waiting:
			if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != during {
				t.Fatalf("after QueueResume the waiting receiver got %d deliveries, %v; want %s", len(r.ds), r.err, during)
			}
		case <-time.After(2*controlInterval + s.afterNone()):
			t.Fatalf("the waiting receiver got nothing after QueueResume")
		}
	} else if got := receiveOne(t, c, q, time.Minute, 2*controlInterval+s.afterNone()); got.ID != during {
		t.Fatalf("after QueueResume received %s, want %s", got.ID, during)
	}
	if err := admin.QueueResume(ctx, q); err != nil {
		t.Errorf("QueueResume of a queue that is not paused: %v", err)
	}
}

// testCancel: a cancelled ready or delayed message is dead-lettered with
// reason "cancelled" instead of being handed out; a cancelled leased one
// tells its holder, and its retry dead-letters it with ErrCancelled (contract: job-control).
func (s *suite) testMessageCancel(t *testing.T) {
	admin := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	if !s.has(FeatureMarkList) {
		wantErr(t, "MessageCancel on a driver without listable marks", admin.MessageCancel(ctx, q, "x"), fila.ErrUnsupported)
		s.need(t, FeatureMarkList)
	}
	s.need(t, FeatureDeadLetters)
	c := s.client(t, fila.WithControlInterval(controlInterval))
	ready := enqueue(t, admin, q, fila.Message{Kind: "ready"})
	keep := enqueue(t, admin, q, fila.Message{Kind: "keep"})
	delayed := enqueue(t, admin, q, fila.Message{Kind: "delayed", Delay: time.Second})
	for _, id := range []string{ready, delayed, "0000-no-such-message"} {
		if err := admin.MessageCancel(ctx, q, id); err != nil {
			t.Fatalf("MessageCancel(%s): %v", id, err)
		}
	}
	wantErr(t, "MessageCancel with an empty id", admin.MessageCancel(ctx, q, ""), fila.ErrInvalid)
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if d.ID != keep {
		t.Fatalf("received %s (kind %s), want only %s: a cancelled message was handed out", d.ID, d.Kind, keep)
	}
	// The delayed one comes due and is dead-lettered, not handed out.
	s.expectNone(t, c, q, time.Second+s.h.RedeliveryBound, "a cancelled delayed message after its run-at")

	// A leased message: its holder hears of the cancel, and Retry
	// dead-letters it.
	select {
	case <-d.Cancelled():
		t.Fatalf("Cancelled closed for a message nobody cancelled")
	default:
	}
	if err := admin.MessageCancel(ctx, q, keep); err != nil {
		t.Fatalf("MessageCancel of a leased message: %v", err)
	}
	select {
	case <-d.Cancelled():
	case <-time.After(2*controlInterval + 5*time.Second):
		t.Fatalf("the holder's Delivery.Cancelled did not close after MessageCancel")
	}
	wantErr(t, "Retry of a cancelled delivery", d.Retry(ctx, 0, "boom"), fila.ErrCancelled)
	s.expectNone(t, c, q, s.h.RedeliveryBound, "a cancelled message after its Retry")
	reasons := deadReasons(t, admin, q)
	for _, id := range []string{ready, delayed, keep} {
		if reasons[id] != fila.ReasonCancelled {
			t.Errorf("dead letter of cancelled message %s: reason %q, want %q", id, reasons[id], fila.ReasonCancelled)
		}
	}
	if len(reasons) != 3 {
		t.Errorf("%d dead letters, want 3: %v", len(reasons), reasons)
	}
	// An Ack after a cancel still acks.
	late := enqueue(t, admin, q, fila.Message{Kind: "late"})
	d = receiveOne(t, c, q, time.Minute, 10*time.Second)
	if err := admin.MessageCancel(ctx, q, late); err != nil {
		t.Fatalf("MessageCancel: %v", err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("Ack of a delivery cancelled while leased: %v", err)
	}
	s.expectNone(t, c, q, s.h.RedeliveryBound, "an acked message cancelled while leased")
}

// testCancelRace: cancels racing receivers: every message ends once,
// either handled and acked or dead-lettered as cancelled, and none that was
// cancelled before the receivers started is handled (contract: job-control).
func (s *suite) testCancelRace(t *testing.T) {
	s.need(t, FeatureMarkList)
	s.need(t, FeatureDeadLetters)
	admin := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const n = 60
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "race", Body: []byte(fmt.Sprint(i))}
	}
	ids, err := admin.EnqueueBatch(ctx, q, msgs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	early := map[string]bool{}
	for i := 0; i < n; i += 6 {
		if err := admin.MessageCancel(ctx, q, ids[i]); err != nil {
			t.Fatalf("MessageCancel: %v", err)
		}
		early[ids[i]] = true
	}
	var mu sync.Mutex
	handled := map[string]int{}
	var wg sync.WaitGroup
	receivers := 3
	if !s.has(FeatureConcurrentClaims) {
		receivers = 1 // competing receivers would race each other, not the cancels
	}
	// The receivers run until every message is accounted for (handled, or
	// dead-lettered by a claim), not until an idle spell: a slow broker
	// then fails nothing but the test's overall deadline.
	rctx, stopReceivers := context.WithCancel(ctx)
	defer stopReceivers()
	for range receivers {
		c := s.client(t, fila.WithControlInterval(controlInterval))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := c.Receive(rctx, q, fila.ReceiveParams{Max: 5, Lease: time.Minute})
				if err != nil {
					return
				}
				for _, d := range ds {
					mu.Lock()
					handled[d.ID]++
					mu.Unlock()
					if err := d.Ack(ctx); err != nil {
						t.Errorf("Ack: %v", err)
					}
				}
			}
		}()
	}
	for i := 3; i < n; i += 6 { // cancels while the receivers run
		if err := admin.MessageCancel(ctx, q, ids[i]); err != nil {
			t.Errorf("MessageCancel: %v", err)
		}
	}
	for ctx.Err() == nil {
		mu.Lock()
		h := len(handled)
		mu.Unlock()
		if h+len(deadReasons(t, admin, q)) >= n {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopReceivers()
	wg.Wait()
	reasons := deadReasons(t, admin, q)
	for _, id := range ids {
		h, dead := handled[id], reasons[id] != ""
		switch {
		case h > 1:
			t.Errorf("message %s handled %d times", id, h)
		case h == 1 && dead:
			t.Errorf("message %s both handled and dead-lettered (%q)", id, reasons[id])
		case h == 0 && !dead:
			t.Errorf("message %s neither handled nor dead-lettered", id)
		case early[id] && h > 0:
			t.Errorf("message %s, cancelled before any receiver started, was handled", id)
		case dead && reasons[id] != fila.ReasonCancelled:
			t.Errorf("message %s dead-lettered with reason %q", id, reasons[id])
		}
	}
}

// testUniqueFor: a dedup key with a unique period stays held after its
// message completed, until the period ends (contract: job-control).
func (s *suite) testUniqueFor(t *testing.T) {
	s.need(t, FeatureDedup)
	c := s.client(t)
	q := s.queue(t)
	ctx := ctxTimeout(t, 60*time.Second)
	if !s.has(FeatureMarks) {
		_, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", DedupKey: "x", UniqueFor: time.Second})
		wantErr(t, "UniqueFor on a driver without marks", err, fila.ErrUnsupported)
		s.need(t, FeatureMarks)
	}
	_, err := c.Enqueue(ctx, q, fila.Message{Kind: "k", UniqueFor: time.Second})
	wantErr(t, "UniqueFor without a dedup key", err, fila.ErrInvalid)
	if s.has(FeatureTxEnqueue) {
		tx, err := s.h.BeginTx(ctx)
		if err != nil {
			t.Fatalf("BeginTx: %v", err)
		}
		_, err = c.EnqueueTx(ctx, tx.Value, q, []fila.Message{{Kind: "k", DedupKey: "tx", UniqueFor: time.Second}})
		wantErr(t, "EnqueueTx with UniqueFor", err, fila.ErrInvalid)
		_ = tx.Rollback(ctx)
	}
	const period = 2 * time.Second
	start := time.Now()
	id := enqueue(t, c, q, fila.Message{Kind: "report", DedupKey: "daily", UniqueFor: period})
	_, err = c.Enqueue(ctx, q, fila.Message{Kind: "report", DedupKey: "daily", UniqueFor: period})
	wantErr(t, "second enqueue while the first is pending", err, fila.ErrDuplicate)
	d := receiveOne(t, c, q, time.Minute, 10*time.Second)
	if d.ID != id {
		t.Fatalf("received %s, want %s", d.ID, id)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	// Within the period the key stays held. On a slow machine the period
	// may end before an enqueue runs: the enqueue is then stored, which is
	// right only if the period can have ended, and the new message holds
	// the key again, so that store is what shows the key was freed.
	freed := false
	stored := func(what string, after time.Duration) {
		t.Helper()
		if after < period-earlyTolerance {
			t.Errorf("%s: stored %v into a %v period", what, after, period)
		}
		freed = true
	}
	_, err = c.Enqueue(ctx, q, fila.Message{Kind: "report", DedupKey: "daily", UniqueFor: period})
	var de *fila.DuplicateError
	switch {
	case err == nil:
		stored("enqueue after the ack", time.Since(start))
	case !errors.As(err, &de) || de.ID != "":
		t.Errorf("enqueue after the ack, within the period: want a *DuplicateError with an empty ID, got %v", err)
	}
	// In a batch: the held key and a new one twice; the new one is stored
	// once.
	batch := []fila.Message{
		{Kind: "report", DedupKey: "weekly", UniqueFor: period},
		{Kind: "report", DedupKey: "weekly", UniqueFor: period},
	}
	if !freed {
		batch = append([]fila.Message{{Kind: "report", DedupKey: "daily", UniqueFor: period}}, batch...)
	}
	ids, err := c.EnqueueBatch(ctx, q, batch)
	if n := len(ids); !errors.Is(err, fila.ErrDuplicate) || n != len(batch) || ids[n-2] == "" || ids[n-1] != "" {
		t.Errorf("batch [(daily) weekly weekly] = %q, %v; want the first weekly stored, the second refused, and ErrDuplicate", ids, err)
	} else if !freed && ids[0] != "" {
		stored("the held key in a batch", time.Since(start))
	}
	if freed {
		return
	}
	// After the period the key is free: an enqueue that starts later than
	// RedeliveryBound after it must be stored. One that starts earlier may
	// be refused however long it runs, as the broker may have checked the
	// key before the period ended.
	deadline := start.Add(period + s.h.RedeliveryBound)
	for {
		began := time.Now()
		_, err := c.Enqueue(ctx, q, fila.Message{Kind: "report", DedupKey: "daily", UniqueFor: period})
		if err == nil {
			break
		}
		if !errors.Is(err, fila.ErrDuplicate) {
			t.Fatalf("Enqueue after the period: %v", err)
		}
		if began.After(deadline) {
			t.Fatalf("the key was still held %v after its period: an enqueue started %v after the period and taking %v got %v",
				s.h.RedeliveryBound, began.Sub(start.Add(period)), time.Since(began), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if early := start.Add(period).Sub(time.Now()); early > earlyTolerance {
		t.Errorf("the key was free %v before its period ended", early)
	}
}
