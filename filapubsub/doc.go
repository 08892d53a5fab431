// Package filapubsub is a gocloud.dev/pubsub driver for Fila: gocloud
// topics publish to Fila topics (fan-out to every subscribed queue), and
// gocloud subscriptions receive from Fila queues, on any broker Fila
// supports (PostgreSQL, Redis, RabbitMQ, MongoDB, memory).
//
// # Use
//
// Import this package and the Fila driver of the broker, for their side
// effects, and open topics and subscriptions by URL:
//
//	import (
//		_ "github.com/fila-go/fila/filapubsub"
//		_ "github.com/fila-go/fila/postgres"
//		"gocloud.dev/pubsub"
//	)
//
//	sub, err := pubsub.OpenSubscription(ctx, "fila+postgres://app@db/app?queue=orders.billing&topic=orders")
//	topic, err := pubsub.OpenTopic(ctx, "fila+postgres://app@db/app?topic=orders")
//
// Or over a *fila.Client of your own, with OpenTopic and OpenSubscription.
//
// # URLs
//
// The scheme is "fila+" before a Fila scheme: fila+mem, fila+postgres,
// fila+postgresql, fila+redis, fila+rediss, fila+amqp, fila+amqps,
// fila+mongodb, fila+mongodb+srv, fila+mysql (Schemes). The parameters
// below are this package's; they are taken out, and the rest of the URL,
// "fila+" removed, goes to fila.Open, whose drivers refuse parameters they
// do not know.
//
//	parameter             URL           default       meaning
//	topic                 topic         (required)    Fila topic to publish to
//	kind                  topic         topic's name  Fila kind of the messages (TopicOptions.Kind)
//	max_attempts          topic         client's (10) max attempts of each message (TopicOptions.MaxAttempts)
//	require_subscription  topic         false         Send fails with NotFound when the topic has no
//	                                                  subscription (TopicOptions.RequireSubscription)
//	queue                 subscription  (required)    Fila queue to receive from
//	topic                 subscription  none          subscribe queue to this topic at open, and fail with
//	                                                  NotFound once it is unsubscribed (SubscriptionOptions.Topic)
//	lease                 subscription  client's (30s) gocloud's ack deadline (SubscriptionOptions.Lease)
//	nack_delay            subscription  0s            when a nacked message comes back (SubscriptionOptions.NackDelay)
//	receive_wait          subscription  0s            if positive, longest wait of a receive for a first
//	                                                  message; 0: until one comes (SubscriptionOptions.ReceiveWait)
//	check_interval        subscription  30s           how often to check the queue is still subscribed;
//	                                                  negative: never (SubscriptionOptions.CheckInterval)
//
// Durations are Go's (30s, 1m30s). A parameter of the other kind of URL
// (queue on a topic URL, kind on a subscription URL), a parameter given
// twice, and a value that does not parse are errors matching
// fila.ErrInvalid. Errors never carry the URL's credentials (fila.Redact).
//
// The URLOpener registered with pubsub.DefaultURLMux (DefaultURLOpener)
// opens one *fila.Client per broker URL, that is per URL without this
// package's parameters, shares it among the topics and subscriptions
// opened from it, and keeps it open until its Close: call
// DefaultURLOpener().Close() when the program is done with them, after
// shutting them down. Set its ClientOptions (fila.WithLogger, …) before the
// first open. The schemes are registered whatever Fila drivers are
// imported (they register with Fila in their own init); opening a URL whose
// driver is not imported fails with Fila's error naming the package.
//
// # Messages
//
// A send is a Fila publish: every queue subscribed to the topic at that
// moment gets a copy, with its own id (the copy of a message with id I in
// queue Q has the id fila.CopyID(I, Q)), leases, attempts and dead letters.
// A batch of sends is one Client.PublishBatch. Without subscriptions a
// publish stores nothing and succeeds, unless RequireSubscription is set.
// Subscribe first (open the subscription), then publish: a copy is made
// only for the subscriptions that exist when a message is published.
//
// The body comes back byte for byte. Metadata becomes Fila headers, and
// headers become metadata, so Fila producers and gocloud consumers (and
// the reverse) understand each other. Fila refuses header keys that are
// empty or hold control characters, which gocloud allows: such keys are
// escaped reversibly, like gocloud's own drivers do: a control character
// becomes "__0x<hex>__", the empty key "__0x__", and a literal "__0x" in a
// key has its first '_' escaped as "__0x5f__"; every other key and every
// value is stored as is (values may hold any UTF-8, NUL included). Fila's
// limits apply: header keys of at most 255 bytes (after escaping), 16 KiB
// of keys and values per message, bodies of 256 KiB by default
// (fila.WithMaxBodyBytes). A message over them fails with
// gcerrors.InvalidArgument.
//
// A received message's LoggableID is the Fila id of its copy; its As
// gives the *fila.Delivery (kind, attempt, headers as stored, deadline,
// Extend).
//
// # Delivery semantics
//
// Delivery is at least once. A receive leases each message for the lease
// (gocloud's ack deadline): unacked by then, it is delivered again, with
// its attempt one higher. gocloud does not extend leases; for work that
// may outlast one, reach the *fila.Delivery with As and Extend it, or
// raise the lease.
//
// Ack is Fila's Ack (a batch is one Client.AckBatch). An ack whose lease
// had ended (a double ack, or an ack after the ack deadline) is not an
// error, as gocloud wants: the message comes back by itself.
//
// Nack is Fila's Retry, after NackDelay (0 by default: at once, as
// gocloud's services do), with NackReason as the reason. It counts an
// attempt: a message nacked (or left to expire) as many times as its max
// attempts (TopicOptions.MaxAttempts, else the receiving client's
// fila.WithMaxAttempts, 10 by default) is dead-lettered with reason
// fila.ReasonMaxAttempts instead of being delivered again, and stays in
// the queue's dead letters (Client.DeadList, DeadReplay, the fila command)
// until replayed. gocloud has no dead-letter call; use As to reach the
// *fila.Delivery and call Dead for a message that must not be retried.
//
// A receive takes up to fila.MaxReceive messages at a time. It waits for
// the first one until gocloud ends its context (at Shutdown), and returns
// at once then. gocloud suggests that drivers wait about a second and
// return an empty batch, and ReceiveWait does that, but it is off by
// default: a wait cut short while the broker is claiming a message leaves
// that message leased and unseen until its lease ends (on RabbitMQ it
// comes back at once, with its attempt counted), and under load the tests
// saw it happen. While a receive waits, a subscription with a topic checks
// every CheckInterval that its queue is still subscribed, and ends the
// wait with NotFound once it is not.
//
// # Errors
//
// gcerrors.Code maps Fila's errors: fila.ErrInvalid and ErrTooLarge to
// InvalidArgument, ErrAccessDenied to PermissionDenied, ErrUnsupported to
// Unimplemented, ErrDuplicate to AlreadyExists, ErrClosed, ErrLeaseLost,
// ErrCancelled and ErrQueueNotEmpty to FailedPrecondition, a
// *NotFoundError to NotFound, context errors to Canceled and
// DeadlineExceeded. fila.ErrUnavailable (the broker could not be reached)
// has no gcerrors code and is Unknown, but it is the one retryable error:
// gocloud retries it with backoff. errors.Is works on the errors gocloud
// returns (errors.Is(err, fila.ErrUnavailable)), and ErrorAs reaches every
// error type in the chain (*fila.UnsupportedError, *fila.DuplicateError,
// *NotFoundError, …).
//
// # As
//
//	Topic.As, Subscription.As   **fila.Client
//	Message.As                  **fila.Delivery
//	Message.BeforeSend's as     **fila.Message (set Kind, Delay, DedupKey, headers… before it is published)
//	Message.AfterSend's as      *PublishInfo (the Fila id), **fila.Message
//	ErrorAs                     any error type in the error's chain
//
// # Caveats
//
//   - Fila has no topic that does not exist: a send to a topic without
//     subscriptions succeeds and stores nothing, unless
//     RequireSubscription is set. A subscription whose queue was
//     unsubscribed (Client.TopicUnsubscribe, which deletes the queue)
//     fails with NotFound within CheckInterval, except on RabbitMQ, which
//     cannot list subscriptions: there it waits on its empty queue.
//   - Opening a subscription with a topic subscribes its queue, every
//     time: a process restarted after an operator ended the subscription
//     subscribes it again.
//   - On FerretDB (standing in for MongoDB) two concurrent claims can take
//     one message (see package mongo); gocloud receives concurrently only
//     past fila.MaxReceive messages a batch, or with
//     SubscriptionOptions.ReceiveBatcherOptions.MaxHandlers above 1.
//   - A receive that ends while the broker is claiming a message
//     (gocloud shut the subscription down, or a ReceiveWait ran out) may
//     leave that message leased, unseen: it comes back when its lease
//     ends, as Fila documents for any receive whose context ends.
//   - Messages gocloud received ahead of Receive calls (it fetches in
//     batches) stay leased while they wait in its buffer; one that waits
//     past its lease is delivered to someone else too, and its ack is
//     then ignored (at least once).
package filapubsub
