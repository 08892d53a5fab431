package mysql

// ClaimSQL returns d's claim statement (for the plan test).
func ClaimSQL(d *Driver) string { return d.q.claim }

// NextDueSQL returns d's next-due statement (for the plan test).
func NextDueSQL(d *Driver) string { return d.q.nextDue }

// Polls returns how many next-due reads d's sleeping receives made.
func Polls(d *Driver) int64 { return d.polls.Load() }
