// Package filawatermill runs Watermill (github.com/ThreeDotsLabs/watermill)
// on Fila: a message.Publisher and a message.Subscriber over a *fila.Client,
// so a Watermill application gets Fila's leases, retries and dead letters
// on PostgreSQL, MySQL, Redis, RabbitMQ, MongoDB or the in-memory broker, chosen
// by the client's URL. It is a Go module of its own
// (github.com/fila-go/fila/filawatermill), so Fila itself does not depend
// on Watermill.
//
//	c, err := fila.Open(ctx, "postgres://app@db/app?fila_migrate=true")
//	pub, err := filawatermill.NewPublisher(c, filawatermill.PublisherConfig{})
//	sub, err := filawatermill.NewSubscriber(c, filawatermill.SubscriberConfig{ConsumerGroup: "billing"})
//
//	router, err := message.NewRouter(message.RouterConfig{}, logger)
//	router.AddHandler("bill", "orders", sub, "invoices", pub, handler)
//	err = router.Run(ctx)
//
// The Publisher and the Subscriber do not own the client: close them, then
// the client. examples/router is a whole program (go run ./examples/router
// from this module's folder; FILA_URL picks the broker).
//
// # How Watermill maps onto Fila
//
// A Watermill topic is a Fila topic; a consumer group is a Fila queue
// subscribed to it, named by DefaultQueueName: topic + "." + group, for
// example "orders.billing". Publish calls Client.PublishBatch, which stores
// a copy of each message in every queue subscribed to the topic at that
// moment, so every consumer group gets every message, and the subscribers
// of one group compete for the group's copies. Subscribe calls
// Client.TopicSubscribe before it returns, then receives from the queue.
//
//	Watermill                 Fila
//	Publish(topic, msgs...)   Client.PublishBatch(topic): a copy per subscription queue
//	msg.Payload               Message.Body, byte for byte
//	msg.Metadata              Message.Headers (keys and values must be UTF-8)
//	msg.UUID                  the header _watermill_message_uuid (UUIDHeader)
//	                          (the Fila id for a message without it)
//	topic                     Message.Kind, unless PublisherConfig.Kind says otherwise
//	consumer group            a subscription queue, DefaultQueueName(topic, group)
//	SubscribeInitialize       Client.TopicSubscribe, without consuming
//	Subscribe                 TopicSubscribe, then Receive under a lease, one at a time
//	msg.Ack()                 Delivery.Ack
//	msg.Nack()                Delivery.Retry(NackDelay, NackReason)
//	a handler still running   Delivery.Extend every third of the lease
//	subscription ends         Delivery.Release of the message not yet acked
//
// PublisherConfig.EnqueueToQueue and SubscriberConfig.ReceiveFromQueue skip
// topics: Publish(name) enqueues to the queue called name and
// Subscribe(name) consumes it, so Watermill can feed, or consume, a queue
// that plain Fila producers and workers use.
//
// # Configuration
//
//	SubscriberConfig   default                 meaning
//	ConsumerGroup      "default"               the subscription; same group: compete, other group: a copy each
//	QueueName          DefaultQueueName        the queue of a (topic, group); deterministic, valid, distinct
//	ReceiveFromQueue   false                   consume the queue named by Subscribe's topic, no subscription
//	Lease              30s (fila.DefaultLease) lease of each delivery; extended every Lease/3 while held
//	NackDelay          100ms                   wait before a nacked message comes back; NoNackDelay: none
//	Prefetch           1                       messages one Receive may take; still handed out one at a time
//	Logger             discard                 a watermill.LoggerAdapter
//
//	PublisherConfig    default                 meaning
//	Kind               the topic               the Fila kind of each message
//	EnqueueToQueue     false                   enqueue to the queue named by Publish's topic, no fan-out
//	Logger             discard                 a watermill.LoggerAdapter
//
// The client's own options apply too: fila.WithMaxAttempts (how many
// deliveries before the dead letters, 10 by default), fila.WithMaxBodyBytes
// (the largest payload, 256 KiB by default) and fila.WithLogger (Fila's
// own log lines).
//
// NackDelay defaults to 100 ms, the NackResendSleep default of
// watermill-kafka: a handler that fails at once does not spin on one
// message, and the message still comes back about as soon as with
// watermill-amqp or watermill-sql, which requeue at once. Watermill's
// Retry middleware, which retries inside the handler, composes with it.
//
// # Delivery semantics
//
// Delivery is at least once (Features.ExactlyOnceDelivery is false): a
// message is delivered until a delivery of it is acked, so a crash or a
// lost lease can deliver it again, and handlers must be idempotent.
// There is no ordering promise across the competing subscribers of a
// group, and nacks, releases and expired leases reorder even for one.
//
// Each Subscribe call hands out one message at a time, as Watermill
// expects: the next one comes after the previous one was acked or nacked.
// The Subscriber acks (or retries) at the broker before it hands out the
// next message. Call Subscribe several times, or run several processes,
// for concurrency.
//
// While a message waits in the output channel or in a handler, its lease is
// extended every third of SubscriberConfig.Lease, so a slow handler is not
// given a second copy of its message; if the process dies, the lease ends
// and the message goes to another subscriber of the group about one Lease
// later. If a lease is lost anyway (the broker was unreachable for longer
// than the lease), the message's context is cancelled with cause
// fila.ErrLeaseLost, and its Ack changes nothing: it will be delivered
// again.
//
// A nack is Fila's Retry: the message comes back after NackDelay with its
// attempt one higher and LastError NackReason. Attempts count every
// delivery, including those whose subscriber died or was closed; a message
// whose next delivery would exceed its max attempts (fila.WithMaxAttempts,
// 10 by default) goes to its queue's dead letters with reason
// fila.ReasonMaxAttempts instead, where Client.DeadList shows it and
// Client.DeadReplay brings it back. So a poison message ends in the dead
// letters instead of cycling for ever, which is the job of Watermill's
// PoisonQueue middleware elsewhere. DeliveryOf(msg) gives a handler the
// delivery's Attempt, MaxAttempts and LastError.
//
// The message's context derives from Subscribe's context and is cancelled
// when the message is acked or nacked, when its lease is lost, and when the
// subscription ends (Close, the context of Subscribe ending, the client
// closing). When a subscription ends, a message handed out but not acked
// or nacked yet, and those taken by Prefetch and not handed out, are
// released (fila.Delivery.Release): other subscribers of the group get them
// at once. A release counts as an attempt, and an Ack or Nack arriving
// after it changes nothing.
//
// What Publish stores lasts as the broker keeps it (see each driver's
// documentation; mem:// for the process's lifetime). A message published
// to a topic before a group subscribed is not delivered to that group; a
// topic with no subscriptions stores nothing, and Publish succeeds. Call
// SubscribeInitialize (or Subscribe) for a group before publishing what
// the group must get. A group's queue is a queue, not a log: a message
// acked in a group is not delivered to a later subscriber of the same
// group (Watermill's NewSubscriberReceivesOldMessages does not hold).
//
// # Errors
//
// Publish returns Fila's errors wrapped with the topic (and the message's
// UUID for a single message), so errors.Is works: fila.ErrInvalid for a
// bad topic, kind or header (an empty metadata key, a value that is not
// UTF-8), fila.ErrTooLarge for a payload or metadata over the limits;
// nothing of a refused batch is stored. Subscribe returns fila.ErrInvalid
// for a bad topic or queue name, and ErrSubscriberClosed after Close.
// Failures of the receive loop are logged: a broker outage is retried with
// a backoff capped at 5 s (one Error line when it starts, one Info line
// when it ends), while a closed client (fila.ErrClosed) ends the
// subscription and closes its channel. Failed acks, nacks and lease
// extensions are logged too: their messages come back by themselves.
// Nothing logged carries credentials: the package never logs a URL, and
// Fila's errors redact them (fila.Redact).
//
// # Caveats
//
//   - Topic names follow Fila's rule: 1 to fila.MaxTopicNameLen (117)
//     ASCII letters, digits, '.', '_' and '-', starting with a letter or
//     digit. Watermill topics such as "orders/created" are refused with
//     fila.ErrInvalid; map them before publishing.
//   - A long or irregular (topic, group) pair gets a queue name ending in a
//     hash (see DefaultQueueName): the same name in every process, but not
//     one to guess; DefaultQueueName computes it.
//   - Ending a subscription is not Watermill's job: Close stops consuming
//     but keeps the subscription, so messages go on piling up in the
//     group's queue. Client.TopicUnsubscribe(topic, queue) ends it and
//     deletes the queue.
//   - Publish is one PublishBatch per fila.MaxBatch messages; where the
//     broker does not store a publish all or none (see fila.Client.Publish),
//     a failed one may have stored some copies, and publishing again
//     duplicates them: at least once, as everywhere.
//   - On RabbitMQ, messages given back (Release, a closed subscriber's
//     prefetched messages) count an attempt, as the driver documents;
//     subscribers that come and go a lot spend attempts.
package filawatermill
