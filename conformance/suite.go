package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// earlyTolerance absorbs the difference between the test's clock and the
// broker's when checking that something did not happen too early.
const earlyTolerance = 100 * time.Millisecond

type suite struct {
	h Harness
	// wfMu runs the workflow tests one at a time on a stand-in server
	// (see needWorkflows).
	wfMu sync.Mutex
}

// Run runs the whole suite against the driver h opens. Its subtests run
// concurrently.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("conformance: Harness.Open is nil")
	}
	h.defaults()
	s := &suite{h: h}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"FeaturesMatchDriver", s.testFeatures},
		{"RoundTrip", s.testRoundTrip},
		{"Visibility", s.testVisibility},
		{"LeaseExpiryRedelivers", s.testLeaseExpiry},
		{"ShortLeaseNeverStealsLongLease", s.testShortLeaseDoesNotSteal},
		{"ExtendKeepsInvisible", s.testExtend},
		{"StaleReceiptsAreFenced", s.testStaleReceipts},
		{"LeaseEndsAtDeadline", s.testLeaseEndsAtDeadline},
		{"DoubleSettleIsLeaseLost", s.testDoubleSettle},
		{"AckIsFinal", s.testAckIsFinal},
		{"RetryDelayNotEarlyNotLost", s.testRetry},
		{"ReleaseRedeliversAtOnce", s.testRelease},
		{"DeadIsNeverRedelivered", s.testDead},
		{"MaxAttemptsAfterCrashes", s.testMaxAttemptsCrash},
		{"MaxAttemptsAfterRetries", s.testMaxAttemptsRetry},
		{"ErrorHistory", s.testErrorHistory},
		{"DelayNotEarly", s.testDelay},
		{"ShortDelayNotHeldByLongDelay", s.testShortDelayNotHeld},
		{"DedupKeys", s.testDedup},
		{"Batches", s.testBatches},
		{"BatchWithInvalidMessageStoresNothing", s.testBadBatch},
		{"CompetingConsumers", s.testCompeting},
		{"QueuesAreIsolated", s.testIsolation},
		{"WakeUpAfterEnqueue", s.testWakeUp},
		{"ReleaseWakesOtherReceivers", s.testReleaseWakesOthers},
		{"CancelledReceiveReturnsPromptly", s.testCancel},
		{"CancellationLosesNothing", s.testCancelLosesNothing},
		{"ShortPollingGetsDelayed", s.testShortPolling},
		{"MaxAfterLateCommit", s.testMaxAfterLateCommit},
		{"CloseEndsEverything", s.testClose},
		{"BadInputIsRefused", s.testBadInput},
		{"LimitsAtAndPastTheEdge", s.testLimits},
		{"BodiesAreCopies", s.testBodiesAreCopies},
		{"DeadLetterManagement", s.testDeadLetters},
		{"StatsOnQuiescentQueue", s.testStats},
		{"TxEnqueueCommitAndRollback", s.testTx},
		{"CarriedAttemptsCount", s.testCarriedAttempts},
		{"ReceiveDelayedTakesFutureMessages", s.testReceiveDelayed},
		{"ReceiveDelayedBehindReady", s.testReceiveDelayedBehindReady},
		{"ReleaseAfterReceiveDelayedKeepsRunAt", s.testReleaseKeepsRunAt},
		{"DeadImportIsIdempotent", s.testDeadImport},
		{"QueueListNamesQueues", s.testQueueList},
		{"QueueDeleteRemovesEverything", s.testQueueDelete},
		{"MarksSetGetDelete", s.testMarks},
		{"MarksExpire", s.testMarksExpire},
		{"MarkSetOnlyNewHasOneWinner", s.testMarkRace},
		{"MarkList", s.testMarkList},
		{"QueueDeleteDeletesMarks", s.testQueueDeleteMarks},
		{"PauseStopsEveryReceiver", s.testPause},
		{"MessageCancel", s.testMessageCancel},
		{"CancelRacesReceivers", s.testCancelRace},
		{"UniqueForHoldsAfterAck", s.testUniqueFor},
		{"TopicEveryCopyOnce", s.testTopicEveryCopyOnce},
		{"TopicSubscriptionsIndependent", s.testTopicSubscriptionsIndependent},
		{"TopicSlowSubscription", s.testTopicSlowSubscription},
		{"TopicSubscribeWhilePublishing", s.testTopicSubscribeWhilePublishing},
		{"TopicSubscribeWindow", s.testTopicSubscribeWindow},
		{"TopicWithoutSubscriptions", s.testTopicWithoutSubscriptions},
		{"TopicBadInput", s.testTopicBadInput},
		{"TopicPublishTx", s.testTopicPublishTx},
		{"TopicCopyBytes", s.testTopicCopyBytes},
		{"TopicCopyStats", s.testTopicCopyStats},
		{"TopicCopyDelayed", s.testTopicCopyDelayed},
		{"TopicCopyDedup", s.testTopicCopyDedup},
		{"TopicCopyControl", s.testTopicCopyControl},
		{"TopicCopyQueueDelete", s.testTopicCopyQueueDelete},
		{"TopicRewind", s.testTopicRewind},
		{"TopicKindPatterns", s.testTopicKindPatterns},
		{"TopicPatternChange", s.testTopicPatternChange},
		{"PriorityFirst", s.testPriorityFirst},
		{"PriorityCompeting", s.testPriorityCompeting},
		{"PriorityKept", s.testPriorityKept},
		{"PriorityBadInput", s.testPriorityBadInput},
		{"AckReceive", s.testAckReceive},
		{"MessageList", s.testMessageList},
		{"QueueLimits", s.testQueueLimits},
		{"ConcurrencyLimit", s.testConcurrencyLimit},
		{"RateLimit", s.testRateLimit},
		{"WorkflowDiamond", s.testWorkflowDiamond},
		{"WorkflowFanIn", s.testWorkflowFanIn},
		{"WorkflowLastAcksRace", s.testWorkflowLastAcksRace},
		{"WorkflowDeadStopsDependants", s.testWorkflowDeadStopsDependants},
		{"WorkflowCancel", s.testWorkflowCancel},
		{"WorkflowBadInput", s.testWorkflowBadInput},
	}
	// The tests mostly wait on leases and delays, so they all run at once
	// (or Harness.Parallel at a time): t.Run from separate goroutines is not
	// bounded by -test.parallel (GOMAXPROCS, 2 on a small CI machine), which
	// t.Parallel would be.
	var wg sync.WaitGroup
	var slots chan struct{}
	if h.Parallel > 0 {
		slots = make(chan struct{}, h.Parallel)
	}
	for _, tc := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slots != nil {
				slots <- struct{}{}
				defer func() { <-slots }()
			}
			t.Run(tc.name, tc.fn)
		}()
	}
	wg.Wait()
}

// need skips t when the harness declares f missing.
func (s *suite) need(t *testing.T, f Feature) {
	t.Helper()
	if reason, missing := s.h.Missing[f]; missing {
		t.Skipf("feature %q not provided: %s", f, reason)
	}
}

func (s *suite) has(f Feature) bool {
	_, missing := s.h.Missing[f]
	return !missing
}

// client opens an independent client, closed when the test ends.
func (s *suite) client(t *testing.T, opts ...fila.Option) *fila.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := s.h.Open(ctx)
	if err != nil {
		t.Fatalf("Harness.Open: %v", err)
	}
	opts = append([]fila.Option{
		fila.WithLease(s.h.Lease),
		fila.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}, opts...)
	c, err := fila.New(drv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// queue returns a fresh queue name for t.
func (s *suite) queue(t *testing.T) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	var sb strings.Builder
	for _, r := range name {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			sb.WriteRune(r)
		}
		if sb.Len() >= 24 {
			break
		}
	}
	return s.h.QueuePrefix + "-" + sb.String() + "-" + hex.EncodeToString(b[:])
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// enqueue stores one message or fails the test.
func enqueue(t *testing.T, c *fila.Client, queue string, m fila.Message) string {
	t.Helper()
	id, err := c.Enqueue(ctxTimeout(t, 10*time.Second), queue, m)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", queue, err)
	}
	if id == "" {
		t.Fatalf("Enqueue(%s) returned an empty id", queue)
	}
	return id
}

// receiveOne waits up to within for one delivery, failing the test when none
// comes.
func receiveOne(t *testing.T, c *fila.Client, queue string, lease, within time.Duration) *fila.Delivery {
	t.Helper()
	ds, err := c.Receive(ctxTimeout(t, within), queue, fila.ReceiveParams{Max: 1, Lease: lease})
	if err != nil {
		t.Fatalf("Receive(%s) within %v: %v", queue, within, err)
	}
	if len(ds) != 1 {
		t.Fatalf("Receive(%s, Max 1) returned %d deliveries", queue, len(ds))
	}
	return ds[0]
}

// afterNone is how long a message made ready right after expectNone may
// take to arrive: the wake-up bound, one short lease of a claim expectNone
// left in flight, its redelivery, and room for a loaded machine.
func (s *suite) afterNone() time.Duration {
	return s.h.WakeupBound + s.h.Lease + s.h.RedeliveryBound + 5*time.Second
}

// expectNone checks that nothing is received from queue for wait. Its
// Receive ends by its context, so a claim the driver had in flight may
// still take a message that becomes ready just after (the contract allows
// it: see CancellationLosesNothing). The claim leases for the harness's
// short lease, so such a message comes back within Lease+RedeliveryBound:
// a test that makes a message ready right after expectNone waits that much
// longer for it.
func (s *suite) expectNone(t *testing.T, c *fila.Client, queue string, wait time.Duration, why string) {
	t.Helper()
	ds, err := c.Receive(ctxTimeout(t, wait), queue, fila.ReceiveParams{Max: 10, Lease: s.h.Lease})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
	case err != nil:
		t.Errorf("%s: Receive: want context.DeadlineExceeded, got %v", why, err)
	default:
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.ID + " (attempt " + strconv.Itoa(d.Attempt) + ")"
		}
		t.Errorf("%s: received %s, want nothing", why, strings.Join(ids, ", "))
	}
}

// drain receives until n distinct messages arrived, acking each.
func drain(t *testing.T, c *fila.Client, queue string, n int, within time.Duration) map[string]*fila.Delivery {
	t.Helper()
	got := map[string]*fila.Delivery{}
	ctx := ctxTimeout(t, within)
	for len(got) < n {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 100, Lease: 30 * time.Second})
		if errors.Is(err, fila.ErrUnavailable) && ctx.Err() == nil {
			// Retryable, as a consumer would treat it (FerretDB, standing
			// in for MongoDB on a loaded machine, once took a claim past
			// its driver's 10 s bound); the drain's deadline still holds.
			t.Logf("drain %s: have %d of %d messages; retrying after: %v", queue, len(got), n, err)
			select { // a consumer's backoff, not a wait for a condition
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		if err != nil {
			t.Fatalf("drain %s: have %d of %d messages: %v", queue, len(got), n, err)
		}
		for _, d := range ds {
			if _, dup := got[d.ID]; dup {
				t.Errorf("drain %s: message %s delivered twice", queue, d.ID)
			}
			got[d.ID] = d
		}
		if err := c.AckBatch(ctx, ds); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
	return got
}

// drainSteady is drain for a backlog whose size, not speed, is the point:
// it fails only when idle passes with no delivery (or an ack takes that
// long), so a slow server that keeps delivering passes, and one that stops
// does not. (A bound of 20 ms per message failed on FerretDB, a stand-in
// on SQLite, draining 300 topic copies beside the rest of the suite.)
func drainSteady(t *testing.T, c *fila.Client, queue string, n int, idle time.Duration) map[string]*fila.Delivery {
	t.Helper()
	got := map[string]*fila.Delivery{}
	last := time.Now() // of the last delivery
	for len(got) < n {
		left := idle - time.Since(last)
		if left <= 0 {
			t.Fatalf("drain %s: have %d of %d messages, none for %v", queue, len(got), n, idle)
		}
		ctx := ctxTimeout(t, left)
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 100, Lease: 30 * time.Second})
		if errors.Is(err, fila.ErrUnavailable) && ctx.Err() == nil {
			t.Logf("drain %s: have %d of %d messages; retrying after: %v", queue, len(got), n, err)
			select { // a consumer's backoff, not a wait for a condition
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		if err != nil {
			t.Fatalf("drain %s: have %d of %d messages, none for %v: %v", queue, len(got), n, idle, err)
		}
		if len(ds) > 0 {
			last = time.Now()
		}
		for _, d := range ds {
			if _, dup := got[d.ID]; dup {
				t.Errorf("drain %s: message %s delivered twice", queue, d.ID)
			}
			got[d.ID] = d
		}
		if err := c.AckBatch(ctxTimeout(t, idle), ds); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
	return got
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: want %v, got %v", what, target, err)
	}
}
