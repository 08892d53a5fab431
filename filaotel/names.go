package filaotel

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Metric names. Those of the OpenTelemetry messaging semantic conventions
// keep their names; Fila's own live under "fila.". Prometheus exporters turn
// the dots into underscores and add unit and _total suffixes, as noted.
const (
	// MetricProcessDuration is the histogram of job run times in seconds,
	// per queue and kind (semantic convention messaging.process.duration;
	// Prometheus: messaging_process_duration_seconds). Percentiles such as
	// the p95 run time per kind come from it.
	MetricProcessDuration = "messaging.process.duration"
	// MetricSentMessages counts messages enqueued through the
	// Instrumentation's Enqueue helpers (semantic convention
	// messaging.client.sent.messages; Prometheus:
	// messaging_client_sent_messages_total).
	MetricSentMessages = "messaging.client.sent.messages"
	// MetricJobOutcomes counts finished jobs per queue, kind and outcome
	// (ack, retry, dead, released, lease_lost, unsettled). Prometheus:
	// fila_job_outcomes_total.
	MetricJobOutcomes = "fila.job.outcomes"
	// MetricOldestReadyAge is the age in seconds of each queue's oldest
	// ready message when the observer last polled: how long the head of the
	// queue has waited. The first metric to alert on: it grows when workers
	// fall behind or stop. Prometheus: fila_queue_oldest_ready_age_seconds.
	MetricOldestReadyAge = "fila.queue.oldest_ready.age"
	// MetricQueueMessages is the number of a queue's messages per state
	// (ready, delayed, leased, dead). Prometheus: fila_queue_messages.
	MetricQueueMessages = "fila.queue.messages"
	// MetricDeadLetters is the number of a queue's dead letters per kind,
	// where the driver can count them. Prometheus: fila_queue_dead_letters.
	MetricDeadLetters = "fila.queue.dead_letters"
	// MetricConcurrencyLimit is a queue's concurrency limit (fila.QueueLimits)
	// when it has one, as the observer last read it. Prometheus:
	// fila_queue_concurrency_limit.
	MetricConcurrencyLimit = "fila.queue.concurrency.limit"
	// MetricConcurrencyHeld is the concurrency slots held in a queue with a
	// concurrency limit, by every client (fila.LimitsUsage.Held): compare
	// it with MetricConcurrencyLimit. Prometheus:
	// fila_queue_concurrency_held.
	MetricConcurrencyHeld = "fila.queue.concurrency.held"
	// MetricThrottledReceives counts the Receive calls of the observer's
	// client that waited for room under a queue's limits, per queue and
	// fila.limit (concurrency or rate): a process's own figure, summed over
	// processes by the metrics backend (fila.Client.QueueThrottled).
	// Prometheus: fila_receive_throttled_total.
	MetricThrottledReceives = "fila.receive.throttled"
	// MetricThrottledWait is the time those calls waited, in seconds, per
	// queue. Prometheus: fila_receive_throttled_wait_seconds_total.
	MetricThrottledWait = "fila.receive.throttled.wait"
)

// Attribute keys. The messaging.* keys come from the semantic conventions.
const (
	// AttrSystem is messaging.system: the driver's name ("postgres",
	// "mysql", "redis", "rabbitmq", "mongo", "memory").
	AttrSystem = semconv.MessagingSystemKey
	// AttrDestination is messaging.destination.name: the queue.
	AttrDestination = semconv.MessagingDestinationNameKey
	// AttrOperationName is messaging.operation.name: "send" or "process".
	AttrOperationName = semconv.MessagingOperationNameKey
	// AttrOperationType is messaging.operation.type: "send" or "process".
	AttrOperationType = semconv.MessagingOperationTypeKey
	// AttrMessageID is messaging.message.id.
	AttrMessageID = semconv.MessagingMessageIDKey
	// AttrBatchCount is messaging.batch.message_count, set on enqueues of
	// more than one message.
	AttrBatchCount = semconv.MessagingBatchMessageCountKey
	// AttrErrorType is error.type: "permanent", "panic", "timeout",
	// "canceled" or "_OTHER" for a failed job, the error class for a failed
	// enqueue.
	AttrErrorType = semconv.ErrorTypeKey
	// AttrKind is fila.message.kind: the message's kind.
	AttrKind = attribute.Key("fila.message.kind")
	// AttrAttempt is fila.message.attempt: the delivery's attempt, on job
	// spans.
	AttrAttempt = attribute.Key("fila.message.attempt")
	// AttrOutcome is fila.job.outcome: what the worker did with the job.
	AttrOutcome = attribute.Key("fila.job.outcome")
	// AttrState is fila.message.state: ready, delayed, leased or dead.
	AttrState = attribute.Key("fila.message.state")
	// AttrLimit is fila.limit: the limit a throttled receive waited for,
	// concurrency or rate.
	AttrLimit = attribute.Key("fila.limit")
)

// Operation names (messaging.operation.name) of Fila's spans and metrics.
const (
	opSend    = "send"
	opProcess = "process"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/fila-go/fila/filaotel"

// durationBuckets are the histogram boundaries of job run times in
// seconds: the semantic conventions' advice up to 10s, then longer jobs.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300, 600}
