package rabbitmq

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/fila-go/fila/backend"
)

// Naming scheme. For a Fila queue Q and the prefix P (default "fila"):
//
//	P.Q             the main queue: a durable quorum queue
//	P.Q:dead        the dead-letter exchange (fanout) and the dead-letter
//	                queue bound to it (a durable classic queue)
//	P.Q:dead:scan   the dead letters' scan lock: an exclusive queue that
//	                the connection scanning them holds (admin.go)
//	P.Q:delay:MS    a delay queue whose messages wait MS milliseconds (the
//	                queue's x-message-ttl) and then dead-letter back to P.Q
//	                through the default exchange; it deletes itself
//	                (x-expires) once unused for MS plus 10 minutes
//	P.Q:pL          the main queue of priority level L (1 to 3; level 0 is
//	                P.Q): a durable quorum queue, declared by the first use
//	                of the level, bound to P.Q:levels (levels.go)
//	P.Q:pL:MS       a delay queue of level L, as P.Q:delay:MS but
//	                dead-lettering to P.Q:pL
//	P.Q:levels      a durable headers exchange, declared with Q's first
//	                level queue or subscription: it routes a message whose
//	                fila-pri header is L to P.Q:pL, and every other message
//	                to its alternate exchange P.Q:levels:0; subscriptions
//	                are bound to it (topic.go)
//	P.Q:levels:0    a durable fanout exchange bound to P.Q
//	P.Q:mark:H      a mark: an empty queue, H the base64url SHA-256 of the
//	                mark's name, cut to fit maxNameLen (see marks.go)
//	P.Q:marks       the registries of the marks created, without and with
//	P.Q:marks:ttl   an expiry
//	P.Q:sub:H       Q's subscription to the topic whose name hashes to H
//	                (the base64url SHA-256 of the topic name, cut to fit
//	                maxNameLen): a durable, auto-delete fanout exchange
//	                bound to P.Q:levels, and to P.T:route once per kind
//	                pattern (topic.go)
//	P.T:topic       for a topic T: a durable fanout exchange, every
//	                publish's entry point (routing key: the kind), to
//	                which the P.Q:levels of its subscriptions without a
//	                pattern are bound with "" (the main queues themselves,
//	                for subscriptions made before levels)
//	P.T:route       a durable topic exchange bound to P.T:topic (key ""),
//	                to which the pattern subscriptions' P.Q:sub:H are
//	                bound, their patterns as keys
//
// Fila queue and topic names never contain ':' (they are ASCII letters,
// digits, '.', '_' and '-'), so the names of different queues never
// collide, and no queue's names end with ":topic" or ":route" (H is
// base64url: no ':'). P.T:route is as long as P.T:topic, which
// topicExchanges keeps within maxNameLen. A level's delay queue,
// P.Q:pL:MS, is shorter than P.Q:delay:MS, so the longest name stays the
// largest level-0 delay queue's.
const (
	deadSuffix     = ":dead"
	delayInfix     = ":delay:"
	subInfix       = ":sub:"
	levelInfix     = ":p"        // P.Q:pL, and P.Q:pL:MS
	routerSuffix   = ":levels"   // P.Q:levels
	routerAESuffix = ":levels:0" // P.Q:levels:0
	maxNameLen     = 255         // RabbitMQ's limit on queue and exchange names
	// maxPrefix keeps the longest derived name, the largest delay queue of
	// the longest queue name, within maxNameLen.
	maxPrefix   = maxNameLen - 1 - 128 - len(delayInfix) - 10
	delayExpiry = 10 * time.Minute // a delay queue outlives its TTL by this much
	// redeclareDelayAfter is how old a delay queue's last declaration may get
	// before a publish declares it again (which renews its x-expires lease).
	// It must stay below delayExpiry: a message published at most this long
	// after the declaration expires before the queue does.
	redeclareDelayAfter = delayExpiry / 2
	// maxBucketMS is the longest delay queue TTL (about 23 days); longer
	// delays hop through it several times. RabbitMQ caps TTLs at 2^32-1 ms.
	maxBucketMS = 2_000_000_000
)

// names are the broker names of one Fila queue's topology.
type names struct {
	main string // quorum queue
	dead string // dead-letter exchange and queue
}

// queueSession returns queue's names and a session, the start of every call
// that works on one queue's broker objects.
func (d *Driver) queueSession(ctx context.Context, queue string) (names, *session, error) {
	n, err := d.names(queue)
	if err != nil {
		return names{}, nil, err
	}
	s, err := d.session(ctx, d.opts.ReconnectWait)
	if err != nil {
		return names{}, nil, err
	}
	return n, s, nil
}

// names returns queue's broker names, or ErrInvalid when the longest of
// them would pass RabbitMQ's limit.
func (d *Driver) names(queue string) (names, error) {
	main := d.opts.Prefix + "." + queue
	// The longest derived name is the delay queue of the largest bucket.
	if n := len(main) + len(delayInfix) + len(strconv.Itoa(maxBucketMS)); n > maxNameLen {
		return names{}, backend.Invalidf("queue %q: its RabbitMQ delay queue name would be %d bytes; RabbitMQ's limit is %d (use a shorter prefix or queue name)", queue, n, maxNameLen)
	}
	return names{main: main, dead: main + deadSuffix}, nil
}

// topicSub returns the name of the exchange through which queue's main
// queue subscribes to topic with kind patterns (see topic.go): the hash
// keeps it within maxNameLen whatever the topic's length. names() leaves
// room for at least 12 hash characters (72 bits), and only one queue's
// topics share a prefix P.Q:sub:.
func (n names) topicSub(topic string) string {
	sum := sha256.Sum256([]byte(topic))
	h := base64.RawURLEncoding.EncodeToString(sum[:])
	base := n.main + subInfix
	if room := maxNameLen - len(base); room < len(h) {
		h = h[:room]
	}
	return base + h
}

func (n names) delay(ms int64) string {
	return n.main + delayInfix + strconv.FormatInt(ms, 10)
}

// level returns the main queue of priority level l: P.Q for 0, P.Q:pL
// above.
func (n names) level(l int) string {
	if l <= 0 {
		return n.main
	}
	return n.main + levelInfix + strconv.Itoa(l)
}

// delayAt returns the delay queue of ms of level l: P.Q:delay:MS for 0,
// P.Q:pL:MS above.
func (n names) delayAt(l int, ms int64) string {
	if l <= 0 {
		return n.delay(ms)
	}
	return n.level(l) + ":" + strconv.FormatInt(ms, 10)
}

// router is the headers exchange that routes Q's topic copies by level,
// and routerAE its alternate exchange, bound to the main queue.
func (n names) router() string   { return n.main + routerSuffix }
func (n names) routerAE() string { return n.main + routerAESuffix }

// bucketMS picks the delay queue for a message that must wait remaining
// more: the remaining milliseconds rounded DOWN to two significant digits
// (1234 ms waits in the 1200 ms queue), capped at maxBucketMS. Rounding down
// means a message never becomes ready early; what is left over (under 10% of
// the delay) is waited out by another, shorter hop when the message reaches
// the main queue before its run-at header (see hop in consume.go). Delays
// under 100 ms are exact. At most about 90 delay queues per decade of delay
// exist at once, and only while used.
func bucketMS(remaining time.Duration) int64 {
	ms := int64((remaining + time.Millisecond - 1) / time.Millisecond) // round up to whole ms
	if ms < 1 {
		return 0
	}
	if ms >= maxBucketMS {
		return maxBucketMS
	}
	scale := int64(1)
	for ms/scale >= 100 {
		scale *= 10
	}
	return ms / scale * scale
}
