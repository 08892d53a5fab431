package mongo

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

var _ backend.MessageLister = (*Driver)(nil)

// MessageList lists queue's pending messages in one state, or those p.IDs
// names whatever their state, with one find on the reporting collection
// (the configured read concern, as QueueStats and DeadList): it claims,
// locks and writes nothing. The states are QueueStats': ready is a due
// time come (an expired lease included), delayed a due time to come
// without a lease, leased a due time to come under a lease (a message
// taken early by ReceiveDelayed stays leased until its run-at, as
// QueueStats counts it).
//
// Ready messages, and messages found by id alone, come in the claim order
// (claimSort, on the claim index: highest level first, then due time, then
// id), the order Receive hands them out; delayed and leased messages come
// soonest due first (dueSort, on the due index: by run-at, by lease
// deadline, whatever the level). The cursor is the last message's place
// in that order (level, due time in Unix milliseconds, id), and a page
// starts after it by a keyset filter: an $or of index ranges, each with
// the queue, the state and the ids, so a page is read from the index
// where the cursor left off, with no sort in memory (but for the few
// messages p.IDs names, where the planner may pick the _id index):
// p.Limit+1 entries for ready messages; a delayed or leased listing also
// passes over the other state's messages due in between, the due index
// holding no lease flag.
func (d *Driver) MessageList(ctx context.Context, queue string, p backend.MessageListParams) (backend.MessagePage, error) {
	now := floorMS(time.Now())
	base := bson.D{{Key: "q", Value: queue}}
	var lo, hi *time.Time // the state's due range: (lo, hi]
	sort, byLevel := claimSort, true
	switch p.State {
	case backend.StateReady:
		hi = &now
	case backend.StateDelayed, backend.StateLeased:
		lo = &now
		base = append(base, bson.E{Key: "l", Value: p.State == backend.StateLeased})
		sort, byLevel = dueSort, false
	case "":
		if p.IDs == nil {
			return backend.MessagePage{}, backend.Invalidf("message list: name a state or ids")
		}
	default:
		return backend.MessagePage{}, backend.Invalidf("message list: unknown state %q", p.State)
	}
	var after *listCursor
	if p.Cursor != "" {
		c, err := parseListCursor(p.Cursor)
		if err != nil {
			return backend.MessagePage{}, err
		}
		after = &c
	}
	var branches []bson.D
	if after == nil {
		branches = []bson.D{listBranch(base, nil, lo, hi, p.IDs, "")}
	} else {
		branches = keysetBranches(base, after, byLevel, lo, hi, p.IDs)
	}
	if len(branches) == 0 {
		return backend.MessagePage{}, nil // the cursor is past the state's range
	}
	filter := branches[0]
	if len(branches) > 1 {
		or := make(bson.A, len(branches))
		for i := range branches {
			or[i] = branches[i]
		}
		filter = bson.D{{Key: "$or", Value: or}}
	}
	limit := max(p.Limit, 1)
	opts := options.Find().SetSort(sort).SetLimit(int64(limit) + 1)
	if p.WithoutBodies {
		opts.SetProjection(bson.D{{Key: "b", Value: 0}})
	}
	cur, err := d.msgsReport.Find(ctx, filter, opts)
	if err != nil {
		return backend.MessagePage{}, d.mapErr(ctx, err, "list messages")
	}
	var docs []msgDoc
	if err := cur.All(ctx, &docs); err != nil {
		return backend.MessagePage{}, d.mapErr(ctx, err, "list messages")
	}
	var page backend.MessagePage
	if len(docs) > limit {
		docs = docs[:limit]
		last := &docs[limit-1]
		page.Next = listCursor{level: last.Priority, due: last.Due, id: last.ID}.String()
	}
	page.Messages = make([]backend.PendingMessage, len(docs))
	for i := range docs {
		page.Messages[i] = docs[i].pending(now)
	}
	return page, nil
}

// pending is the listed message: its state at now as QueueStats tells it,
// and its due time in that state.
func (doc *msgDoc) pending(now time.Time) backend.PendingMessage {
	pm := backend.PendingMessage{Message: doc.message(), Due: doc.Due, LastError: doc.LastError}
	pm.Attempts = doc.Attempts
	switch {
	case !doc.Due.After(now):
		pm.State = backend.StateReady
	case doc.Leased:
		pm.State = backend.StateLeased
		if !doc.LeaseDeadline.IsZero() {
			// taken early: due is the later run-at, ld the deadline
			pm.Due = doc.LeaseDeadline
		}
	default:
		pm.State = backend.StateDelayed
	}
	return pm
}

// listCursor is a listed message's place in the listing's order.
type listCursor struct {
	level int
	due   time.Time
	id    string
}

func (c listCursor) String() string {
	return strconv.Itoa(c.level) + "." + strconv.FormatInt(c.due.UnixMilli(), 10) + "." + c.id
}

func parseListCursor(s string) (listCursor, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) == 3 && parts[2] != "" {
		level, lerr := strconv.Atoi(parts[0])
		ms, merr := strconv.ParseInt(parts[1], 10, 64)
		if lerr == nil && merr == nil && level >= 0 && level <= backend.MaxPriority {
			return listCursor{level: level, due: time.UnixMilli(ms).UTC(), id: parts[2]}, nil
		}
	}
	return listCursor{}, backend.Invalidf("message cursor %q is not one this driver returned", s)
}

// keysetBranches are the index ranges that follow c in the listing's order
// (by level, claimSort; else dueSort), within the due range (lo, hi]:
//
//	a lower level (claimSort only), the whole due range;
//	c's level, a later due time;
//	c's level and due time, a greater id.
//
// Each branch carries the whole filter, so that each is an index range.
func keysetBranches(base bson.D, c *listCursor, byLevel bool, lo, hi *time.Time, ids []string) []bson.D {
	var out []bson.D
	var level *bson.E // c's level
	if byLevel {
		if c.level > 0 {
			// A lower level; level 0 is stored as no p field, which sorts
			// after every number.
			lower := bson.E{Key: "p", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: c.level}}}}}
			out = append(out, listBranch(base, &lower, lo, hi, ids, ""))
			level = &bson.E{Key: "p", Value: c.level}
		} else {
			level = &bson.E{Key: "p", Value: bson.D{{Key: "$exists", Value: false}}}
		}
	}
	later := lo
	if later == nil || c.due.After(*later) {
		later = &c.due
	}
	if hi == nil || later.Before(*hi) {
		out = append(out, listBranch(base, level, later, hi, ids, ""))
	}
	if (lo == nil || c.due.After(*lo)) && (hi == nil || !c.due.After(*hi)) {
		b := listBranch(base, level, nil, nil, ids, c.id)
		out = append(out, append(b, bson.E{Key: "due", Value: c.due}))
	}
	return out
}

// listBranch is base with a level condition, due in (lo, hi] and the id
// conditions: among ids, after afterID.
func listBranch(base bson.D, level *bson.E, lo, hi *time.Time, ids []string, afterID string) bson.D {
	b := append(bson.D{}, base...)
	if level != nil {
		b = append(b, *level)
	}
	var due bson.D
	if lo != nil {
		due = append(due, bson.E{Key: "$gt", Value: *lo})
	}
	if hi != nil {
		due = append(due, bson.E{Key: "$lte", Value: *hi})
	}
	if due != nil {
		b = append(b, bson.E{Key: "due", Value: due})
	}
	var id bson.D
	if ids != nil {
		id = append(id, bson.E{Key: "$in", Value: ids})
	}
	if afterID != "" {
		id = append(id, bson.E{Key: "$gt", Value: afterID})
	}
	if id != nil {
		b = append(b, bson.E{Key: "_id", Value: id})
	}
	return b
}
