// Package filaotel instruments Fila with OpenTelemetry: metrics that warn
// before an incident, and traces that follow a job from the request that
// enqueued it to the worker that ran it. It works the same over every
// driver.
//
//	inst := filaotel.New(client) // global providers; or WithMeterProvider, WithTracerProvider, WithPropagator
//
//	// Producers: a "send QUEUE" span, its trace context written into the headers.
//	id, err := inst.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome", Body: body})
//
//	// Workers: a "process QUEUE" span per job, child of the send span; run time and outcomes.
//	cfg := worker.Config{Queues: map[string]worker.QueueConfig{"emails": {}}}
//	inst.Instrument(&cfg)
//	w, err := worker.New(client, cfg)
//
//	// Queue gauges, polled every 15s (nil instead of names: every queue
//	// the broker holds, listed at each poll; not on RabbitMQ).
//	obs, err := filaotel.NewObserver(client, []string{"emails"})
//	go obs.Run(ctx)
//
// # Metrics
//
// The three numbers to alert on:
//
//   - fila.queue.oldest_ready.age (gauge, seconds, per queue): how long the
//     oldest ready message has waited. It grows when workers fall behind,
//     stop or crash-loop, whatever the cause, so it is the first alert:
//     "oldest ready age above N minutes for 5 minutes".
//   - fila.queue.dead_letters (gauge, per queue and fila.message.kind):
//     dead letters per kind. Alert on increases; a jump in one kind points
//     at one handler or one upstream.
//   - messaging.process.duration (histogram, seconds, per queue and
//     fila.message.kind, with error.type on failures): job run time; its
//     p95 per kind (histogram_quantile(0.95, ...) in Prometheus) shows a
//     handler slowing down before its timeout starts killing it.
//
// And around them: fila.job.outcomes (counter per queue, kind and
// fila.job.outcome: ack, retry, dead, released, lease_lost, unsettled),
// fila.queue.messages (gauge per queue and fila.message.state: ready,
// delayed, leased, dead) and messaging.client.sent.messages (counter of
// messages enqueued through Enqueue, with error.type on failures).
//
// For queues with limits (fila.QueueLimits), the Observer also reports
// fila.queue.concurrency.limit and fila.queue.concurrency.held (gauges per
// queue with a concurrency limit: the slots held by every client, read with
// one more listing of marks per poll), and counts the receives of its own
// client that waited for room: fila.receive.throttled (counter per queue and
// fila.limit: concurrency or rate) and fila.receive.throttled.wait (seconds).
// Those two are each process's figure: give the Observer the client your
// workers use, and sum over processes. On RabbitMQ, which keeps no limits,
// none of them is reported.
//
// Names and attributes follow the OpenTelemetry messaging semantic
// conventions where they define one (messaging.process.duration,
// messaging.client.sent.messages, messaging.system, messaging.destination.name,
// messaging.operation.name, messaging.message.id, error.type); Fila's own
// are under fila.*. messaging.system is the driver's name (postgres, redis,
// rabbitmq, mongo, memory). The queue gauges come from an [Observer] that
// polls the stats of named queues (the drivers cannot list queues); drivers
// without stats report nothing and its Poll returns fila.ErrUnsupported.
//
// # Tracing
//
// Enqueue, EnqueueBatch and EnqueueTx run the enqueue in a producer span
// named "send QUEUE" and write its trace context into each message's headers
// through the propagator (WithPropagator, default the global one: set
// otel.SetTextMapPropagator(propagation.TraceContext{}) or the headers stay
// empty). The worker middleware reads it back, so the consumer span "process
// QUEUE" of the job is a child of the send span — and so of the request that
// enqueued — even when the job runs minutes later on another machine. A job
// retried three times has three process spans under the same send span.
// The handler's context carries the job span, so the handler's own spans
// and logs nest under it.
//
// For messages built elsewhere (a worker.Kind's Message), call Inject before
// enqueueing; code that receives without package worker calls StartProcess.
package filaotel
