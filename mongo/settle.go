package mongo

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/fila-go/fila/backend"
)

// leaseFilter matches a message only while ref's receipt is its current
// lease and the lease's deadline has not passed by this client's clock
// (whether or not another consumer took the message since): the fence of
// every settlement. A lease's deadline is its due time, or for a message
// taken early by ReceiveDelayed (due at its later run-at) its "ld" field.
func leaseFilter(ref backend.Ref) bson.D {
	now := floorMS(time.Now())
	return bson.D{{Key: "_id", Value: ref.ID}, {Key: "q", Value: ref.Queue}, {Key: "r", Value: ref.Receipt},
		{Key: "due", Value: bson.D{{Key: "$gt", Value: now}}},
		{Key: "ld", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$lte", Value: now}}}}}}
}

// Ack deletes the messages whose receipts are current with one deleteOne,
// or one deleteMany for several refs.
// When fewer documents were deleted than refs were given (some leases were
// lost), a second query tells which: a ref whose message still exists under
// another receipt lost its lease. If more refs name messages that are gone
// than were deleted (a settled message acked again in the same call as
// others), the surplus refs get ErrLeaseLost, duplicates of one id first.
func (d *Driver) Ack(ctx context.Context, refs []backend.Ref) ([]error, error) {
	errs := make([]error, len(refs))
	if len(refs) == 0 {
		return errs, nil
	}
	if len(refs) == 1 {
		res, err := d.msgs.DeleteOne(ctx, leaseFilter(refs[0]))
		if err != nil {
			return nil, d.mapErr(ctx, err, "ack")
		}
		if res.DeletedCount == 0 {
			errs[0] = backend.ErrLeaseLost
		}
		return errs, nil
	}
	or := make(bson.A, len(refs))
	for i, ref := range refs {
		or[i] = leaseFilter(ref)
	}
	res, err := d.msgs.DeleteMany(ctx, bson.D{{Key: "$or", Value: or}})
	if err != nil {
		return nil, d.mapErr(ctx, err, "ack")
	}
	if int(res.DeletedCount) == len(refs) {
		return errs, nil
	}
	ids := make([]string, len(refs))
	for i, ref := range refs {
		ids[i] = ref.ID
	}
	exists, err := d.existing(ctx, ids)
	if err != nil {
		return nil, d.mapErr(ctx, err, "ack")
	}
	var gone []int
	seen := map[string]bool{}
	for i, ref := range refs {
		if exists[ref.ID] {
			errs[i] = backend.ErrLeaseLost
			continue
		}
		if seen[ref.ID] {
			errs[i] = backend.ErrLeaseLost // one id is deleted once
			continue
		}
		seen[ref.ID] = true
		gone = append(gone, i)
	}
	// Of the refs whose message is gone, DeletedCount were ours.
	for n := int(res.DeletedCount); n < len(gone); n++ {
		errs[gone[n]] = backend.ErrLeaseLost
	}
	return errs, nil
}

// Retry ends the lease and makes the message claimable again at now+delay,
// keeping reason as its last error (an empty reason keeps the previous). A
// message taken early by ReceiveDelayed is not claimable before its run-at
// (two more round trips in that rare case).
func (d *Driver) Retry(ctx context.Context, ref backend.Ref, delay time.Duration, reason string) error {
	now := time.Now()
	at := now.Add(delay)
	update := func(filter bson.D, at time.Time) (*gomongo.UpdateResult, error) {
		set := bson.D{{Key: "due", Value: dueTime(now, at)}, {Key: "l", Value: false}}
		if reason != "" {
			set = append(set, bson.E{Key: "le", Value: reason})
		}
		return d.msgs.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set},
			{Key: "$unset", Value: bson.D{{Key: "r", Value: ""}, {Key: "hold", Value: ""}, {Key: "ld", Value: ""}}}})
	}
	notHeld := append(leaseFilter(ref), bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "hold", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "hold", Value: bson.D{{Key: "$lte", Value: floorMS(at)}}}},
	}})
	res, err := update(notHeld, at)
	if err != nil {
		return d.mapErr(ctx, err, "retry")
	}
	if res.MatchedCount == 0 {
		// Either the lease is lost or the message is held until a later
		// run-at.
		var doc msgDoc
		err := d.msgs.FindOne(ctx, leaseFilter(ref)).Decode(&doc)
		if errors.Is(err, gomongo.ErrNoDocuments) {
			return backend.ErrLeaseLost
		}
		if err != nil {
			return d.mapErr(ctx, err, "retry")
		}
		at = later(at, doc.Hold)
		if res, err = update(leaseFilter(ref), at); err != nil {
			return d.mapErr(ctx, err, "retry")
		}
		if res.MatchedCount == 0 {
			return backend.ErrLeaseLost
		}
	}
	if !at.After(now) {
		d.notify.Wake(ref.Queue)
	}
	return nil
}

// Extend moves the lease deadline to now + lease. A message taken early by
// ReceiveDelayed stays unclaimable until its run-at even if the new deadline
// is earlier (two more round trips in that rare case).
func (d *Driver) Extend(ctx context.Context, ref backend.Ref, lease time.Duration) (time.Time, error) {
	deadline := ceilMS(time.Now().Add(lease))
	notHeld := append(leaseFilter(ref), bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "hold", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "hold", Value: bson.D{{Key: "$lte", Value: deadline}}}},
	}})
	// Past its run-at a message taken early is an ordinary lease.
	res, err := d.msgs.UpdateOne(ctx, notHeld, bson.D{{Key: "$set", Value: bson.D{{Key: "due", Value: deadline}}},
		{Key: "$unset", Value: bson.D{{Key: "hold", Value: ""}, {Key: "ld", Value: ""}}}})
	if err != nil {
		return time.Time{}, d.mapErr(ctx, err, "extend")
	}
	if res.MatchedCount == 1 {
		return deadline, nil
	}
	// Either the lease is lost or the message is held until a later run-at.
	var doc msgDoc
	err = d.msgs.FindOne(ctx, leaseFilter(ref)).Decode(&doc)
	if errors.Is(err, gomongo.ErrNoDocuments) {
		return time.Time{}, backend.ErrLeaseLost
	}
	if err != nil {
		return time.Time{}, d.mapErr(ctx, err, "extend")
	}
	res, err = d.msgs.UpdateOne(ctx, leaseFilter(ref), bson.D{{Key: "$set", Value: bson.D{{Key: "due", Value: later(deadline, doc.Hold)}, {Key: "ld", Value: deadline}}}})
	if err != nil {
		return time.Time{}, d.mapErr(ctx, err, "extend")
	}
	if res.MatchedCount == 0 {
		return time.Time{}, backend.ErrLeaseLost
	}
	return deadline, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
