package filawatermill_test

import (
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filawatermill"
)

// suiteMaxAttempts is the max attempts of the suite's messages. Watermill's
// suite treats a nack as "deliver it again", however many times, while
// Fila dead-letters a message past its max attempts (10 by default).
// TestContinueAfterErrors nacks 300 times over 50 messages in its full
// form, and on RabbitMQ every subscriber that closes with messages pushed
// to it counts an attempt for them too; so the suite's client allows more.
// TestNackExhaustedGoesToDeadLetters checks Fila's meaning.
const suiteMaxAttempts = 1000

// features are what Fila gives a Watermill application, on every broker:
//   - ExactlyOnceDelivery false: delivery is at least once.
//   - GuaranteedOrder false, also with a single subscriber: Fila makes no
//     ordering promise across competing consumers, and retries, delays and
//     expired leases reorder even for one.
//   - ConsumerGroups true: each group is a subscription queue of its own.
//   - Persistent true: messages live in the broker, not in the Subscriber
//     (for mem://, in the process's in-memory broker, which outlives the
//     Publisher and Subscriber instances the suite creates).
//   - NewSubscriberReceivesOldMessages false: a group's queue is a queue,
//     not a log; a message acked by one subscriber of the group is not
//     delivered to a later subscriber of the same group.
//   - No RestartServiceCommand: the brokers are shared and never
//     restarted by these tests (Fila's own fault tests, internal/faults,
//     restart and kill them).
//   - ForceShort unless FILAWATERMILL_FULL_SUITE is set: the suite's full
//     sizes (5,000 messages to 50 subscribers, 10,000 published at once,
//     ...) take minutes per broker, longer than the project's CI allows,
//     and scripts/test does not pass -short; the short sizes run the same
//     tests on smaller numbers (see README.md for both timings).
var features = tests.Features{
	ConsumerGroups:                      true,
	ExactlyOnceDelivery:                 false,
	GuaranteedOrder:                     false,
	GuaranteedOrderWithSingleSubscriber: false,
	Persistent:                          true,
	RequireSingleInstance:               false,
	NewSubscriberReceivesOldMessages:    false,
	ForceShort:                          os.Getenv(fullSuiteEnv) == "",
}

// fullSuiteEnv, when set to anything, runs Watermill's suite at its full
// sizes (unless -short is given).
const fullSuiteEnv = "FILAWATERMILL_FULL_SUITE"

// TestPubSub runs Watermill's own Pub/Sub test suite on every broker.
func TestPubSub(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			rawURL := b.url(t)
			c := openClient(t, rawURL, fila.WithMaxAttempts(suiteMaxAttempts))
			subs := trackSubscriptions(t, c, rawURL)
			constructor := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
				pub, err := filawatermill.NewPublisher(c, filawatermill.PublisherConfig{Logger: wmLogger()})
				if err != nil {
					t.Fatal(err)
				}
				sub, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{
					ConsumerGroup: group,
					QueueName:     subs.queueName,
					Prefetch:      b.suitePrefetch,
					Logger:        wmLogger(),
				})
				if err != nil {
					t.Fatal(err)
				}
				return pub, sub
			}
			tests.TestPubSub(t, features,
				func(t *testing.T) (message.Publisher, message.Subscriber) { return constructor(t, "") },
				constructor,
			)
		})
	}
}
