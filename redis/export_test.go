package redis

import (
	"context"
	"time"
)

// QueueKeys exposes a queue's key names to the tests: the scripts' fifteen,
// then the marks.
func QueueKeys(prefix, queue string) []string { return queueKeys(prefix, queue).all() }

// Key names by role, for tests that tamper with one of them.
const (
	KeyStream = iota
	KeyLeases
	KeyDeadlines
	KeyDelayed
	KeyPayloads
	KeyDedup
	KeyDead
	KeyDeadKinds
	KeySweep
	KeyDeadIDs
	KeyDedupIDs
	KeyMoved
	KeyStream1
	KeyStream2
	KeyStream3
	KeyMarks
)

// ForceFastPath makes a driver built with o use the fast receive path for
// every Receive, whatever its Max.
func ForceFastPath(o *Options) { o.fastMin = 1 }

// Wait exposes the wait of a Receive that found nothing.
func (d *Driver) Wait(ctx context.Context, stream, id string, wait time.Duration) (due bool, err error) {
	return d.wait(ctx, stream, id, wait)
}

// Watch returns the blocking read in flight on stream (a pointer, to
// compare), or nil.
func (d *Driver) Watch(stream string) any {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.watches[stream]; w != nil {
		return w
	}
	return nil
}

// TopicLogKey is the key of a topic's log.
func TopicLogKey(prefix, topic string) string {
	return (&Driver{o: Options{Prefix: prefix}}).topicKeys(topic).log
}

// SetLagWarnAge sets the age of a topic's oldest event past which the
// driver warns that a subscription lags, until the test ends.
// Publishes then look at the log's age at every call.
func SetLagWarnAge(d time.Duration) (restore func()) {
	old, oldCheck := lagWarnAge, lagCheckEvery
	lagWarnAge, lagCheckEvery = d, 0
	return func() { lagWarnAge, lagCheckEvery = old, oldCheck }
}

// QueueTopicPatternsKey is the key of a queue's topic patterns hash.
func QueueTopicPatternsKey(prefix, queue string) string { return queueKeys(prefix, queue).tpats }
