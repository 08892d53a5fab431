package redis

// QueueKeys exposes a queue's key names to the tests.
func QueueKeys(prefix, queue string) []string { return queueKeys(prefix, queue).list() }

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
)

// ForceFastPath makes a driver built with o use the fast receive path for
// every Receive, whatever its Max.
func ForceFastPath(o *Options) { o.fastMin = 1 }
