package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Test hooks.

// ListenerUp reports whether d's LISTEN connection is up.
func ListenerUp(d *Driver) bool { return d.waiters.listening.Load() }

// Sleeping returns how many receives of d are waiting for a wake-up.
func Sleeping(d *Driver) int64 { return d.sleeping.Load() }

// MigrateTo applies the migrations up to version upTo.
var MigrateTo = migrateTo

// ClaimRuns is claimRuns over receipts in their text form.
func ClaimRuns(receipts []string) (pgtype.UUID, []int64, bool) {
	return claimRuns(pgUUIDs(receipts))
}

// ChannelName is the notification channel of a schema.
var ChannelName = channelName

// SetQuietFor sets how long a quiet mark of d spares claims (quietMax
// by default): a test that checks a receive skips its claim sets it long,
// so that a loaded machine does not end the mark first.
func SetQuietFor(d *Driver, v time.Duration) {
	d.waiters.mu.Lock()
	defer d.waiters.mu.Unlock()
	d.waiters.quietFor = v
}

// QuietMax is how long a quiet mark spares claims by default.
const QuietMax = quietMax

// Claims returns how many claim statements d has run.
func Claims(d *Driver) int64 { return d.claims.Load() }

// Skipped returns how many claims d's receives did not run, their queue
// being quiet.
func Skipped(d *Driver) int64 { return d.skipped.Load() }

// CopyPublishes returns how many publishes d wrote by COPY.
func CopyPublishes(d *Driver) int64 { return d.copyPublishes.Load() }

// WholeAcks returns how many claims d settled from their token and runs
// alone (log_ack_whole).
func WholeAcks(d *Driver) int64 { return d.wholeAcks.Load() }

// ClaimSQL and AckSQL return d's claim and ack statements.
func ClaimSQL(d *Driver) string { return d.q.claim }

// NextDueSQL returns d's statement that reads a queue's next due time.
func NextDueSQL(d *Driver) string { return d.q.nextDue }

// AckSQL returns d's ack statement.
func AckSQL(d *Driver) string { return d.q.ack }

// NotificationsSent counts the wake-up notifications d's enqueues sent.
func NotificationsSent(d *Driver) int64 { return d.notifier.sent.Load() }

// NotificationSends counts the transactions the notifier sent them in.
func NotificationSends(d *Driver) int64 { return d.notifier.sends.Load() }

// NotificationsIdle reports whether d has no notification in flight.
func NotificationsIdle(d *Driver) bool { return d.notifier.idle() }

// QueueListSQL returns d's queue-listing statement.
func QueueListSQL(d *Driver) string { return d.q.queueList }

// MarkListSQL returns d's mark-listing statement.
func MarkListSQL(d *Driver) string { return d.q.markList }

// MarkSetSQL returns d's MarkSet statement (onlyNew false).
func MarkSetSQL(d *Driver) string { return d.q.markSet }

// NextWait returns how long a blocked receive of d sleeps when the queue's
// next message is due in us microseconds (nil: nothing pending).
func NextWait(d *Driver, us *int64) time.Duration { return d.nextWait(us) }

// LastRotation exposes lastRotation.
func LastRotation(d *Driver, ctx context.Context) (time.Time, bool) { return d.lastRotation(ctx) }

// SetMinLagAge lowers the age of an unread topic event that makes a
// subscription lag, and returns the restore.
func SetMinLagAge(d time.Duration) (restore func()) {
	old := minLagAge.Swap(int64(d))
	return func() { minLagAge.Store(old) }
}

// KindRegexp is kindRegexp.
var KindRegexp = kindRegexp

// MessageListSQL returns d's statement that lists a state's messages
// (state "" : the one that finds messages by id).
func MessageListSQL(d *Driver, state string) string {
	switch state {
	case "ready":
		return d.q.listReady
	case "delayed":
		return d.q.listDelayed
	case "leased":
		return d.q.listLeased
	}
	return d.q.listIDs
}
