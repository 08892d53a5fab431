package rabbitmq_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/conformance"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/rabbitmq"
)

// TestConformance runs the shared suite against the real RabbitMQ, with
// the management API (fila_management_url) where one is named (always
// under CI): queue and subscription listing are then tested too.
func TestConformance(t *testing.T) {
	raw := testenv.RabbitMQURL(t)
	if os.Getenv(testenv.RabbitMQManagementEnv) != "" || os.Getenv("CI") != "" {
		raw = withManagement(t, raw, testenv.RabbitMQManagementURL(t))
	}
	runConformance(t, raw)
}

// TestConformanceCluster runs the suite against the 3-node RabbitMQ cluster
// scripts/clusters starts, its quorum queues replicated on every node,
// without the management API (listing answers ErrUnsupported).
func TestConformanceCluster(t *testing.T) {
	runConformance(t, testenv.RabbitMQClusterURL(t))
}

// withManagement returns the AMQP URL raw with fila_management_url set to
// api.
func withManagement(t *testing.T, raw, api string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("fila_management_url", api)
	u.RawQuery = q.Encode()
	return u.String()
}

func runConformance(t *testing.T, raw string) {
	tr := newTracker(t, raw)
	missing := map[conformance.Feature]string{
		conformance.FeatureDedup:            "RabbitMQ has no atomic check of a key over a queue's pending messages",
		conformance.FeatureTxEnqueue:        "AMQP transactions are not a caller-owned transaction over other data",
		conformance.FeatureAtomicBatch:      "a failed batch publish may have stored some of its messages",
		conformance.FeatureOldestReady:      "RabbitMQ does not report the age of a queue's head without the management plugin",
		conformance.FeatureDeadByKind:       "counting dead letters by kind would need reading the whole dead queue",
		conformance.FeatureQueueList:        "AMQP 0-9-1 has no way to list queues (without fila_management_url)",
		conformance.FeatureMarkList:         "a mark is a queue, and AMQP 0-9-1 has no way to list queues (the driver does not use the management plugin)",
		conformance.FeatureTopicList:        "a subscription is bindings to the topic's exchanges, and AMQP 0-9-1 has no way to list bindings (without fila_management_url)",
		conformance.FeatureTopicDelayCounts: "a delayed topic copy waits in the subscription's main queue, counted as ready, until the subscription's consumer moves it to its delay queue",
		conformance.FeatureTopicQueueDelete: "a subscription is bindings of the queue, which RabbitMQ deletes with the queue: subscribe again after QueueDelete",
		conformance.FeatureMessageList:      "a queue's messages are read only by consuming them (the management API's get requeues them, redelivered and reordered)",
	}
	if strings.Contains(raw, "fila_management_url=") {
		delete(missing, conformance.FeatureQueueList)
		delete(missing, conformance.FeatureTopicList)
	}
	conformance.Run(t, conformance.Harness{
		Open:            func(ctx context.Context) (backend.Driver, error) { return tr.open(ctx) },
		Missing:         missing,
		RedeliveryBound: 3 * time.Second,
		WakeupBound:     time.Second,
	})
}

// tracker opens drivers and records the queues and topics tests touch, so
// their durable RabbitMQ topology can be deleted when the test ends.
type tracker struct {
	t   testing.TB
	raw string

	mu     sync.Mutex
	queues map[string]bool
	topics map[string]bool
}

func newTracker(t testing.TB, raw string) *tracker {
	tr := &tracker{t: t, raw: raw, queues: map[string]bool{}, topics: map[string]bool{}}
	t.Cleanup(tr.cleanup)
	return tr
}

func (tr *tracker) open(ctx context.Context) (*tracked, error) {
	u, err := url.Parse(tr.raw)
	if err != nil {
		return nil, err
	}
	d, err := rabbitmq.Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		return nil, err
	}
	return &tracked{Driver: d.(*rabbitmq.Driver), tr: tr}, nil
}

func (tr *tracker) note(q string) {
	tr.mu.Lock()
	tr.queues[q] = true
	tr.mu.Unlock()
}

func (tr *tracker) noteTopic(topic string) {
	tr.mu.Lock()
	tr.topics[topic] = true
	tr.mu.Unlock()
}

func (tr *tracker) cleanup() {
	u, _ := url.Parse(tr.raw)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := rabbitmq.Open(ctx, u, backend.OpenOptions{})
	if err != nil {
		tr.t.Logf("cleanup: %v", err)
		return
	}
	defer d.Close()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for q := range tr.queues {
		if err := d.(backend.QueueDeleter).QueueDelete(ctx, q); err != nil {
			tr.t.Logf("cleanup: delete %s: %v", q, err)
		}
	}
	for topic := range tr.topics {
		if err := rabbitmq.DeleteTopicExchange(ctx, d.(*rabbitmq.Driver), topic); err != nil {
			tr.t.Logf("cleanup: delete topic %s: %v", topic, err)
		}
	}
}

// tracked is a driver that records the queues it is used with.
type tracked struct {
	*rabbitmq.Driver
	tr *tracker
}

func (d *tracked) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	d.tr.note(queue)
	return d.Driver.Enqueue(ctx, queue, msgs)
}

func (d *tracked) ReceiveDelayed(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	d.tr.note(queue)
	return d.Driver.ReceiveDelayed(ctx, queue, p)
}

func (d *tracked) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	d.tr.note(queue)
	return d.Driver.DeadImport(ctx, queue, letters)
}

func (d *tracked) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	d.tr.note(queue)
	return d.Driver.MarkSet(ctx, queue, name, until, onlyNew)
}

func (d *tracked) TopicSubscribe(ctx context.Context, topic, queue, pattern string) error {
	d.tr.note(queue)
	d.tr.noteTopic(topic)
	return d.Driver.TopicSubscribe(ctx, topic, queue, pattern)
}

func (d *tracked) TopicPublish(ctx context.Context, topic string, msgs []backend.Message) (int, error) {
	d.tr.noteTopic(topic)
	return d.Driver.TopicPublish(ctx, topic, msgs)
}

func (d *tracked) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	d.tr.note(queue)
	return d.Driver.Receive(ctx, queue, p)
}
