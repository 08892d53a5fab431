// Command fila operates Fila queues on any supported broker: queue stats,
// listing, pausing, resuming and deleting queues, listing, showing and
// cancelling messages, dead-letter inspection, replay and purge,
// enqueueing from scripts, topics (fan-out), workflows, schema migrations,
// moving a queue to another broker, and a web dashboard.
//
// Its output is meant to be trusted: what a broker cannot know shows as
// "n/a" (null in JSON), never as 0; a queue that holds nothing and that the
// broker does not list gets a warning; a migration that moved nothing while
// the source holds ready messages fails with the reason; errors say what to
// do next.
//
// Install it with
//
//	go install github.com/fila-go/fila/cmd/fila@latest
//
// The broker URL comes from --url or the FILA_URL environment variable
// (postgres://, mysql://, redis://, amqp://, mongodb://, mem://). Its credentials are
// never printed: the password of the user part and the value of every
// credential parameter (password, sslpassword, sslkey, keyfile, token,
// secret, …; see fila.Redact) show as xxxxx, and so does any URL an error
// or warning echoes (a URL typed where a command or queue name belongs).
// Before any command the broker is pinged, within --connect-timeout
// (default 5s). A usage error points to the misused command's help ("For
// usage, see 'fila stats --help'.").
//
//	fila stats QUEUE...                 ready, delayed, leased, dead, oldest-ready age
//	fila stats --json QUEUE...          the same as JSON
//	fila stats --watch[=2s] QUEUE...    refresh until Ctrl-C (in place on a terminal)
//	fila stats --all                    every queue the broker holds
//	fila queue list [--json]            the queues that hold messages or dead letters
//	fila queue pause QUEUE
//	fila queue resume QUEUE
//	fila queue delete QUEUE [--force] [--yes]
//	fila queue workers QUEUE [--json]
//	fila queue limits QUEUE [--json]     concurrency and rate limits, slots held
//	fila queue limits QUEUE [--concurrency N] [--rate N] [--per D] [--burst N] | --none
//	fila message list -q QUEUE --state ready|delayed|leased [--limit N] [--cursor C] [--json]
//	fila message show -q QUEUE ID [--json | --raw]
//	fila message cancel -q QUEUE ID...
//	fila dead list -q QUEUE [--kind K] [--limit N] [--cursor C] [--json]
//	fila dead show -q QUEUE ID [--json | --raw]
//	fila dead replay -q QUEUE (--id ID... | --kind K | --all)
//	fila dead purge -q QUEUE (--id ID... | --kind K | --all) [--yes]
//	fila enqueue -q QUEUE -k KIND [--body S | <stdin] [--header K=V]... [--delay D]
//	             [--run-at T] [--dedup-key K] [--max-attempts N]
//	fila topic subscribe TOPIC QUEUE
//	fila topic unsubscribe TOPIC QUEUE [--yes]   also deletes QUEUE with all it holds
//	fila topic list TOPIC               the subscribed queues, one per line
//	fila topic publish TOPIC -k KIND [the message flags of fila enqueue]
//	fila topic rewind TOPIC QUEUE (--to T | --ago D)   deliver QUEUE's copies again from T
//	fila workflow list [--json]         the ids of the workflows the broker holds
//	fila workflow show ID [--json]      each step's queue, status, attempt, dependencies, reason
//	fila workflow cancel ID             dead-letter its pending steps, cancel those in queues
//	fila workflow delete ID [--force] [--yes]   its bookkeeping; its queued steps stay
//	fila schema up
//	fila migrate --from URL --to URL --queue Q [--to-queue Q2] [--include-delayed]
//	             [--include-dead] [--drain [--idle 10s]] [--batch N] [--concurrency N]
//	fila ui [--listen 127.0.0.1:8080] [--prefix /P] [--read-only] [--queue Q]...
//	        [--token T | $FILA_UI_TOKEN] [--password P | $FILA_UI_PASSWORD] [--user U]
//	fila version                        module version ("(devel)" from a checkout), Go version
//
// fila stats prints "-" for none and "n/a" for what the broker cannot tell
// (null in JSON), with the rule of package ui's dashboard: RabbitMQ reports
// neither the oldest ready time nor dead letters per kind, and counts
// delayed and leased messages only for the process that made them, so they
// are n/a ("≥N" where the process knows of some, named in the JSON's
// "lower_bounds"). A queue named on the command line that holds nothing
// gets a warning on standard error when the driver can list queues
// (backend.QueueLister) and does not list it, or cannot list queues at all,
// so a misspelt name does not pass for an empty queue. fila queue delete
// of such a queue warns the same way, and where the driver lists queues
// prints "nothing to delete" instead of "deleted" (exit 0 in both cases).
//
// fila dead list prints the driver's cursor prefixed with a short hash of
// the queue and --kind: a cursor used with another queue or kind is
// refused (exit 2) instead of paging through another listing.
//
// Replay and purge refuse to run without a selection (--id, --kind or
// --all), so a forgotten flag never means "everything". Purge asks for a
// y/N confirmation on standard input (end of input is no); --yes skips it.
// Replay resets attempts and drops dedup keys. Dead show finds the letter by
// paging through the queue's dead letters (there is no lookup by id in the
// driver contract).
//
// fila migrate moves a queue with relay.Relay (at least once: receive a batch,
// enqueue it to the target, ack it on the source). Without --drain it stops
// as soon as nothing is ready; with --drain it runs until the source stays
// empty for --idle, for a live cut-over: point producers at the target, run
// fila migrate --drain until the source is empty, retire the source. Progress
// goes to standard error (redrawn in place on a terminal), the final count
// and what is left on the source to standard output. --include-delayed and
// --include-dead need driver capabilities (backend.DelayedReceiver on the
// source; backend.DeadLetterer on the source and backend.DeadImporter on the
// target); without them the command exits 4 naming the driver and the flag
// to drop, before anything moves. A run that moved nothing while the source
// still counts ready messages exits 1 with the reason: the source queue is
// paused, or receiving from it returned nothing within the idle time (its
// claims time out, or another consumer takes the messages). It reads its
// brokers from --from and --to only: its help leaves out the global --url,
// and giving --url is a usage error.
//
// fila ui serves package ui's dashboard (queues, charts, pending messages,
// dead letters, workflows, replay, purge, delete, pause, resume and cancel
// behind a confirmation page) until interrupted.
// It listens on loopback unless --listen says otherwise, and warns when it
// does not; it prints the broker URL only redacted, and never the token or
// password, which are best given in the environment (flags show in the
// process list). On RabbitMQ name the queues with --queue.
//
// fila queue pause stops every worker of every process from receiving the
// queue's messages, within twice the clients' control interval (2s by
// default; fila.WithControlInterval); enqueueing goes on and deliveries
// already handed out run to their end. fila queue resume undoes it. The
// pause is a mark stored in the broker (backend.Marker). fila stats names
// the paused queues on a line below its table, and its JSON has "paused"
// per queue (null when the driver cannot pause queues); fila queue list
// --json adds the list of paused queues.
//
// fila queue limits shows a queue's flow control limits
// (fila.Client.QueueLimitsUsage) and the concurrency slots held now (one
// per message leased under the limit, and those clients keep for reuse);
// with --concurrency, --rate, --per or
// --burst it sets them (fila.Client.QueueLimitsSet), keeping the values of
// the flags not given (--concurrency 0 and --rate 0 remove one limit,
// --none every limit), and prints what is now in force. The limits are a
// mark stored in the broker: every client of every process obeys them
// within its control interval (1s by default); lowering the concurrency
// limit applies as the running messages settle. Invalid values exit 2 and
// change nothing; drivers that cannot list marks (RabbitMQ) exit 4.
//
// fila message list lists a queue's pending messages in one state
// (fila.Client.MessageList): ready, delayed, or leased (the jobs running
// now; the DUE column is their lease deadline and ATTEMPTS counts the
// running one), a page of --limit at a time, without their bodies. Its
// cursors are bound to the queue and --state as fila dead list's are to the
// queue and --kind. fila message show finds one message by id whatever its
// state and prints it with its headers, last error, earlier errors (attempt,
// time and first line of each; the whole history is "errors" in --json) and
// body (or --json, or the body's bytes with --raw); fila dead show prints a
// dead letter's earlier errors under its reason the same way. Listing claims nothing and changes
// nothing. Control characters in what a message holds (kind, headers,
// last error, body) print escaped as Go escapes them (, ), so
// a message cannot move the cursor or retitle the terminal; --json and
// --raw print it as it is. A message no longer pending (acked,
// dead-lettered) exits 1; drivers that cannot list messages (RabbitMQ:
// only consuming reads a queue's messages) exit 4.
//
// fila message cancel cancels messages by id (fila.Client.MessageCancel): a
// ready or delayed one is dead-lettered with reason "cancelled" by the
// first worker that claims it, instead of run; a running one's worker
// cancels its handler's context within the control interval, and its
// retry dead-letters it. Replay it from the dead letters to run it after
// all. It prints how many of the ids were waiting and running, and names
// those the queue does not hold (acked, dead-lettered, mistyped), where the
// driver can list messages; an unknown id is not an error. It needs a
// driver that can list marks (backend.MarkLister).
//
// fila topic manages fan-out (fila.Client.TopicSubscribe and the rest): a
// topic's subscriptions are queues, each of which gets its own copy of
// every message published to the topic after it subscribed, with an id of
// its own (fila.CopyID(published id, queue)); the copies are consumed,
// counted, cancelled and dead-lettered as any queue's messages (fila stats,
// fila dead, fila message cancel). fila topic publish takes fila enqueue's
// message flags and prints the published id on its first line, then how
// many subscriptions got a copy ("at least one" where the driver cannot
// count them: RabbitMQ); a topic without subscriptions stores nothing,
// with a warning (exit 0). fila topic unsubscribe ends the subscription and
// deletes the queue with everything it holds, after a y/N confirmation
// unless --yes; where the driver lists subscriptions it refuses (exit 1) a
// queue that is no subscription of the topic and holds anything, and prints
// "nothing to do" for one that holds nothing. fila topic list exits 4 on
// RabbitMQ without fila_management_url (AMQP cannot list a topic's
// subscriptions), and says
// where to look instead; a topic without subscriptions gets a warning.
// fila topic rewind (fila.Client.TopicRewind) delivers a subscription's
// copies of the messages published from a point in time again; only
// PostgreSQL's log mode can (it keeps a topic's messages for its
// fila_topic_retention), the others exit 4.
// Drivers without topics (neither backend.Topics nor listable marks) exit
// 4 for every topic command.
//
// fila workflow reads and stops workflows (fila.Client.WorkflowStart).
// fila workflow show prints the workflow's id, creation time, whether it
// was cancelled and how many steps are in each status, then a table of its
// steps: name, queue, status (pending, ready, running, done, dead; queued
// where the driver cannot tell ready from running, RabbitMQ; unknown for a
// step that moved between two reads), attempt, the steps it waits for (the
// first three, "+N more"), message id, and a note: "blocked by X" for a
// pending step whose dependency X is dead, the first line of a dead
// step's reason. Names and reasons print escaped as fila message's do;
// --json prints them as they are, with each step's whole reason. When a
// dead step blocks others the output says to replay it (fila dead replay).
// fila workflow cancel (fila.Client.WorkflowCancel) says how many pending
// steps it dead-lettered with reason "workflow cancelled" and how many in
// their queues it cancelled (on RabbitMQ: will run and be dead-lettered at
// their ack); a second cancel changes nothing. fila workflow delete
// (fila.Client.WorkflowDelete) refuses (exit 1) a workflow neither
// finished nor cancelled unless --force, asks for a y/N confirmation
// unless --yes, and prints "nothing to delete" with a warning for an
// unknown id (exit 0). show and cancel exit 1 for an unknown id, saying
// that fila workflow list shows the ids; fila workflow list needs a driver
// that lists queues (RabbitMQ: fila_management_url), else exits 4 and
// says to name the workflow instead. Drivers without workflows (marks,
// dead-letter listing and import) exit 4.
//
// fila queue list and fila stats --all need a driver that can list its
// queues (backend.QueueLister): RabbitMQ can only through its management
// API (fila_management_url), so without it name its queues. fila queue delete removes a queue with its messages, dead letters
// and broker structures; without --force it refuses a queue that holds
// anything, and it asks for a y/N confirmation unless --yes.
//
// # Exit codes
//
//	0  success
//	1  the operation failed (broker error, dead letter, message or workflow not found, purge,
//	   delete or unsubscribe declined, queue not empty without --force, a
//	   queue to unsubscribe that is no subscription of the topic, a
//	   workflow to delete not finished nor cancelled without --force, a
//	   migration that moved nothing although the source holds ready messages)
//	2  usage error or invalid input: unknown command or flag, missing flag,
//	   bad URL or URL parameter, invalid queue or topic name, workflow id, message id, kind, header or delay,
//	   body too large, PostgreSQL schema or MySQL tables not migrated (run fila schema up),
//	   a dead list --cursor used with another queue or --kind, a message
//	   list --cursor used with another queue or --state
//	3  the broker cannot be reached (open or ping failed, or timed out)
//	4  the broker's driver lacks the capability (stats, dead-letter
//	   management, dedup keys, queue listing or deletion, pausing queues,
//	   queue limits, cancelling or listing messages, migrating delayed messages or dead letters,
//	   topics or listing a topic's subscriptions, workflows, listing workflows);
//	   the message names the driver
//	5  enqueue with a dedup key held by a pending message; the holder's id
//	   is printed on standard output
//	6  the broker refused the credentials (wrong password, unknown user) or
//	   the permissions the command needs (fila.ErrAccessDenied); fix the
//	   URL's credentials or the user's grants, retrying does not help
//	130 interrupted (Ctrl-C) before the command finished; --watch ends with 0
//
// # Why cobra
//
// The command line is parsed by github.com/spf13/cobra (with pflag): it is
// the most widely used Go CLI library (kubectl, gh, docker, hugo), so its
// conventions are the ones operators already know; it gives a nested command
// tree (fila dead replay) with per-command help and examples, POSIX flags
// with repeatable values (--id, --header), required-flag checks, flags
// with an optional value (--watch or --watch=5s) and shell completion, and
// its API has been stable at v1 for years. urfave/cli v3 would do too; cobra
// won on familiarity and the subcommand-tree model.
//
// Commands are built by run, which takes its arguments, standard streams and
// environment as values, so the tests run every command in-process against
// real brokers.
package main
