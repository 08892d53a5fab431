package mongo

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// markDoc is a mark of a queue, in the marks collection.
type markDoc struct {
	// ID is queue + "\x00" + name (queue names never hold a NUL), so the
	// unique _id makes the mark unique per queue and name.
	ID    string `bson:"_id"`
	Queue string `bson:"q"`
	Name  string `bson:"n"`
	// Until is the expiry, nil (null) for a mark that never expires.
	Until *time.Time `bson:"u"`
}

// live reports whether the mark has not expired at now.
func (m *markDoc) live(now time.Time) bool {
	return m.Until == nil || m.Until.After(now)
}

func markID(queue, name string) string { return queue + "\x00" + name }

// markUntil is the stored expiry of a mark expiring at t: null for the
// zero time (never), else t rounded up to the millisecond, the precision of
// BSON dates, so a mark never expires early.
func markUntil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ceilMS(t)
}

// markSetRetries bounds the attempts of a MarkSet without onlyNew that
// keeps meeting a concurrent insert of the same mark.
const markSetRetries = 3

// MarkSet creates or replaces mark name of queue, expiring at until (the
// zero time: never), with one upsert (backend.Marker).
//
// With onlyNew the upsert's filter matches the mark only when it has
// expired by this client's clock: an expired mark is replaced, a missing
// one inserted, and a live one makes the upsert insert a second document
// with the same _id, which the server refuses as a duplicate key: the mark
// exists and MarkSet returns false. Of concurrent callers creating a mark
// that does not exist exactly one insert succeeds, on any server that
// enforces unique _id. Taking over an expired mark is one conditional
// single-document update, atomic on MongoDB; FerretDB v1 updates are not
// atomic under concurrency (see the package doc), so there two callers can
// both take over the same expired mark.
func (d *Driver) MarkSet(ctx context.Context, queue, name string, until time.Time, onlyNew bool) (bool, error) {
	id := markID(queue, name)
	set := bson.D{{Key: "$set", Value: bson.D{
		{Key: "q", Value: queue}, {Key: "n", Value: name}, {Key: "u", Value: markUntil(until)},
	}}}
	upsert := options.UpdateOne().SetUpsert(true)
	if onlyNew {
		filter := bson.D{{Key: "_id", Value: id}, {Key: "u", Value: bson.D{{Key: "$lte", Value: floorMS(time.Now())}}}}
		_, err := d.marks.UpdateOne(ctx, filter, set, upsert)
		if gomongo.IsDuplicateKeyError(err) {
			return false, nil
		}
		if err != nil {
			return false, d.mapErr(ctx, err, "set mark")
		}
		return true, nil
	}
	// Two upserts of one missing _id can both try to insert; MongoDB
	// retries the loser as an update by itself, other servers may refuse
	// it as a duplicate key, after which the document exists and an update
	// finds it.
	var err error
	for range markSetRetries {
		_, err = d.marks.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, set, upsert)
		if !gomongo.IsDuplicateKeyError(err) {
			break
		}
	}
	if err != nil {
		return false, d.mapErr(ctx, err, "set mark")
	}
	return true, nil
}

// MarkGet reports whether mark name of queue exists and has not expired by
// this client's clock (backend.Marker): one read by _id.
func (d *Driver) MarkGet(ctx context.Context, queue, name string) (bool, error) {
	var m markDoc
	err := d.marks.FindOne(ctx, bson.D{{Key: "_id", Value: markID(queue, name)}}).Decode(&m)
	if errors.Is(err, gomongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, d.mapErr(ctx, err, "get mark")
	}
	return m.live(time.Now()), nil
}

// MarkDelete deletes mark name of queue; deleting a mark that does not
// exist is not an error (backend.Marker).
func (d *Driver) MarkDelete(ctx context.Context, queue, name string) error {
	_, err := d.marks.DeleteOne(ctx, bson.D{{Key: "_id", Value: markID(queue, name)}})
	return d.mapErr(ctx, err, "delete mark")
}

// MarkList returns the names of queue's unexpired marks that start with
// prefix, bytewise sorted (backend.MarkLister). It reads the queue's marks
// whose name matches the anchored, quoted prefix (a range of the index
// fila_marks) and sorts them in Go; the expired marks it passes are then
// deleted, best effort, if they are still expired.
func (d *Driver) MarkList(ctx context.Context, queue, prefix string) ([]string, error) {
	filter := bson.D{{Key: "q", Value: queue}}
	if prefix != "" {
		filter = append(filter, bson.E{Key: "n", Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(prefix)}})
	}
	cur, err := d.marks.Find(ctx, filter)
	if err != nil {
		return nil, d.mapErr(ctx, err, "list marks")
	}
	var docs []markDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, d.mapErr(ctx, err, "list marks")
	}
	now := time.Now()
	names := []string{}
	var expired bson.A
	for _, m := range docs {
		if m.live(now) {
			names = append(names, m.Name)
		} else {
			expired = append(expired, m.ID)
		}
	}
	slices.Sort(names)
	if len(expired) > 0 {
		// The expiry is in the filter so that a mark set again since the
		// read stays. A failure changes nothing the caller can see.
		_, _ = d.marks.DeleteMany(ctx, bson.D{
			{Key: "_id", Value: bson.D{{Key: "$in", Value: expired}}},
			{Key: "u", Value: bson.D{{Key: "$lte", Value: floorMS(now)}}},
		})
	}
	return names, nil
}
