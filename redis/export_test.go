package redis

// QueueKeys exposes a queue's key names to the tests: the scripts' twelve,
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
	KeyMarks
)

// ForceFastPath makes a driver built with o use the fast receive path for
// every Receive, whatever its Max.
func ForceFastPath(o *Options) { o.fastMin = 1 }
