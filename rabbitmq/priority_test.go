package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila/backend"
)

// Priorities (levels.go): a quorum queue per level above 0, taken by
// count and basic.get before level 0's consumer buffer.

// levelQueue returns a fresh queue name of d, deleted when the test ends.
func levelQueue(t *testing.T, d *Driver, tag string) string {
	t.Helper()
	q := "rmqtest-" + tag + "-" + d.nonce + "-" + uuid()[:8]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = d.QueueDelete(ctx, q)
	})
	return q
}

// enqueueAt enqueues n messages of level l (kind "level.l") and returns
// their ids.
func enqueueAt(t *testing.T, d *Driver, q string, l, n int, delay time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs := make([]backend.Message, n)
	ids := make([]string, n)
	for i := range msgs {
		ids[i] = uuid()
		msgs[i] = testMsg(ids[i])
		msgs[i].Kind = fmt.Sprintf("level.%d", l)
		msgs[i].Priority = l
		msgs[i].Delay = delay
	}
	if _, err := d.Enqueue(ctx, q, msgs); err != nil {
		t.Fatalf("Enqueue of %d at level %d: %v", n, l, err)
	}
	return ids
}

// receiveN receives once, up to max messages, waiting up to within.
func receiveN(t *testing.T, d *Driver, q string, max int, lease, within time.Duration) []backend.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: max, Lease: lease})
	if err != nil {
		t.Fatalf("Receive(%s, Max %d): %v", q, max, err)
	}
	return ds
}

func ackAll(t *testing.T, d *Driver, q string, ds ...backend.Delivery) {
	t.Helper()
	refs := make([]backend.Ref, len(ds))
	for i, dl := range ds {
		refs[i] = backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt}
	}
	errs, err := d.Ack(context.Background(), refs)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// queueThere reports whether the queue name exists.
func queueThere(t *testing.T, d *Driver, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := s.queueExists(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// otherProcess opens a driver that shares nothing with d but the broker,
// as another process's would (QueueDelete's in-process broadcast does not
// reach it).
func otherProcess(t *testing.T) *Driver {
	t.Helper()
	o := openTest(t)
	unregister(o)
	o.scope += "\x00elsewhere"
	register(o)
	return o
}

// TestPriorityNoLevelsCostNothing: a queue whose messages are all of level
// 0 gets no level queue nor router, whatever it goes through (receive,
// retry with a delay, dead letter and replay, stats), and its receives
// open no count channel: no round trip is added to them.
func TestPriorityNoLevelsCostNothing(t *testing.T) {
	d := openTest(t)
	q := levelQueue(t, d, "nolevels")
	n, _ := d.names(q)
	enqueueAt(t, d, q, 0, 3, 0)
	ds := receiveAll(t, d, q, 3, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.Retry(ctx, backend.Ref{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}, 20*time.Millisecond, "again"); err != nil {
		t.Fatal(err)
	}
	if err := d.Dead(ctx, backend.Ref{Queue: q, ID: ds[1].ID, Receipt: ds[1].Receipt}, "dead", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeadReplay(ctx, q, backend.DeadFilter{}); err != nil {
		t.Fatal(err)
	}
	st, err := d.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ReadyByPriority) != backend.MaxPriority+1 || st.ReadyByPriority[0] != st.Ready {
		t.Errorf("QueueStats = %+v: want every ready message at level 0", st)
	}
	for range 2 { // the retried and the replayed one
		ackAll(t, d, q, receiveN(t, d, q, 1, time.Minute, 10*time.Second)...)
	}
	ackAll(t, d, q, ds[2])
	for l := 1; l <= backend.MaxPriority; l++ {
		if queueThere(t, d, n.level(l)) {
			t.Errorf("level queue %s exists for a queue that never used level %d", n.level(l), l)
		}
	}
	for _, ex := range []string{n.router(), n.routerAE()} {
		if exchangeExists(t, d, ex) {
			t.Errorf("exchange %s exists for a queue that never used a level", ex)
		}
	}
	p := d.existingPuller(q)
	p.countMu.Lock()
	opened := p.countCh != nil
	p.countMu.Unlock()
	if opened || d.levelMask(q) != 0 {
		t.Errorf("receives on a queue without levels opened a count channel (%v) or know levels (%b)", opened, d.levelMask(q))
	}
}

// TestPriorityBeforePrefetched: a receiver whose level-0 consumer holds
// messages it was pushed and has not handed out yet gives a message of a
// higher level, enqueued afterwards by another process, in its next
// Receive, every time.
func TestPriorityBeforePrefetched(t *testing.T) {
	d := openTest(t)
	pub := otherProcess(t)
	q := levelQueue(t, d, "prefetched")
	// The receiver learns of the other process's levels by probing their
	// queues (within levelProbeEvery).
	for l := 1; l <= backend.MaxPriority; l++ {
		enqueueAt(t, pub, q, l, 1, 0)
	}
	for want := backend.MaxPriority; want >= 1; want-- {
		ds := receiveN(t, d, q, 1, time.Minute, 10*time.Second)
		if len(ds) != 1 || ds[0].Priority != want {
			t.Fatalf("receive = %+v, want the message of level %d", ds, want)
		}
		ackAll(t, d, q, ds...)
	}
	enqueueAt(t, pub, q, 0, 200, 0)
	p := d.existingPuller(q)
	buffered := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cs != nil && len(p.cs.buf) > 0
	}
	for round := range 8 {
		// Level-0 messages handed out and acked at once, as a quick
		// worker does: the consumer is pushed more, which wait in the
		// buffer. (An ack long after the last waiting Receive cancels the
		// consumer instead, see quiesce: then receive again.)
		deadline := time.Now().Add(5 * time.Second)
		for !buffered() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no level-0 message was pushed to the receiver", round)
			}
			ackAll(t, d, q, receiveN(t, d, q, 4, time.Minute, 10*time.Second)...)
			for end := time.Now().Add(20 * time.Millisecond); !buffered() && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
		}
		hi := enqueueAt(t, pub, q, 1+round%3, 1, 0)[0]
		got := receiveN(t, d, q, 1, time.Minute, 10*time.Second)
		if len(got) != 1 || got[0].ID != hi || got[0].Priority != 1+round%3 {
			t.Fatalf("round %d: the next receive after a level %d enqueue got %+v, want %s", round, 1+round%3, got, hi)
		}
		ackAll(t, d, q, got...)
	}
}

// TestPriorityCompetingDrivers: receivers of two processes competing for a
// backlog of level 0 with ten level-3 messages behind it: each first claim
// takes a level-3 message, and none is handed out twice.
func TestPriorityCompetingDrivers(t *testing.T) {
	a, b := openTest(t), otherProcess(t)
	q := levelQueue(t, a, "competing")
	// Both learn of level 3, and have a level-0 consumer with pushed
	// messages.
	enqueueAt(t, a, q, 3, 2, 0)
	for _, d := range []*Driver{a, b} {
		ackAll(t, d, q, receiveN(t, d, q, 1, time.Minute, 10*time.Second)...)
	}
	enqueueAt(t, a, q, 0, 100, 0)
	for _, d := range []*Driver{a, b} {
		ds := receiveN(t, d, q, 2, time.Minute, 10*time.Second)
		for _, dl := range ds {
			if dl.Priority != 0 {
				t.Fatalf("level %d while only level 0 was left", dl.Priority)
			}
		}
		ackAll(t, d, q, ds...)
	}
	hi := enqueueAt(t, b, q, 3, 10, 0)
	const receivers = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  []string
		errs []error
	)
	for i := range receivers {
		d := []*Driver{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ds, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, dl := range ds {
				if dl.Priority != 3 {
					errs = append(errs, fmt.Errorf("a first claim got %s of level %d while %d of level 3 were ready", dl.ID, dl.Priority, len(hi)))
				}
				got = append(got, dl.ID)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(got) != receivers || len(slices.Compact(got)) != receivers {
		t.Fatalf("%d receivers got %d distinct messages: %v", receivers, len(slices.Compact(got)), got)
	}
}

// TestPriorityDelayExpiryAndDelete: a delayed message of a level waits in
// its level's delay queue, is counted as delayed, is seen by
// ReceiveDelayed with its level, and once due comes before level 0's
// backlog; a lease that expires returns it to its level; QueueDelete
// removes the level queues, their delay queues and the router.
func TestPriorityDelayExpiryAndDelete(t *testing.T) {
	d := openTest(t)
	q := levelQueue(t, d, "delaylevel")
	n, _ := d.names(q)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	enqueueAt(t, d, q, 0, 5, 0)
	late := enqueueAt(t, d, q, 2, 1, 2*time.Second)[0]
	var delayQ string
	for _, b := range d.buckets(q) {
		if b.level == 2 {
			delayQ = n.delayAt(2, b.ms)
		}
	}
	if delayQ == "" || !strings.HasPrefix(delayQ, n.main+":p2:") || !queueThere(t, d, delayQ) {
		t.Fatalf("no delay queue of level 2 (%q)", delayQ)
	}
	st, err := d.QueueStats(ctx, q)
	if err != nil || st.Delayed != 1 || st.Ready != 5 || !slices.Equal(st.ReadyByPriority, []int64{5, 0, 0, 0}) {
		t.Fatalf("QueueStats = %+v, %v; want 5 ready at level 0, 1 delayed", st, err)
	}
	// ReceiveDelayed takes it early with its level; its release keeps
	// it waiting for its run-at.
	early, err := d.ReceiveDelayed(ctx, q, backend.ReceiveParams{Max: 5, Lease: time.Minute})
	if err != nil || len(early) != 1 || early[0].ID != late || early[0].Priority != 2 {
		t.Fatalf("ReceiveDelayed = %+v, %v; want %s at level 2", early, err, late)
	}
	if err := d.Retry(ctx, backend.Ref{Queue: q, ID: late, Receipt: early[0].Receipt}, 0, ""); err != nil {
		t.Fatal(err)
	}
	// Due: ahead of the backlog.
	ds := receiveN(t, d, q, 1, 300*time.Millisecond, 10*time.Second)
	for len(ds) == 1 && ds[0].ID != late { // level 0 while it waits
		if time.Until(early[0].Message.RunAt) < -time.Second {
			t.Fatalf("received %+v a second after the level-2 message was due", ds[0])
		}
		ackAll(t, d, q, ds...)
		enqueueAt(t, d, q, 0, 1, 0)
		time.Sleep(20 * time.Millisecond)
		ds = receiveN(t, d, q, 1, 300*time.Millisecond, 10*time.Second)
	}
	if ds[0].Priority != 2 || time.Now().Before(early[0].Message.RunAt) {
		t.Fatalf("got %+v before its run-at %v", ds[0], early[0].Message.RunAt)
	}
	// Its lease expires: back to level 2 (once the broker has it), ahead
	// of the backlog again.
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := s.count(ctx, n.level(2))
		if err != nil {
			t.Fatal(err)
		}
		if c == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	again := receiveN(t, d, q, 1, time.Minute, 10*time.Second)
	if len(again) != 1 || again[0].ID != late || again[0].Priority != 2 || again[0].Attempt != ds[0].Attempt+1 {
		t.Fatalf("after the lease expired the next receive got %+v, want %s at level 2, attempt %d", again, late, ds[0].Attempt+1)
	}
	if err := d.QueueDelete(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{n.level(2), delayQ} {
		if queueThere(t, d, name) {
			t.Errorf("%s survived QueueDelete", name)
		}
	}
	for _, ex := range []string{n.router(), n.routerAE()} {
		if exchangeExists(t, d, ex) {
			t.Errorf("exchange %s survived QueueDelete", ex)
		}
	}
	if d.levelMask(q) != 0 {
		t.Errorf("levels still known after QueueDelete: %b", d.levelMask(q))
	}
}

// TestPriorityTopicCopies: a topic copy of a level goes to the queue of
// its level in each subscription that has it, pattern or not; a
// subscription without it gets the copy in its main queue, with its
// level, and declares the level for the next ones; a subscription made
// before levels (the main queue bound itself) gets it once, in its main
// queue, until subscribed again.
func TestPriorityTopicCopies(t *testing.T) {
	d := openTest(t)
	f := newTopic(t, d, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := f.subscribePatterns(t, "")
	pat := f.subscribePatterns(t, "a.*")
	// pat has level 3 already (used directly).
	ackAll(t, d, pat, receiveWith(t, d, pat, enqueueAt(t, d, pat, 3, 1, 0)[0])...)

	// An old subscription, as drivers before levels made it.
	old := f.topic + "-old"
	f.subs = append(f.subs, old)
	tn, _ := d.topicExchanges(f.topic)
	no, _ := d.names(old)
	s, err := d.session(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.declare(ctx, old, no); err != nil {
		t.Fatal(err)
	}
	if err := s.withCtl(ctx, func(ch *amqp.Channel) error { return ch.QueueBind(no.main, "", tn.fanout, false, nil) }); err != nil {
		t.Fatal(err)
	}

	publish := func(kind string, level int) string {
		t.Helper()
		m := kindMsg(kind)
		m.Priority = level
		if _, err := d.TopicPublish(ctx, f.topic, []backend.Message{m}); err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	for range 5 {
		publish("a.x", 0)
	}
	hi := publish("a.x", 3)

	// pat: the copy is in its level queue, the next receive's.
	got := receiveN(t, d, pat, 1, time.Minute, 10*time.Second)
	if len(got) != 1 || got[0].ID != backend.CopyID(hi, pat) || got[0].Priority != 3 {
		t.Fatalf("pattern subscription: next receive = %+v, want the level-3 copy", got)
	}
	ackAll(t, d, pat, got...)

	// all: no level-3 queue yet, so the copy waits in the main queue with
	// its level; reading it declares the level.
	ds := receiveAll(t, d, all, 6, 10*time.Second)
	levels := map[int]int{}
	for _, dl := range ds {
		levels[dl.Priority]++
	}
	if levels[0] != 5 || levels[3] != 1 {
		t.Fatalf("subscription without the level got levels %v, want 5 of 0 and 1 of 3", levels)
	}
	ackAll(t, d, all, ds...)
	na, _ := d.names(all)
	deadline := time.Now().Add(10 * time.Second)
	bound := func() bool { // declared, and bound to the router (a probe may see the queue first)
		d.mu.Lock()
		defer d.mu.Unlock()
		st := d.levels[all]
		return st != nil && st.mask&(1<<3) != 0 && st.ensuring == 0
	}
	for !bound() {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not declared after a level-3 copy was read", na.level(3))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !queueThere(t, d, na.level(3)) {
		t.Fatalf("%s does not exist", na.level(3))
	}
	for range 5 {
		publish("a.y", 0)
	}
	hi2 := publish("a.y", 3)
	got = receiveN(t, d, all, 1, time.Minute, 10*time.Second)
	if len(got) != 1 || got[0].ID != backend.CopyID(hi2, all) || got[0].Priority != 3 {
		t.Fatalf("subscription with the level now: next receive = %+v, want the level-3 copy", got)
	}
	ackAll(t, d, all, got...)
	ackAll(t, d, all, receiveAll(t, d, all, 5, 10*time.Second)...)
	ackAll(t, d, pat, receiveAll(t, d, pat, 11, 10*time.Second)...) // a.x and a.y, and the second level-3 copy

	// old: every copy once, in its main queue.
	ds = receiveAll(t, d, old, 12, 10*time.Second)
	levels = map[int]int{}
	for _, dl := range ds {
		levels[dl.Priority]++
	}
	if levels[0] != 10 || levels[3] != 2 {
		t.Fatalf("old subscription got levels %v, want 10 of 0 and 2 of 3", levels)
	}
	ackAll(t, d, old, ds...)

	// Subscribed again, it routes by level, and gets each copy once.
	if err := d.TopicSubscribe(ctx, f.topic, old, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.declareLevel(ctx, old, no, 3); err != nil {
		t.Fatal(err)
	}
	publish("b.x", 0)
	hi3 := publish("b.x", 3)
	got = receiveN(t, d, old, 1, time.Minute, 10*time.Second)
	if len(got) != 1 || got[0].ID != backend.CopyID(hi3, old) {
		t.Fatalf("old subscription subscribed again: next receive = %+v, want the level-3 copy", got)
	}
	ackAll(t, d, old, got...)
	expectKinds(t, d, old, "b.x")
	expectKinds(t, d, all, "b.x", "b.x")
	expectKinds(t, d, pat)

	// Unsubscribing ends it for every level.
	for _, q := range []string{all, old} {
		if err := d.TopicUnsubscribe(ctx, f.topic, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.TopicUnsubscribe(ctx, f.topic, pat); err != nil {
		t.Fatal(err)
	}
	m := kindMsg("a.x")
	m.Priority = 3
	if n, err := d.TopicPublish(ctx, f.topic, []backend.Message{m}); n != 0 || err != nil {
		t.Fatalf("TopicPublish after every unsubscribe = %d, %v; want 0 (unroutable)", n, err)
	}
}

// receiveWith receives from q until it gets id, acking everything else.
func receiveWith(t *testing.T, d *Driver, q, id string) []backend.Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, dl := range receiveN(t, d, q, 1, time.Minute, 10*time.Second) {
			if dl.ID == id {
				return []backend.Delivery{dl}
			}
			ackAll(t, d, q, dl)
		}
	}
	t.Fatalf("%s not received from %s", id, q)
	return nil
}

// TestLevelNames: the level names fit RabbitMQ's limit for the longest
// prefix and queue name, and differ from the queue's other names.
func TestLevelNames(t *testing.T) {
	for _, tc := range []struct{ prefix, queue string }{
		{"fila", "q"},
		{strings.Repeat("p", maxPrefix), strings.Repeat("q", 128)},
	} {
		d := &Driver{opts: Options{Prefix: tc.prefix}}
		n, err := d.names(tc.queue)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{n.main: true, n.dead: true, n.dead + scanLockSuffix: true,
			n.markRegistry(false): true, n.markRegistry(true): true, n.topicSub("t"): true, n.mark("m"): true}
		for _, ms := range allBuckets() {
			seen[n.delay(ms)] = true
		}
		add := func(name string) {
			t.Helper()
			if len(name) > maxNameLen {
				t.Errorf("%.30q…: %d bytes", name, len(name))
			}
			if seen[name] {
				t.Errorf("%.30q… taken", name)
			}
			seen[name] = true
		}
		add(n.router())
		add(n.routerAE())
		for l := 1; l <= backend.MaxPriority; l++ {
			add(n.level(l))
			for _, ms := range allBuckets() {
				add(n.delayAt(l, ms))
			}
		}
		if n.level(0) != n.main || n.delayAt(0, 1200) != n.delay(1200) {
			t.Errorf("level 0's names are not the main queue's")
		}
	}
}
