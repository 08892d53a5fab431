// Package ui is Fila's web dashboard: an http.Handler that shows every
// queue of a broker with the three numbers that tell trouble early (how
// long the oldest ready message has waited, dead letters per kind, p95 run
// time per kind), lets an operator browse a queue's ready, delayed and
// running messages, read dead letters in full, replay,
// purge or delete, pause and resume a queue, set its concurrency and rate
// limits and cancel a message, each behind a confirmation step, and follow
// or cancel workflows. It works the same on every driver (pause, limits
// and cancel where the driver has marks). `fila ui` serves it standalone.
//
// # Mounting
//
//	h, err := ui.New(client, ui.Options{
//		Prefix:   "/fila",                     // where it is mounted
//		Password: os.Getenv("FILA_UI_PASSWORD"), // basic auth; or Token for a bearer token
//		ReadOnly: false,
//	})
//	if err != nil { ... }
//	defer h.Close() // stops the sampler; the client stays open
//	mux.Handle("/fila/", h)
//
// The handler expects the full request path, prefix included (do not wrap
// it in http.StripPrefix), and builds its links with Options.Prefix. Its
// pages, script and style sheet are embedded in the binary: no build step,
// no CDN, it works offline.
//
// # Pages
//
//   - Overview (Prefix + "/"): every queue Client.QueueList names, plus
//     Options.Queues (the only ones on RabbitMQ, which cannot list its
//     queues), with ready, delayed, leased and dead counts, the oldest
//     ready age and five small charts of the last hour, with clock ticks
//     (UTC): jobs acked, retried and dead-lettered per second and the p95
//     wait of first attempts (from the workers' records in the broker),
//     the oldest ready age, dead letters per kind and the p95 run time per
//     kind. The page reloads its numbers every Options.Refresh.
//   - Queue: the same numbers and charts, the throughput and wait charts
//     over the last hour or the last day (?span=day), whether the queue is paused,
//     its limits (fila.Client.QueueLimitsUsage: "concurrency 5 (3 held
//     now), rate 50 per 1s, burst 10", "none", or n/a where the driver
//     cannot list marks, as on RabbitMQ; a short error when they cannot
//     be read), the workers running on it (worker.PresenceList: host, pid,
//     concurrency, start; n/a where the driver cannot list marks, as on
//     RabbitMQ) and its periodic jobs with their last and next tick
//     (worker.ScheduleList), dead letters per kind, and the actions. The overview
//     marks paused queues too.
//   - Messages (fila.Client.MessageList): a queue's pending messages, 50
//     a page, paged by the driver's cursor, in tabs Ready, Delayed and
//     Leased (the jobs running now: their attempt and lease deadline),
//     each with its count from the stats; id, kind, level, attempts, due
//     time, enqueue time and the first line of the last error. The lists
//     do not read bodies. A search by id (a GET form; several ids
//     separated by spaces) finds messages whatever their state, and says
//     which ids are not pending, linking those that are dead letters. One
//     message in full: state, attempts, due time or lease deadline,
//     headers, last error, the earlier errors of its history (attempt,
//     time, reason) and body, shown as a dead letter's is (the body is a
//     download too), with a link to the cancel's confirmation where the
//     driver can cancel. Listing claims nothing and changes nothing.
//     Where the driver cannot list messages (RabbitMQ: only consuming
//     reads a queue's messages; fila.ErrUnsupported) the pages say so
//     with n/a instead of failing.
//   - Dead letters: a page of 50 at a time, filtered by kind; one letter in
//     full: reason (with its stack trace), the message's earlier errors,
//     headers, and body as text when it is valid UTF-8, else as a hex
//     dump (the first 64 KiB of text or 16 KiB of bytes; the whole body is
//     a download).
//   - Workflows (linked from the header of every page): the ids of the
//     workflows the broker holds (fila.Client.WorkflowList), 50 a page,
//     and a form opening one by id. Where the driver cannot list queues
//     (RabbitMQ without fila_management_url; fila.ErrUnsupported) the page
//     says so instead of failing, and the form still opens a workflow.
//     One workflow (fila.Client.WorkflowShow): when it was created,
//     whether it was cancelled, how many steps are in each status, and a
//     table of its steps (the first 1,000; the counts cover them all):
//     name, queue, status (pending, ready, running, done, dead; queued
//     where the driver cannot tell ready from running), attempt, the steps
//     it waits for, its message id (linking its dead letter, or its
//     pending message where the driver lists messages) and a note: the
//     dead dependencies blocking a pending step ("blocked by X"), the first
//     line of a dead step's reason. The page reloads its numbers every
//     Options.Refresh. An unknown workflow id is a 404 saying where the
//     ids are.
//   - Actions: replay (one, a kind, all), purge (one, a kind, all), queue
//     delete, queue pause and resume (fila.Client.QueuePause), queue
//     limits (fila.Client.QueueLimitsSet: the queue page's form holds the
//     concurrency limit, the rate, its period in seconds or as a duration
//     such as 500ms or 1m, and the burst, filled in with the limits in
//     force, empty for none; "Remove limits" removes them all), and
//     cancel by message id (fila.Client.MessageCancel; the id goes in a
//     form field of the queue page, several separated by spaces), and
//     workflow cancel (fila.Client.WorkflowCancel, from a workflow's page
//     while it is neither cancelled nor finished: its pending steps are
//     dead-lettered with reason fila.ReasonWorkflowCancelled, those in
//     their queues cancelled where the driver can; the page after says
//     how many of each it found). Each
//     opens a confirmation page that says what will happen (with the
//     counts, or the limits in force, where the broker has them); only
//     its button acts. Limits that are not whole numbers or out of
//     fila's bounds are refused with 400 and a message saying which,
//     on the confirmation page and on the POST, and change nothing; the
//     page after the action says the limits now in force. Pause and
//     resume show only where the driver can pause queues
//     (backend.Marker), the limits and cancel forms only where it can
//     list marks (backend.MarkLister).
//
// # Charts
//
// The throughput and wait charts come from the broker, so they survive a
// restart of the dashboard: every running worker.Worker writes, per queue
// and minute, what its jobs did (worker.Throughput: acked, retried, dead,
// a histogram of the waits of first attempts), kept 25 hours, and the
// dashboard sums the records of every worker (worker.ThroughputList), per
// minute over an hour, per ten minutes over a day. A dashboard started
// after an hour of traffic shows that hour at once. Consumers that do not
// run a Worker can write the same records (worker.ThroughputRecord). They
// need marks the driver can list: on RabbitMQ the charts are n/a. The
// sampler reads the last hour's records of each shown queue at each
// interval; the day is read when a page asks for it.
//
// A sampler started by New also reads every shown queue's stats each
// Options.SampleInterval (15s) and keeps Options.History (1h) of them in
// memory: about 240 points per queue. Each p95 point covers the jobs that
// ended in the four sampling intervals before it (a minute by default).
// The run times come from Options.RunTimes: a Recorder installed in the worker of the same process
// (Recorder.Instrument), or any RunTimeSource (RunTimeFunc wraps a
// function, for example one querying Prometheus). A standalone dashboard
// has none and says so.
//
// # What a broker does not report
//
// A number the broker cannot report is shown as "n/a" with the reason on
// hover, never as 0: RabbitMQ reports neither the oldest ready time nor
// dead letters per kind, and counts delayed and leased messages only for
// the process that made them (shown as "≥ N" from what the dashboard's own
// client knows, "n/a" when it knows of none). An oldest ready age of "-"
// means nothing is ready.
//
// # Security
//
// Message bodies, headers, kinds, ids, queue names, step names, reasons
// and errors are untrusted:
// every one is escaped by html/template, and the Content-Security-Policy
// allows no inline script at all (the page's one script is an embedded
// file), so a body holding <script> shows as text and never runs.
//
//   - Authentication is optional: Options.Token admits "Authorization:
//     Bearer TOKEN" (scripts, proxies) and browsers that signed in with it
//     on the handler's form (PREFIX/login), which sets a session cookie
//     (12 hours, HttpOnly, SameSite=Strict, an HMAC under the handler's
//     random key, so a restart signs everybody out); Options.Password
//     admits HTTP basic authentication (browsers ask for it), with
//     Options.User as the user name when set. Both are compared in
//     constant time and never appear in pages, logs or errors. After five
//     wrong credentials from one address, each further attempt from it
//     waits (1 s, doubling up to a minute) and is answered 429 without its
//     credentials being checked; behind a proxy every client shares the
//     proxy's address. Without either, anyone who reaches the handler can
//     use it: mount it behind your own authentication, or on loopback.
//   - Actions are POST only, from the confirmation page's form, which
//     carries a CSRF token: an HMAC, under a random key of the handler, of
//     a random value in a SameSite=Strict, HttpOnly cookie.
//     http.CrossOriginProtection refuses cross-origin POSTs besides. A POST
//     without a valid token is refused with 403 and changes nothing.
//   - Options.ReadOnly hides every action and refuses them on the server
//     (403), confirmation pages included.
//   - Every response sets Content-Security-Policy (no inline script or
//     style, frame-ancestors 'none', form-action 'self'), X-Frame-Options
//     DENY, X-Content-Type-Options nosniff and Referrer-Policy no-referrer;
//     every page and download Cache-Control no-store (they hold message
//     data; only the script, style sheet and icon may be cached). A body
//     download is an attachment with a sandboxing policy.
//   - Options.Broker, shown in the header, goes through fila.Redact: a
//     password in the URL never shows.
//
// The handler serves plain HTTP: across a network, put TLS in front of it
// (the CSRF cookie is marked Secure when the request came over TLS). It
// does not check the Host header: a handler without credentials on
// loopback can be reached by a web page whose name its owner made resolve
// to 127.0.0.1 (DNS rebinding), so check the host in front of it, or set a
// password. fila ui does so on loopback, answering only to localhost,
// 127.0.0.1 and [::1] (and the names of --allowed-hosts, which off loopback
// are the only ones answered), and refuses to serve another address
// without credentials unless --allow-no-auth says so.
//
// # Logging
//
// Actions taken are logged at Info on Options.Logger (queue or workflow, selection,
// count or limits, remote address, basic-auth user name), failed broker calls at
// Warn, refused requests at Debug. The sampler's failures follow Fila's
// outage rule: a Warn when they start, Debug while they last with a Warn
// reminder after 1, 2, 4… minutes, an Info when reading works again.
//
// # Pause, resume, limits, cancel
//
// A pause is stored in the broker: within twice the clients' control
// interval (2s by default) no worker of any process receives the queue's
// messages, until it is resumed; enqueueing goes on and running jobs
// finish. A cancelled message that waits is dead-lettered with reason
// fila.ReasonCancelled by the worker that next claims it; a running one's
// handler sees its context cancelled and a retry dead-letters it. Replay
// it from the dead letters to run it after all. Where the driver lists
// messages, the page after a cancel says how many of the ids were waiting
// and running and how many the queue does not hold (acked, dead-lettered,
// mistyped); elsewhere it says the cancel is recorded. Limits are stored
// in the broker too: every client of every process obeys them within a
// few seconds, and a lower concurrency limit applies as the running
// messages settle. The held count is the concurrency slots the clients
// hold now. A message id typed into
// the cancel form is untrusted like every other value: it is escaped
// wherever it is shown, and the cancel is logged with it.
package ui
