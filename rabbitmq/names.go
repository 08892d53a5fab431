package rabbitmq

import (
	"context"
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
//	P.Q:mark:H      a mark: an empty queue, H the base64url SHA-256 of the
//	                mark's name, cut to fit maxNameLen (see marks.go)
//	P.Q:marks       the registries of the marks created, without and with
//	P.Q:marks:ttl   an expiry
//	P.T:topic       for a topic T: a durable fanout exchange, to which the
//	                main queues of its subscriptions are bound (topic.go)
//
// Fila queue and topic names never contain ':' (they are ASCII letters,
// digits, '.', '_' and '-'), so the names of different queues never
// collide, and no queue's names end with ":topic".
const (
	deadSuffix = ":dead"
	delayInfix = ":delay:"
	maxNameLen = 255 // RabbitMQ's limit on queue and exchange names
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

func (n names) delay(ms int64) string {
	return n.main + delayInfix + strconv.FormatInt(ms, 10)
}

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
