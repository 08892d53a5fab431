// Package faults holds Fila's process-level fault tests. They prove, against
// real brokers and with real SIGKILLs, that a crash loses no message and that
// the duplicates it causes stay within what the crash explains:
//
//   - TestWorkerCrash, on PostgreSQL, Redis and RabbitMQ (the test servers
//     of internal/testenv): 10,000 messages, 4 worker processes (the test
//     binary started again as a fila.Client with a worker.Worker), 5 SIGKILLs
//     of a random busy worker at random points of progress, each killed
//     worker restarted at once. Every message is handled (0 lost), the queue
//     is empty at the end, and every message delivered more than once was in
//     flight in a killed process (received by a handler there and not acked)
//     as many times as it was delivered again; so duplicates never exceed
//     the messages in flight at the kills.
//   - TestFanoutCrash, on PostgreSQL in both modes (skip-locked, and log
//     with fila_rotate_interval=300ms so rotation runs throughout), Redis,
//     RabbitMQ and MongoDB (FerretDB here), one broker after another: a
//     topic with 3 subscriptions (their queues are ordinary queues), 2,000
//     messages (the run had 5,000) published in batches of 100 while one worker process per
//     subscription (lease 2 s) consumes, 5% of first attempts failing and
//     retried after 200 ms, 5 SIGKILLs of a random busy worker at random
//     points of the overall progress, each killed one replaced at once.
//     Per subscription: every message handled (0 lost), the queue empty at
//     the end, and every duplicate explained by the kills as in
//     TestWorkerCrash (a stored retry explains one more delivery). A
//     subscription with messages waiting that handles none for 20 s fails
//     the run at once, naming it, its progress, its queue's counts and its
//     process, whose goroutines a SIGQUIT prints (the log mode once stalled
//     so: log_receive returned more than Max and the worker deadlocked).
//     On FerretDB, whose claims cost a scan of the pending documents each
//     and whose operations take seconds under load, the run is 150
//     messages with a 10 s lease and 4 jobs per process. A driver without
//     topics is skipped, naming why.
//   - TestWorkflowCrash, on PostgreSQL in both modes, Redis and RabbitMQ,
//     one after another: a workflow whose callback waits for 2,000 steps
//     (600 on RabbitMQ, where each mark is a queue), run by 3 worker
//     processes serving both queues, 4 SIGKILLs at random points and a
//     fifth at the ack that releases the callback. Every step handled (0
//     lost), duplicates explained by the kills, the callback delivered once
//     (plus once per kill it was in flight at: enqueued exactly once) and
//     only after every step, WorkflowShow reporting the workflow done.
//     FerretDB is skipped (its claims are not atomic).
//   - TestBrokerCrash: a private broker on its own port and data directory
//     (redis-server with appendonly yes and appendfsync always; an initdb'd
//     PostgreSQL cluster; a second RabbitMQ node with its own node name,
//     ports and mnesia directory; for the mysql driver a mariadbd on a
//     mariadb-install-db'd data directory, innodb_flush_log_at_trx_commit=1,
//     no binary log), a producer and a worker on one
//     fila.Client, the broker killed with SIGKILL mid-run and started again
//     on the same port and data. Every message whose Enqueue returned nil is
//     handled (the producer retries failed enqueues, so duplicates are
//     allowed), and the same producer and worker enqueue, handle and ack
//     again within 5 s of the broker answering.
//   - TestAnalyze: the ledger accounting on hand-written ledgers, including
//     the duplicates it must refuse.
//   - TestPeriodicProcesses, on every broker whose driver keeps marks
//     (backend.Marker; a driver without them is skipped, naming why): 3
//     worker processes run one 1-second periodic schedule for 20 s, with
//     dedup keys off so the marks alone keep runs single. Every tick from
//     when all processes run until they are stopped is in the queue
//     exactly once, and no tick is there twice.
//
// Run one case (each needs its broker; the broker-crash tests need the
// server programs, which scripts/services installs):
//
//	eval "$(scripts/services)"
//	go test -race -run 'TestWorkerCrash/redis' ./internal/faults
//	go test -race -run 'TestBrokerCrash/rabbitmq' -v ./internal/faults   # -v prints the figures
//	go test -race -run 'TestFanoutCrash/postgres-log' -v ./internal/faults
//
// The whole package takes about three minutes on a 2-core machine,
// TestFanoutCrash about two of them.
// Each run logs its random seed; FILA_FAULTS_SEED=N replays the kill moments
// and victims (not the processes' own timing). As everywhere in Fila's tests,
// a missing server or program skips a test, and fails it when CI is set.
//
// # Ledgers
//
// Each worker process appends to its own ledger file, one write(2) per line
// on a file opened with O_APPEND, so a line whose write returned survives a
// SIGKILL (the kernel holds it; fsync would only matter for a machine
// crash):
//
//	R <id> <seq> <attempt>   a handler received the message (its first act)
//	H <id> <seq>             the handler succeeded (before the ack call)
//	F <id> <seq>             the handler failed on purpose (before the Retry call)
//	A <id> <unix ns>         the ack is stored (the worker's OnJobEnd)
//	X <id> <outcome> <unix ns>
//	                         the job ended another way: retry (stored; the
//	                         message comes back once more), lease lost, ...
//
// A message's identity is its sequence number (the body). A message is in
// flight at a kill when the killed process's ledger has its R line and no A
// line. Messages a killed process had received from the broker but never
// handed to a handler (a client-side buffer, a batch not yet started) are
// not in flight: if they come back twice, that is a defect the test
// reports, naming the message and the processes that received it. A
// stored retry is not in flight: it explains exactly one more delivery.
//
// RabbitMQ acks are basic.ack frames the broker never answers: a process
// killed just after writing one can die before the broker has read it (the
// kernel resets the connection), and the message comes back although Ack
// returned nil. On RabbitMQ only, messages acked (or retried: the retry's
// copy is confirmed, the ack of the original is such a frame) less than a
// second before a kill therefore count as in flight too (the figures show
// them as +N). A RabbitMQ Retry publishes its copy (confirmed) and then
// acks the original, so a process killed between the two leaves both, at
// the same attempt (the crash window rabbitmq's doc states): in the fan-out
// run a Retry under way at a kill (an F line with no outcome) explains one
// more delivery (+Nr). Without the F line such a copy showed as an
// unexplained duplicate, in about one RabbitMQ run in three.
//
// # Private brokers
//
// Private instances listen on free ports on 127.0.0.1 and live in fresh
// directories under the system temp directory, removed at the end. A
// PostgreSQL cluster and a RabbitMQ node run as the postgres and rabbitmq
// users when the test runs as root (the RabbitMQ node shares the machine's
// epmd and, as that user, its Erlang cookie, so `rabbitmqctl -n NODE`
// reaches it). A MariaDB server runs as the test's own account
// (--user=root when that is root) with --no-defaults, so no option file of
// the machine applies; its socket, pid file, temporary files and log are in
// its directory, and its root account has no password. A kill SIGKILLs the
// broker process (for RabbitMQ the beam.smp the start script runs) and
// every process it started, found by walking /proc from the process the
// test started; nothing else on the machine is ever signalled.
//
// Two settings are the brokers' limits, not Fila's. RabbitMQ 3.10 saves the
// quorum queues' Raft directory and metadata (dets tables) every 500 ms and
// 5 s: a node killed sooner after a queue's declaration brings that queue
// back as a leaderless empty follower on which every publish and consume
// hangs, so the broker-crash test kills the node only once its queue is 6 s
// old.
package faults
