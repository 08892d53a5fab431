// Package fila is one queue API over PostgreSQL, MySQL (and MariaDB),
// Redis, RabbitMQ, MongoDB and an in-memory broker, with one conformance
// suite that proves they keep the same promises. Start on the Postgres or
// MySQL you already run; move to another broker later by changing a URL,
// with the workers untouched.
//
//	c, err := fila.Open(ctx, "postgres://localhost/app") // or mysql://, redis://, amqp://, mongodb://, mem://
//	id, err := c.Enqueue(ctx, "emails", fila.Message{Kind: "welcome", Body: []byte(`{"user_id":42}`)})
//
//	ds, err := c.Receive(ctx, "emails", fila.ReceiveParams{Max: 10, Lease: time.Minute})
//	for _, d := range ds {
//		if err := send(d); err != nil {
//			d.Retry(ctx, time.Minute, err.Error())
//			continue
//		}
//		d.Ack(ctx)
//	}
//
// Most applications run handlers with package worker instead of writing this
// loop.
//
// Open connects to the broker and checks that it answers before it returns
// (like sql.Open followed by Ping, in one call that honours its context), on
// every driver: a broker that cannot be reached fails at Open with an error
// matching ErrUnavailable, not at the first call. Once open, a client rides
// out broker outages: calls fail with ErrUnavailable meanwhile, and the
// driver reconnects by itself.
//
// # Delivery semantics
//
// Delivery is at least once. Enqueue returns once the broker has stored the
// message at its durability level. Receive hands a message out under a lease
// (visibility timeout): until the lease's deadline no other Receive returns
// it. A delivery is then settled once: Ack (done, never delivered again),
// Retry (back after a delay, with a reason), or Dead (to the queue's
// dead-letter store, with a reason, until replayed); Extend pushes the
// deadline while work goes on. A lease that ends unsettled — a crashed
// process, a hung handler, a lost connection — makes the message receivable
// again. Attempts count every delivery, crashes included; a delivery whose
// attempt would exceed the message's max attempts is dead-lettered with
// reason "max attempts exceeded" instead of being handed out, so a poison
// message that kills its consumer every time ends in the dead letters.
//
// A message keeps the history of its latest errors: each Retry's reason,
// with the attempt and the time, goes to Delivery.Errors of its later
// deliveries (LastError is the latest reason), and a dead letter has, beside
// its Reason, the errors before it (DeadLetter.Errors); a dead letter of max
// attempts thus shows why its attempts failed. The client keeps the
// history in the reason it gives the driver, so every driver has it.
//
// A lease ends at its deadline. Ack, Retry, Dead and Extend with a receipt
// that is no longer current — its deadline has passed (whether or not
// someone took the message since), someone else holds the message, or it
// was already settled — return ErrLeaseLost and change nothing; the message
// comes back with its next attempt. Extend a lease before it ends if the
// work needs longer (package worker does this by itself). A dead letter
// records the deliveries its message had: for one dead-lettered on max
// attempts, its max attempts. What was enqueued is what every delivery and
// dead letter carries, byte for byte: the client and the drivers keep their
// own copies, so a producer may reuse its buffer once Enqueue returns and a
// handler may change the body it got. There is no ordering promise across
// competing consumers. Handlers must be idempotent: put ids in messages,
// not objects.
//
// # Limits
//
// The client checks every limit once, for every driver, and refuses what
// passes one with ErrInvalid or ErrTooLarge, storing nothing. They are what
// every broker can carry, so a message valid on one broker is valid on all
// of them and a queue can move between brokers:
//
//	queue name        1–128 ASCII letters, digits, '.', '_', '-' (MaxQueueNameLen)
//	kind              1–255 bytes of printable UTF-8 (MaxKindLen)
//	header key        1–255 bytes of printable UTF-8 (MaxHeaderKeyLen, AMQP's limit)
//	headers           16 KiB, keys and values together (MaxHeaderBytes); values UTF-8
//	body              256 KiB by default (WithMaxBodyBytes), at most 15 MiB (MaxBodyBytes)
//	batch             10,000 messages (MaxBatch) and 64 MiB of bodies and headers (MaxBatchBytes)
//	dedup key         512 bytes of UTF-8 without NUL (MaxDedupKeyLen)
//	max attempts      1,048,576 (MaxAttemptsLimit)
//	delay, run-at     up to 100 years ahead (MaxDelay)
//	lease             1ms to 7 days (MinLease, MaxLease)
//	receive           up to 1,000 messages a call (MaxReceive)
//	reason            16 KiB; longer reasons are cut, not refused (MaxReasonBytes)
//	error history     the latest 5 errors (MaxErrorHistory), the earlier ones' reasons
//	                  cut to 1 KiB (MaxEarlierReasonBytes); at most 20,684 bytes
//	                  stored (MaxErrorHistoryBytes)
//
// conformance.Run checks each limit at the limit and one past it on every
// driver.
//
// # Drivers
//
// A driver registers a URL scheme when its package is imported:
// github.com/fila-go/fila/memory (mem://), .../postgres (postgres://),
// .../mysql (mysql://, MySQL and MariaDB), .../redis (redis://),
// .../rabbitmq (amqp://) and .../mongo (mongodb://).
// Each driver package follows one convention, like database/sql's: its
// Open(ctx, *url.URL, backend.OpenOptions) (backend.Driver, error) is the
// backend.Opener it registers, and its New builds a *Driver from Go values
// (a pool or client the application already has, or Options) for fila.New
// (memory builds drivers with NewBroker(...).Open()).
// Optional capabilities return ErrUnsupported (an UnsupportedError naming
// the driver and the capability) where a driver lacks them: dedup keys,
// dead-letter management, stats, transactional enqueue (EnqueueTx), queue
// listing and deletion, marks (which queue pause, unique periods and
// periodic jobs need) and listing them (which MessageCancel needs), and, for
// moving a queue between brokers with a relay, taking delayed messages early
// and importing dead letters. Each driver's package documentation says which
// it lacks. The rules every driver keeps are stated in CONTRACT.md at the
// root of the repository; package backend is the interface a driver
// implements, and package conformance is the suite that checks it.
//
// # Job control: pause, cancel, unique periods
//
// Three controls act on a queue from any process, stored in the broker as
// marks (backend.Marker), so every client of every machine sees them:
//
//   - QueuePause stops every client from handing out the queue's messages
//     within the control interval (WithControlInterval, default 1s) plus
//     the broker reads of one refresh, about twice the interval:
//     a client reads the queue's marks once per interval while it receives
//     from the queue, starts no receive on marks older than that, and ends
//     a blocked Receive when it sees the pause (a message the driver was
//     claiming at that moment is given back at once, counted as a
//     delivery). A client's first Receive on a queue reads the marks
//     before it starts; later reads run beside the Receive calls. Enqueue goes on; leased messages stay leased and are settled as
//     usual. QueueResume undoes it: a Receive waiting out the pause
//     starts again within one control interval plus one read of the marks
//     (at once in the client that resumed).
//   - MessageCancel cancels a message by id. A ready or delayed message is
//     dead-lettered with reason ReasonCancelled by the first client that
//     claims it, instead of being handed out (until then QueueStats counts
//     it where it was; a delayed one waits for its run-at). A leased one
//     runs on, but within one control interval its holder's
//     Delivery.Cancelled channel closes (the worker cancels the handler's
//     context with cause ErrCancelled), and its Retry or Release
//     dead-letters it and returns ErrCancelled; an Ack still acks it.
//   - Message.UniqueFor keeps a dedup key held for a period after enqueue,
//     even when its message completed, against enqueues that also set
//     UniqueFor.
//
// Each queue a client receives from, or holds deliveries of, costs one or
// two small broker reads per control interval. Drivers without marks
// return ErrUnsupported for all three; RabbitMQ has marks but cannot list
// them, so it pauses and holds unique periods but does not cancel (it has
// no dedup keys either, so UniqueFor is refused there too). Periodic jobs,
// in package worker, use marks as well.
//
// # Flow control: concurrency and rate limits
//
// QueueLimitsSet bounds a queue's work across every client of the broker,
// in every process: at most Concurrency of its messages leased at once,
// at most Rate handed out per Per with bursts of Burst. The limits are a
// mark, read with the pause and cancel marks once per control interval;
// the client that sets them applies them at once, the others within an
// interval and one read. A Receive that would pass a limit hands out what
// fits and waits for room; the worker's fetch loop goes through Receive,
// so a Worker obeys them with no change. Clients enforce them with marks
// too:
//
//   - a concurrency slot is a mark held from the claim to the settlement
//     (or, after a crash, until shortly after the lease would have ended);
//     a client keeps freed slots for its next Receive, for a control
//     interval at most, while fewer than half are taken;
//   - the rate is a generic cell rate algorithm over chunk marks: any
//     window of length W holds at most W·Rate/Per + Burst deliveries.
//
// Lowering the concurrency limit applies as the messages running settle.
// A handler that outlives its lease may run beside the next holder of its
// message, as always; its slot may then be counted for only one of them.
// The rate assumes the clients' clocks agree to well within Per/Rate.
// Under a rate limit, or a concurrency limit half taken or more,
// AckReceive only acks (waiting for room is Receive's); far below a
// concurrency limit, the acked deliveries' slots pass to the messages it
// claims, so the ack and the claim stay one round trip. Drivers that cannot
// list marks (RabbitMQ) return ErrUnsupported.
//
// QueueLimitsUsage reports the slots held, by every client; QueueThrottled
// reports, with no round trip, how often and how long this client's calls
// waited for room, to export as a metric (package filaotel's Observer
// does: fila.queue.concurrency.limit and .held, fila.receive.throttled and
// fila.receive.throttled.wait).
//
// # Workflows: steps that wait for others
//
// WorkflowStart stores a workflow: steps, each a message for a queue, some
// waiting for others (WorkflowStep.After). The steps that wait for none are
// enqueued at once; every other step is enqueued when the last of its
// dependencies is acked, by that ack, whoever runs it. Chains, diamonds and
// fan-ins ("when all 200 thumbnails are done, build the album": one step
// waiting for up to MaxWorkflowSteps others) are the same thing. Steps may
// use different queues and so run in different workers; a step's handler
// needs no change, except to leave a result (Delivery.SetResult, at most
// MaxResultBytes) that the steps waiting for it read with
// Client.WorkflowResults.
//
// The bookkeeping is the portable layer's, in the broker, alike on every
// driver with marks, dead-letter listing and dead-letter import (all of
// Fila's): the workflow's definition and its results are dead letters of a
// queue of its own, fila.wf.<id> (QueueList does not list it; WorkflowList
// lists workflows), and its progress is marks there. It runs under the
// step's lease before the ack, and every write in it is idempotent, so a
// process that dies at any moment leaves the step to be delivered again,
// run again (at least once, as every message) and its bookkeeping to be
// redone. Of the acks that find a step's dependencies all done, one
// creates its release mark (of concurrent callers in any processes exactly
// one), enqueues it and marks it enqueued. A step is enqueued exactly
// once, except in one case: when the process that won the release died
// between the enqueue and that mark (or is still between them while a
// dependency that raced and lost is redelivered and acked), the
// dependency's next delivery enqueues the step again unless the step is
// done; a driver with dedup
// keys (all but RabbitMQ) refuses that copy while the first is pending,
// so there a second copy needs the first one to complete within that
// round trip as well. An ack costs, besides the ack, a mark read, one mark
// write per step waiting for it, a mark listing (RabbitMQ: a read per
// dependency until one is missing) and the release; a result adds a dead
// letter import (RabbitMQ: which reads the workflow's stored results, so
// keep results few on a large fan-in there).
//
// A step that is dead-lettered holds back every step waiting for it
// (WorkflowShow reports them pending, BlockedBy naming it); replaying it
// (DeadReplay) lets the workflow go on. WorkflowCancel stops releases and
// dead-letters every step not done with reason ReasonWorkflowCancelled:
// pending ones at once, queued ones when claimed (MessageCancel, where
// the driver can cancel) or at their ack, which returns ErrCancelled.
// WorkflowShow reads each step's status (pending, ready, running, done,
// dead); WorkflowDelete removes the bookkeeping. WorkflowStart is not
// atomic: a call that fails part way says so, and the workflow can be
// cancelled or deleted and started again.
//
// # Fan-out: topics and subscriptions
//
// A topic has subscriptions, and each subscription is a queue. Publish
// stores a copy of the message in every queue subscribed to the topic at
// that moment; each copy then lives on its own, with its own leases,
// attempts, retries, dead letters, stats and dedup keys, and a worker, the
// CLI or Relay consume a subscription as they consume any queue:
//
//	c.TopicSubscribe(ctx, "orders", "orders.email")
//	c.TopicSubscribe(ctx, "orders", "orders.audit")
//	id, err := c.Publish(ctx, "orders", fila.Message{Kind: "order.placed", Body: body})
//	// "orders.email" and "orders.audit" each hold a copy; the copy in q has
//	// the id fila.CopyID(id, q).
//
// A message published before a subscription existed is not delivered to
// it; TopicUnsubscribe deletes the subscription's queue with what it holds.
// A topic without subscriptions stores nothing and Publish succeeds.
// Drivers that implement backend.Topics make the copies in the broker
// (RabbitMQ: a fanout exchange, one publish per message; PostgreSQL's log
// mode stores each message once, and each subscription reads it through a
// read position of its own). For the others
// the portable layer keeps the subscriptions as marks of the topic and
// enqueues the copies, one Enqueue per subscription, concurrently: a
// publish that fails part way may have stored some subscriptions' copies,
// and publishing again gives those a second copy (at least once). PublishTx
// copies inside the caller's transaction on drivers with EnqueueTx, which
// is the outbox for topics.
//
// A subscription may take only some kinds: KindPattern("order.*.refunded")
// in AMQP topic syntax ("*" one word, "#" zero or more), the same rule
// (KindMatch) on every broker; RabbitMQ routes in the broker, the others
// where they copy or read.
//
// # Priorities
//
// Message.Priority is a level from 0 (the default, lowest) to MaxPriority
// (highest): a queue's ready messages of a higher level are handed out
// first, and delays, retries, dead letters and moves keep the level.
// Strict priority can starve the lower levels; the worker's shared slots
// with weights (worker.Config.Concurrency, QueueConfig.Weight) are the way
// out. Drivers without priorities refuse a level above 0 with
// ErrUnsupported.
//
// # Errors
//
// The errors calls return are classified with errors.Is, the same way on
// every driver, and the class says whether to retry. The classes exclude
// each other, except that Open's error for a broker that did not answer
// before its context ended matches both ErrUnavailable and the context's
// error:
//
//   - ErrInvalid: a bad argument, URL, URL parameter or option; nothing was
//     stored. Do not retry; fix the input (the message names it).
//   - ErrTooLarge: a body or header set over the limit; nothing was stored.
//     Do not retry as is.
//   - ErrDuplicate: the dedup key is held by a pending message
//     (DuplicateError has its id), or by a unique period (an empty id).
//     Not a failure to retry: the message is already queued or was run.
//   - ErrCancelled: Retry or Release of a delivery whose message was
//     cancelled; it was dead-lettered instead. Do not retry.
//   - ErrLeaseLost: the receipt is no longer current (the lease expired and
//     the message may be with someone else, or it was settled already);
//     nothing changed. Do not retry the settlement; the message comes back
//     by itself, so handlers must be idempotent.
//   - ErrClosed: the client was closed. Do not retry on it.
//   - ErrUnsupported: the driver lacks the capability (UnsupportedError
//     names it). Do not retry.
//   - ErrUnavailable: the broker could not be reached or asked to come back
//     later (lost or refused connection, failover, loading, out of
//     resources). Retry with backoff; the client reconnects by itself. A
//     retried Enqueue may store the message twice, a retried settlement may
//     report ErrLeaseLost after the first attempt had in fact succeeded.
//   - ErrAccessDenied: the broker refused the credentials or the
//     permissions the operation needs. Do not retry; fix the credentials or
//     the grants.
//   - ErrQueueNotEmpty: QueueDelete without Force found messages or dead
//     letters. Retry only with Force, if deleting them is meant.
//   - context.Canceled, context.DeadlineExceeded: the call's context ended,
//     returned as the context's own error; the call may or may not have
//     taken effect (a message claimed meanwhile comes back when its lease
//     expires). Retry with a new context if the work is still wanted.
//
// Anything else is a failure the driver could not classify (an unexpected
// broker reply, for example); treat it as not retryable unless you know
// better.
//
// # Logging
//
// Everything Fila logs goes to the logger of WithLogger (default
// slog.Default()): the client's own events and, for a client made by Open,
// its driver's, including the lines of the broker's client library where
// the driver can route them (go-redis's, at Debug; see package redis).
// Credentials never appear in them (see Redact). A broker outage is logged
// with a bounded number of lines at Info and above, however long it lasts:
// a Warn when it starts, the retries at Debug with a Warn reminder after 1,
// 2, 4, … minutes, an Info when it ends (package worker's receive loop and
// the otel Observer follow the same rule).
package fila
