// Package worker runs jobs from Fila queues: it receives messages, runs the
// handler registered for each message's kind, and acks, retries or
// dead-letters the message by one outcome policy, so applications never
// write the receive loop themselves. It works unchanged over every Fila
// driver.
//
//	w, err := worker.New(client, worker.Config{
//		Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 20}},
//	})
//	worker.Handle(w, SendWelcomeJob, sendWelcome) // a typed job, see Kind
//	w.HandleFunc("report.build", buildReport)     // or a plain handler
//	err = w.Run(ctx)                              // until ctx ends
//
// # Delivery semantics
//
// Delivery is at least once: a job whose worker crashes, hangs past its
// lease or loses its connection is delivered again, and a job can also run
// twice when its lease is lost while it runs. Handlers must be idempotent
// (check whether the effect already happened before applying it; put ids in
// messages, not whole objects). Ordering is not guaranteed.
//
// # Outcome policy
//
// When the handler returns, the worker applies exactly one outcome:
//
//   - nil: the message is acked. Acks are batched: the job frees its slot
//     when its handler returns and hands the message to its queue's acker,
//     which acks the successes that finish close together with one
//     Client.AckBatch (one round trip). When the driver acks and claims in
//     one round trip (backend.AckReceiver: Redis, PostgreSQL), the receive
//     loop sends them with its next claim instead (Client.AckReceive). The
//     job's end is reported (Config.OnJobEnd, logs) only once its ack is
//     stored or has failed.
//   - an error made by [Permanent] (checked with errors.As, so it may be
//     wrapped): the message is dead-lettered at once with the error text as
//     the reason. Permanent and transient failures never share a retry budget.
//   - any other error, on an attempt below the job's max attempts: the
//     message is retried after the kind's [Backoff] for that attempt
//     (default [DefaultBackoff]: 30s, 2m, 8m, then 10m, each shortened by up
//     to 20% at random) with the error text as its last error.
//   - any other error on the last allowed attempt: the message is
//     dead-lettered with the error text as the reason. The max attempts in
//     force is the lower of the message's own limit (fila.Message.MaxAttempts,
//     else the client's default) and Config.MaxAttempts or the kind's
//     override.
//   - a panic: recovered and treated as a transient error (a [*PanicError]);
//     the reason holds the panic value and the stack, trimmed to 4 KiB.
//   - a timeout: each job's context has a deadline (Config.Timeout, default
//     1m, or the kind's override); an error returned after it is transient
//     and wraps [ErrTimeout].
//   - an unknown kind: dead-lettered at once with the reason
//     `worker: no handler registered for kind "K"`, unless
//     Config.UnknownKind handles it.
//
// Messages delivered more often than their max attempts (after crashes,
// whose attempts count too) never reach a handler: the client dead-letters
// them with the reason "max attempts exceeded".
//
// # Leases and heartbeats
//
// Each message is received under Config.Lease (default 30s). While a job
// runs, a heartbeat extends its lease every Config.Heartbeat (default a third
// of the lease), so long jobs keep their messages. If an extension finds the
// lease lost (it expired and another consumer took the message), the job's
// context is cancelled with cause fila.ErrLeaseLost and its outcome is not
// applied: the other consumer owns the message now. Heartbeats stop at the
// job's timeout, so a handler that ignores its context cannot hold a message
// forever.
//
// # Concurrency
//
// Each queue has its own concurrency limit (QueueConfig.Concurrency). The
// worker asks Receive for at most as many messages as it has free slots, so
// no message waits leased while no goroutine can run it. A finished job's
// slot is free while its ack is in flight, and a queue has at most four
// times its concurrency of acks in flight (a job whose hand-over would
// exceed that waits, keeping its slot), so a queue holds at most five times
// its concurrency of leases: its running jobs' and its acks in flight. Acks
// in flight are gathered into batches: one AckBatch settles all that
// arrived while the previous one was on its way.
//
// # Shared slots and weights
//
// With Config.Concurrency the queues share that many slots, each within its
// own QueueConfig.Concurrency, and while several have work a freed slot goes
// to the queue holding the fewest for its QueueConfig.Weight: with weights 3
// and 1 and both queues backlogged, three jobs of the first run for each
// one of the second (asynq's weighted queues). A queue whose receive came
// back short gives back the slots it was assigned and waits for messages
// holding one. This is the way out of the starvation strict priorities
// risk: a message's Priority orders one queue's ready messages, so a queue
// whose higher levels never run dry never runs its lower ones; jobs that
// must make progress whatever the load belong in a queue of their own,
// with a weight.
//
//	w, err := worker.New(c, worker.Config{
//		Concurrency: 20,
//		Queues: map[string]worker.QueueConfig{
//			"payments": {Weight: 3},
//			"emails":   {Weight: 1},
//		},
//	})
//
// # Shutdown
//
// When Run's context ends the worker stops receiving, lets running jobs
// finish for up to Config.ShutdownGrace, then cancels their contexts (cause
// [ErrShutdown]); a job interrupted that way has its message released at once
// (not acked, not backed off) for another consumer, as do messages received
// but not yet started. Settlement after shutdown uses a fresh context bounded
// to 10s; pending acks are stored before Run returns. Run returns once every goroutine it started has ended.
//
// # Periodic jobs
//
// Config.Periodic makes the worker enqueue a message on a schedule (a cron
// expression or a fixed interval, see [Periodic]); any worker serving the
// queue runs it like any job. Every process whose Worker has a schedule of
// the same Name and Queue takes part in it, and each tick is enqueued once
// however many of them run:
//
//	worker.Config{Periodic: []worker.Periodic{{
//		Name: "invoices.nightly", Queue: "billing",
//		Cron: "0 6 * * *", Location: paris, // 06:00 in Paris
//		Message: fila.Message{Kind: "invoices.send"},
//	}}}
//
// Each enqueued copy carries the header [HeaderScheduledAt]: its tick, in
// UTC with nanoseconds, the same whichever process enqueued it.
//
// Exactly once per tick: every process computes the same ticks (Every ticks
// at multiples of Every since the Unix epoch; Cron's are wall times in
// Location), sleeps until the next one, then claims it by creating the mark
// "periodic/<Name>/<tick in Unix ns>" on Queue in the broker with
// create-if-absent, which is atomic across processes (backend.Marker): the
// one process that created the mark enqueues the run, the others skip it.
// The mark expires 70 s after the following tick, so it outlives every
// attempt on its tick: a process that wakes late still runs a tick up to
// 10 s after the following one (later, it skips the tick, which the others
// ran), and clock skew of up to a minute between processes cannot make one
// find the mark gone and claim the tick again. Where the driver enforces
// dedup keys, the run also has the dedup key
// "fila.periodic/<Name>/<tick in Unix ns>", a second guard while it is
// pending (an ErrDuplicate enqueue counts as done).
//
// The winner retries an enqueue that fails with fila.ErrUnavailable or a
// timeout, with backoff from 100ms to 2s, until the following tick; if it
// still fails (or fails with any other error), the worker deletes the mark
// and logs an Error that the run was missed. Enqueued runs log at Debug; a
// failing enqueue or claim logs a Warn at its first failure, Debug for the
// retries and an Info when it works again.
//
// What can miss a run: a process that dies (or is stopped for good by a
// broker outage) after its claim and before its enqueue took the tick with
// it; no other process runs that tick. A claim whose MarkSet failed (a
// timeout) may have been stored anyway: the process cannot tell, so it
// assumes another process won and logs an Error. Both windows are short
// (one round trip each), and both lose a run rather than run it twice.
// A run is then missed the way any tick passed while no process ran is.
//
// Missed ticks (while no process ran the schedule) follow Periodic.Missed:
// MissedSkip, the default, ignores them; MissedRunOnce makes a starting
// worker enqueue the most recent tick before its start, once, if no process
// had enqueued it (its mark, which lives past the following tick, is
// absent). Marks live in the broker: a broker that lost them (an in-memory
// broker restarted) cannot tell an old tick was run.
//
// Time zones: Cron reads its fields in Location (default UTC). On a day a
// daylight-saving change skips a wall time (02:30 on a spring-forward night
// in Europe or America), a schedule at that time does not run; on a day
// one is repeated (01:30 on a fall-back night), it runs at both instants.
// Schedules that must run once a day whatever the zone's rules use UTC or
// a time outside 01:00 to 03:00. Every is independent of time zones.
//
// Drivers: periodic jobs need marks in the broker (backend.Marker); New
// returns an error matching fila.ErrUnsupported for a driver without them.
// The memory driver has them; see each driver's documentation for the
// others. The scheduler is one goroutine per Worker, started by Run and
// stopped with it; it sleeps until the next tick (at most a minute at a
// time, to follow steps of the wall clock). A claim or enqueue in flight
// when Run's context ends is finished (bounded to 10s) before Run returns,
// without further retries.
//
// # Observability
//
// Every job's context carries a logger ([Logger]) with the queue, kind, id
// and attempt as attributes; the worker logs outcomes through it.
// Config.OnJobStart and Config.OnJobEnd report each job's start and end with
// its duration and [Outcome] for metrics, and Config.Middleware wraps every
// handler for logging, metrics or tracing.
//
// # Presence
//
// A running Worker records itself in each queue it serves: a mark in the
// broker naming its host, process id, the queue's concurrency, the shared
// slots and when Run began, renewed every Config.Presence (10s), deleted
// when Run returns, and expiring three intervals after its last renewal
// when the process died. [PresenceList] reads a queue's records, for every
// client of the broker; the dashboard's queue page and `fila queue workers` show
// them. It needs marks the driver can list (PostgreSQL, MySQL, Redis,
// MongoDB, memory): RabbitMQ names its mark queues by hash and cannot list them, so
// there the worker records nothing and PresenceList returns an error
// matching fila.ErrUnsupported. A record costs one mark write per queue per
// interval.
//
// The schedules of Config.Periodic are recorded the same way in their
// queues (name, cron expression and time zone or interval, kind), one
// record per schedule however many processes run it: [ScheduleList] reads
// them with their last tick (the newest tick mark) and their next one. A
// schedule no process runs any more leaves the list three intervals later. Records are marks anyone with access to the broker can write:
// PresenceList replaces control characters, and displays must still treat
// the host as untrusted text.
//
// # Throughput
//
// Each running Worker also sums, per queue and per minute of the wall
// clock, the jobs that were acked, retried and dead-lettered and the wait
// of first attempts (from EnqueuedAt to the handler's start, as a
// histogram with 19% resolution), and writes one record per minute in which
// a job ended: after the minute is over, at the next presence renewal, and
// for the last minute when Run returns (a process killed without a
// shutdown loses its current minute). Records live [ThroughputKeep] (25h)
// in the broker; [ThroughputList] sums them over the worker runs, so the
// dashboard's throughput and wait charts show the past hour or day however
// recently it started. Idle minutes cost nothing; a busy one costs one
// mark write per queue and process. It needs what presence needs.
package worker
