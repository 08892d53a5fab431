package mongo

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// ReceiveDelayed claims, without blocking, up to p.Max messages of queue
// whose run-at has not come (for a relay moving a queue to another broker).
// Each claim is a findOneAndUpdate like Receive's; the stored due time
// becomes the later of the lease deadline and the run-at, so a message
// taken early whose lease expires is not claimable before its run-at (the
// run-at is also recorded so that Extend keeps it, with the lease deadline
// so that a later ReceiveDelayed takes it again once that lease expired).
// Each delivery's RunAt is the run-at the message had.
func (d *Driver) ReceiveDelayed(ctx context.Context, queue string, p backend.ReceiveParams) (out []backend.Delivery, err error) {
	taken := bson.A{}
	defer func() {
		// A claim whose lease ended before the call returned (a slow server,
		// a short lease) is left out: its receipt is no longer current and
		// the message can be taken again.
		now := time.Now()
		out = slices.DeleteFunc(out, func(dl backend.Delivery) bool { return !dl.Deadline.After(now) })
	}()
	for len(out) < max(p.Max, 1) {
		now := time.Now()
		receipt := newReceipt()
		deadline := ceilMS(now.Add(p.Lease))
		var before msgDoc
		err = d.msgs.FindOneAndUpdate(ctx,
			bson.D{{Key: "q", Value: queue}, {Key: "due", Value: bson.D{{Key: "$gt", Value: floorMS(now)}}}, {Key: "$or", Value: bson.A{
				bson.D{{Key: "l", Value: false}},
				// taken early before, and that lease expired
				bson.D{{Key: "ld", Value: bson.D{{Key: "$lte", Value: floorMS(now)}}}},
			}},
				// not taken by this call already (its lease may have
				// expired while the call went on)
				{Key: "_id", Value: bson.D{{Key: "$nin", Value: taken}}}},
			bson.D{
				{Key: "$set", Value: bson.D{{Key: "l", Value: true}, {Key: "r", Value: receipt}}},
				{Key: "$max", Value: bson.D{{Key: "due", Value: deadline}}},
				{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}},
			},
			options.FindOneAndUpdate().SetSort(dueSort).SetReturnDocument(options.Before),
		).Decode(&before)
		if errors.Is(err, gomongo.ErrNoDocuments) {
			break
		}
		if err != nil {
			if len(out) > 0 {
				return out, nil // the caller settles what it got
			}
			return nil, d.mapErr(ctx, err, "receive delayed")
		}
		out = append(out, heldDelivery(&before, receipt, deadline))
		taken = append(taken, before.ID)
		// Remember the run-at so that Extend keeps the message held until
		// then. Without it (the write failed) the due time still holds it;
		// only an Extend could bring it forward.
		if _, err := d.msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: before.ID}, {Key: "r", Value: receipt}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "hold", Value: before.Due}, {Key: "ld", Value: deadline}}}}); err != nil {
			d.log.Warn("fila: recording the run-at of a message taken early failed", slog.String("id", before.ID), slog.Any("error", err))
			return out, nil
		}
	}
	return out, nil
}

// heldDelivery is the delivery of a message taken early, from its state
// before the claim.
func heldDelivery(before *msgDoc, receipt string, deadline time.Time) backend.Delivery {
	dl := before.delivery()
	dl.Attempt = before.Attempts + 1
	dl.Receipt = receipt
	dl.Deadline = deadline
	dl.RunAt, dl.Delay = before.Due, 0
	return dl
}

// DeadImport stores dead letters taken from another broker with their
// reasons, attempts and times. Letters whose ids are stored already are
// skipped (an unordered insert that ignores duplicate ids), so a relay that
// crashed between import and purge can run again.
func (d *Driver) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	now := time.Now()
	docs := make([]any, len(letters))
	for i := range letters {
		l := &letters[i]
		dd := &deadDoc{
			ID:          l.ID,
			Queue:       queue,
			Kind:        l.Kind,
			Body:        l.Body,
			Headers:     encodeHeaders(l.Headers),
			Attempts:    l.Attempts,
			MaxAttempts: l.MaxAttempts,
			DedupKey:    l.DedupKey,
			EnqueuedAt:  l.EnqueuedAt.UTC(),
			Priority:    l.Priority,
			Reason:      l.Reason,
			DeadAt:      l.DeadAt.UTC(),
		}
		if !l.RunAt.IsZero() {
			dd.RunAt = l.RunAt.UTC()
		}
		if l.DeadAt.IsZero() {
			dd.DeadAt = now.UTC()
		}
		docs[i] = dd
	}
	_, err := d.dead.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if _, dupOnly := dupKeyIndexes(err); err != nil && !dupOnly {
		return d.mapErr(ctx, err, "import dead letters")
	}
	return nil
}
