package filawatermill

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/fila-go/fila"
)

// DefaultConsumerGroup is the consumer group of a SubscriberConfig that
// names none: subscribers built from such configs share one subscription
// queue per topic and compete for its messages.
const DefaultConsumerGroup = "default"

// hashLen is the number of hex digits of the hash that ends a long or
// irregular queue name (64 bits).
const hashLen = 16

// DefaultQueueName returns the name of the Fila queue that subscribes
// consumer group group to topic, the default of SubscriberConfig.QueueName.
//
// It is topic + "." + group when group is 1 or more ASCII letters, digits,
// '_' and '-' (no '.') and the result fits in fila.MaxQueueNameLen bytes:
// "orders.billing". Otherwise it is topic + "." + group with every
// character a queue name cannot hold replaced by '_', cut to leave room for
// a suffix, then "-" and 16 hex digits of the SHA-256 of topic, a zero byte
// and group: "orders.billing_v2-1f0c…". The name is therefore the same in
// every process, two pairs get the same queue only if the first form of
// one equals the second form of the other (a group ending in '-' and 16 hex
// digits) or their hashes collide, and the readable form can be split back
// at its last dot, since its group has none. Queue names starting with
// "fila.topic." are reserved by Fila: TopicSubscribe refuses them, so
// avoid a topic "fila" with a group starting "topic".
func DefaultQueueName(topic, group string) string {
	name := topic + "." + group
	if plainGroup(group) && len(name) <= fila.MaxQueueNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(topic + "\x00" + group))
	suffix := "-" + hex.EncodeToString(sum[:])[:hashLen]
	b := []byte(name)
	for i, c := range b {
		if !queueChar(c) {
			b[i] = '_'
		}
	}
	if len(b) == 0 || !alnum(b[0]) {
		b = append([]byte{'q'}, b...)
	}
	if max := fila.MaxQueueNameLen - len(suffix); len(b) > max {
		b = b[:max]
	}
	return string(b) + suffix
}

func plainGroup(g string) bool {
	if g == "" {
		return false
	}
	for i := 0; i < len(g); i++ {
		if c := g[i]; !alnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func queueChar(c byte) bool { return alnum(c) || c == '.' || c == '_' || c == '-' }
