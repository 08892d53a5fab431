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
)
